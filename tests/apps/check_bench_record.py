#!/usr/bin/env python3
"""scripts/bench_record.py: figures to 4 significant digits (the cases of the C++ tables' test and
the rounding bound over many decades), /proc parsing, the load warning's rule, and a run's
summary stamped with its machine."""
import io
import json
import os
import random
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import bench_record as br  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


for value, digits, text in [(1234.5678, 4, "1235"), (12.345678, 4, "12.35"), (0.0012345678, 4, "0.001235"),
                            (123456.7, 4, "123500"), (9.9996, 4, "10.00"), (999999.6, 4, "1.000e+06"),
                            (12345678.9, 4, "1.235e+07"), (0.00012345678, 4, "1.235e-04"), (-0.5, 4, "-0.5000"),
                            (2 / 3, 3, "0.667"), (0.0, 4, "0"), (float("nan"), 4, "nan"), (7, 4, "7.000")]:
    check(br.significant(value, digits) == text, f"significant({value}, {digits}) = {br.significant(value, digits)}")
check(br.significant("static") == "static", "text passes through")
rng = random.Random(34)
for _ in range(2000):
    v = rng.choice([-1, 1]) * rng.uniform(1, 10) * 10.0 ** rng.randint(-9, 12)
    for d in (3, 4):
        back = float(br.significant(v, d))
        check(abs(back - v) <= 0.5 * 10.0 ** (1 - d) * abs(v) * (1 + 1e-12), f"{v} to {d} digits: {back}")

with tempfile.TemporaryDirectory() as tmp:
    cpuinfo, loadavg = os.path.join(tmp, "cpuinfo"), os.path.join(tmp, "loadavg")
    open(cpuinfo, "w").write("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.90GHz  \nmodel name\t: x\n")
    open(loadavg, "w").write("3.14 2.00 1.50 3/456 7890\n")
    m = br.machine(cpuinfo, loadavg)
    check(m["cpu_model"] == "Intel(R) Xeon(R) CPU @ 2.90GHz", f"cpu model {m['cpu_model']}")
    check((m["load_1m"], m["load_5m"], m["load_15m"]) == (3.14, 2.0, 1.5), f"loads {m}")
    m["cores"] = 4
    check(br.load_warning(m, 0) is None, "3.14 fits 4 free cores")
    check(br.load_warning(m, 2) == "WARNING: load 3.14 over the 2 core(s) this run leaves free (4 cores, 2 used): "
          "timings are not comparable", f"warning {br.load_warning(m, 2)}")
    summary_path = os.path.join(tmp, "run.json")
    open(summary_path, "w").write(json.dumps({"app": "moe_train", "step_s": 0.48640231959999997,
                                              "tokens_per_s": 4210.506236245343}) + "\n")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        br.main(summary_path, str(os.cpu_count() or 1), "static.0", "step_s", "tokens_per_s", "missing")
    stamped = json.load(open(summary_path))
    check(set(stamped["machine"]) == {"cpu_model", "cores", "load_1m", "load_5m", "load_15m"}, f"stamped {stamped}")
    check(stamped["step_s"] == 0.48640231959999997, "the run's own figures kept whole")
    check(out.getvalue().startswith("static.0: step_s 0.4864, tokens_per_s 4211 | load "), f"line {out.getvalue()}")
    # Every core used: any load at all is over the none left free.
    check((stamped["machine"]["load_1m"] > 0) == ("WARNING: load" in err.getvalue()), f"stderr {err.getvalue()}")

print("\n".join(failures) if failures else "PASS")
sys.exit(1 if failures else 0)
