#!/usr/bin/env python3
"""One benchmark run's record and line, for the bench scripts.

  bench_record.py FILE USED NAME KEY...

FILE holds the run's summary JSON (an app's last stdout line). The machine the run was timed on
goes into it as "machine": the CPU model (/proc/cpuinfo), the cores and `uptime`'s load averages
(/proc/loadavg). Printed: "NAME: KEY VALUE, ... | load L" with every figure to 4 significant
digits (not a double's 17), and, on stderr, a warning where the 1-minute load exceeds the cores
the run leaves free (nproc minus USED, its ranks x threads): its timings are then not comparable.
"""
import json
import math
import os
import sys


def significant(value, digits=4):
    """`value` to `digits` significant digits: fixed from 1e-3 up to 1e6, scientific outside
    (as apps/bench/table.hpp's significant())."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    text = f"{value:.{digits - 1}e}"
    exponent = int(text.split("e")[1])
    if exponent < -3 or exponent >= 6:
        return text
    decimals = digits - 1 - exponent
    if decimals > 0:
        return f"{value:.{decimals}f}"
    unit = 10.0 ** -decimals
    return f"{round(value / unit) * unit:.0f}"


def machine(cpuinfo="/proc/cpuinfo", loadavg="/proc/loadavg"):
    model = "unknown"
    with open(cpuinfo) as f:
        for line in f:
            if line.startswith("model name") and ":" in line:
                model = line.split(":", 1)[1].strip()
                break
    with open(loadavg) as f:
        one, five, fifteen = (float(x) for x in f.read().split()[:3])
    return {"cpu_model": model, "cores": os.cpu_count() or 1, "load_1m": one, "load_5m": five, "load_15m": fifteen}


def load_warning(m, used):
    free = max(0, m["cores"] - used)
    if m["load_1m"] <= free:
        return None
    return (f"WARNING: load {significant(m['load_1m'], 3)} over the {free} core(s) this run leaves free "
            f"({m['cores']} cores, {used} used): timings are not comparable")


def line(name, summary, keys):
    figures = ", ".join(f"{k} {significant(summary[k])}" for k in keys if k in summary)
    return f"{name}: {figures} | load {significant(summary['machine']['load_1m'], 3)}"


def main(path, used, name, *keys):
    with open(path) as f:
        summary = json.loads(f.read())
    summary["machine"] = machine()
    with open(path, "w") as f:
        f.write(json.dumps(summary) + "\n")
    print(line(name, summary, keys))
    warning = load_warning(summary["machine"], int(used))
    if warning:
        print(warning, file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
