#!/usr/bin/env python3
"""A catalogue of bad inputs run against the built apps (issue 17): malformed config values and
command lines, data files, damaged checkpoints and unwritable outputs. Each case runs the app in
its own temporary directory with a timeout and ends in one outcome:

  clear_error   exit status 1-ish and stderr names what is at fault (key, file:line, file and tensor)
  handled       exit 0 where the case allows it: an older checkpoint resumed with a warning naming the
                damaged file, a missing output directory created
  success       exit 0 where the input is good and must be accepted
  vague_error   exit non-zero, but stderr does not name what is at fault
  crash         killed by a signal, or stderr shows an abort, uncaught exception or sanitizer report
  hang          still running at the timeout
  accepted      exit 0 on a bad input (silently accepted)
  refused       exit non-zero on a good input
  wrong_output  exit 0 on a good input, without the output the case looks for
  case_error    the case could not be prepared (its damage no longer fits the files the apps write)

The first three are as expected. Prints one line per case that is not, then counts by kind and
outcome; exits 1 if any case is not as expected. Cases: scripts/bad_input_cases/."""
import argparse
import collections
import concurrent.futures
import json
import pathlib
import re
import resource
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bad_input_cases import APPS, KINDS, all_cases  # noqa: E402
from bad_input_cases.runner import EXPECTED, OUTCOMES, Env, run_case  # noqa: E402

def table(results: list) -> str:
    counts = collections.defaultdict(collections.Counter)
    for r in results:
        counts[r["kind"]][r["outcome"]] += 1
    cols = [o for o in OUTCOMES if any(counts[k][o] for k in counts)]
    head = ["kind"] + cols + ["total", "as expected"]
    rows = []
    for k in KINDS + ["all"]:
        c = counts[k] if k != "all" else sum(counts.values(), collections.Counter())
        total = sum(c.values())
        if total:
            rows.append([k] + [str(c[o]) for o in cols] + [str(total), str(sum(c[o] for o in EXPECTED))])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    fmt = lambda r: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths)))  # noqa
    return "\n".join([fmt(head)] + [fmt(r) for r in rows])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", type=pathlib.Path, nargs="?", help="build directory with apps/<app> built")
    ap.add_argument("--kind", choices=KINDS, action="append", help="only cases of this kind (repeatable)")
    ap.add_argument("--app", choices=APPS, action="append", help="only cases of this app (repeatable)")
    ap.add_argument("--id", help="only cases whose id matches this regex")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=15,
                    help="seconds before a case counts as a hang (default 15: the slowest good case took 3.4 s "
                         "on two cores shared with three builds)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--json", type=pathlib.Path, help="write every case's result and the counts here")
    ap.add_argument("--mpirun", default="mpirun", help="launcher of the multi-rank cases (default mpirun)")
    ap.add_argument("--keep", action="store_true", help="keep the cases' directories (printed at the end)")
    ap.add_argument("--self-test", action="store_true",
                    help="check the runner's verdicts on stand-in shell scripts instead (no build needed)")
    a = ap.parse_args()
    if a.self_test:
        from bad_input_cases import self_test
        return self_test.run()
    if a.build is None:
        ap.error("BUILD directory needed (or --self-test)")
    missing = [app for app in APPS if not (a.build / "apps" / app).exists()]
    if missing:
        print(f"bad_inputs: {a.build}/apps lacks {', '.join(missing)}: build them first", file=sys.stderr)
        return 2
    work = pathlib.Path(tempfile.mkdtemp(prefix="bad_inputs_"))
    try:
        return run(a, Env(a.build.resolve(), work, a.mpirun))
    finally:
        if a.keep and not a.list:
            print(f"case directories kept under {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(a, env: Env) -> int:
    cases = [c for c in all_cases(env) if (not a.kind or c.kind in a.kind) and (not a.app or c.app in a.app)
             and (not a.id or re.search(a.id, c.id))]
    if a.list:
        for c in cases:
            print(f"{c.id}  [{c.kind}, {c.app}{', np' + str(c.ranks) if c.ranks > 1 else ''}]  expect "
                  f"{c.expect.describe()}  args: {' '.join(c.args[len(c.args) - 3:])}")
        print(f"{len(cases)} cases", file=sys.stderr)
        return 0
    start = time.monotonic()
    for name in sorted({n for c in cases for n in c.needs}):
        env.setup(name)
    results, lock = [], threading.Lock()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for r in pool.map(lambda c: run_case(c, env, a.timeout), cases):
            with lock:
                results.append(r)
                if not r["as_expected"]:
                    last = (r["stderr_tail"].strip().splitlines() or [""])[-1][:160]
                    print(f"NOT AS EXPECTED: {r['id']}: {r['outcome']} (exit {r['exit']}, {r['seconds']} s)"
                          f"; expected {r['expect'][:120]}; stderr: {last}", flush=True)
    print()
    print(table(results))
    bad = [r["id"] for r in results if not r["as_expected"]]
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\n{len(results)} cases in {time.monotonic() - start:.0f} s ({cpu.ru_utime + cpu.ru_stime:.0f} CPU s); "
          f"{len(results) - len(bad)} as expected, {len(bad)} not")
    if a.json:
        counts = collections.defaultdict(collections.Counter)
        for r in results:
            counts[r["kind"]][r["outcome"]] += 1
        a.json.write_text(json.dumps({"cases": results, "counts": counts, "total": len(results),
                                      "not_as_expected": sum(not r["as_expected"] for r in results)},
                                     indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
