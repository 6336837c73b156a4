#!/usr/bin/env python3
"""A catalogue of bad inputs run against the built apps (issue 17): malformed config values and
command lines, data files, damaged checkpoints and unwritable outputs. Each case runs the app in
its own temporary directory with a timeout and ends in one outcome:

  clear_error   exit status 1-ish and stderr names what is at fault (key, file:line, file and tensor)
  fallback      exit 0 after a handled fallback the case allows (older checkpoint, warning naming the file)
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
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bad_input_cases import APPS, KINDS, all_cases  # noqa: E402
from bad_input_cases.schema import read_schema  # noqa: E402
from bad_input_cases.state_cases import SETUPS  # noqa: E402

OUTCOMES = ["clear_error", "fallback", "success", "vague_error", "crash", "hang", "accepted", "refused",
            "wrong_output", "case_error"]
EXPECTED = {"clear_error", "fallback", "success"}
# Text that means the program died rather than refused: an uncaught C++ exception, a library
# assertion, a sanitizer report, a signal reported by mpirun or the C library.
CRASH_TEXT = re.compile(r"terminate called|std::bad_alloc|bad_alloc|vector::_M_range_check|basic_string::|"
                        r"what\(\):|Sanitizer|runtime error:|Aborted|Segmentation fault|core dumped|"
                        r"exited on signal|Floating point exception|Illegal instruction|Bus error|"
                        r"stack smashing|double free|free\(\): invalid|malloc\(\): |Assertion .* failed")


class Env:
    """The build directory's apps, their schemas, and the shared set-ups (a written checkpoint,
    a saved model) that checkpoint cases copy before damaging."""

    def __init__(self, build: pathlib.Path, work: pathlib.Path, mpirun: str = "mpirun"):
        self.build, self.work, self.mpirun = build, work, mpirun
        self.shared = work / "shared"
        self._schemas = {}

    def exe(self, app: str) -> str:
        return str(self.build / "apps" / app)

    def schema(self, app: str):
        if app not in self._schemas:
            self._schemas[app] = read_schema(self.exe(app), app)
        return self._schemas[app]

    def copy_shared(self, rel: str, dest: pathlib.Path):
        dest.write_bytes((self.shared / rel).read_bytes())

    def setup(self, name: str):
        d = self.shared / name
        d.mkdir(parents=True)
        try:
            SETUPS[name](self, d)
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"bad_inputs: set-up '{name}' failed (exit {e.returncode}): {e.cmd}\n"
                             f"{e.stderr.decode(errors='replace')[-2000:]}")


def app_env() -> dict:
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_mpi_yield_when_idle": "1",
                "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    return env


def read_known(path: pathlib.Path) -> set:
    ids = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids.add(line.split()[0])
    return ids


def write_files(d: pathlib.Path, files: dict):
    for name, content in files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def run_case(case, env: Env, timeout: float) -> dict:
    d = pathlib.Path(tempfile.mkdtemp(prefix="case_", dir=env.work))
    write_files(d, case.files)
    if case.prepare:
        try:
            case.prepare(d)
        except Exception as e:  # a damage that no longer fits the files the apps write
            return {"id": case.id, "kind": case.kind, "app": case.app, "outcome": "case_error", "as_expected": False,
                    "exit": None, "seconds": 0, "expect": case.expect.describe(),
                    "stderr_tail": f"preparing the case failed: {type(e).__name__}: {e}", "dir": str(d)}
    argv = [env.exe(case.app)] + [a.replace("{dir}", str(d)) for a in case.args]
    if case.ranks > 1:
        argv = [env.mpirun, "-np", str(case.ranks), "--oversubscribe"] + argv
    stdout = open(case.stdout_to, "wb") if case.stdout_to else subprocess.PIPE
    start = time.monotonic()
    # Its own session, so a timeout ends the app and everything it started (mpirun's ranks,
    # the singleton's helper) by that one process group id.
    p = subprocess.Popen(argv, cwd=d, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                         env=app_env(), start_new_session=True)
    hung = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    finally:
        if case.stdout_to:
            stdout.close()
    seconds = time.monotonic() - start
    out = (out or b"").decode(errors="replace")
    err = err.decode(errors="replace")
    outcome = classify(case, d, p.returncode, hung, out, err)
    return {"id": case.id, "kind": case.kind, "app": case.app, "outcome": outcome, "as_expected": outcome in EXPECTED,
            "exit": p.returncode, "seconds": round(seconds, 2), "expect": case.expect.describe(),
            "stderr_tail": err[-600:], "dir": str(d)}


def classify(case, d: pathlib.Path, rc: int, hung: bool, out: str, err: str) -> str:
    e = case.expect
    if hung:
        return "hang"
    if rc < 0 or rc >= 128 or CRASH_TEXT.search(err):
        return "crash"
    if rc == 0:
        if e.success is None:
            return "accepted"
        both = out + err
        ok = all(re.search(r, both) for r in e.success) and all((d / f).exists() for f in e.creates)
        if ok:
            return "fallback" if e.error is not None else "success"
        return "accepted" if e.error is not None else "wrong_output"
    if e.error is None:
        return "refused"
    return "clear_error" if all(re.search(r, err) for r in e.error) else "vague_error"


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
    ap.add_argument("build", type=pathlib.Path, help="build directory with apps/<app> built")
    ap.add_argument("--kind", choices=KINDS, action="append", help="only cases of this kind (repeatable)")
    ap.add_argument("--app", choices=APPS, action="append", help="only cases of this app (repeatable)")
    ap.add_argument("--id", help="only cases whose id matches this regex")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=20, help="seconds before a case counts as a hang (20)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--json", type=pathlib.Path, help="write every case's result and the counts here")
    ap.add_argument("--mpirun", default="mpirun", help="launcher of the multi-rank cases (default mpirun)")
    ap.add_argument("--known", type=pathlib.Path,
                    help="file of case ids known not to end as expected yet (one per line, '#' comments): "
                         "only other cases make the exit status 1, and listed cases that now pass are named")
    ap.add_argument("--keep", action="store_true", help="keep the cases' directories (printed at the end)")
    a = ap.parse_args()
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
    known = read_known(a.known) if a.known else set()
    results, lock = [], threading.Lock()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for r in pool.map(lambda c: run_case(c, env, a.timeout), cases):
            with lock:
                results.append(r)
                if not r["as_expected"]:
                    last = (r["stderr_tail"].strip().splitlines() or [""])[-1][:160]
                    tag = "known, not as expected" if r["id"] in known else "NOT AS EXPECTED"
                    print(f"{tag}: {r['id']}: {r['outcome']} (exit {r['exit']}, {r['seconds']} s)"
                          f"; expected {r['expect'][:120]}; stderr: {last}", flush=True)
    print()
    print(table(results))
    bad = [r["id"] for r in results if not r["as_expected"]]
    print(f"\n{len(results)} cases in {time.monotonic() - start:.0f} s; {len(results) - len(bad)} as expected, "
          f"{len(bad)} not")
    if a.known:
        fixed = sorted(known & {r["id"] for r in results if r["as_expected"]})
        for cid in fixed:
            print(f"now as expected (delete it from {a.known}): {cid}")
        new = [cid for cid in bad if cid not in known]
        print(f"{len(bad) - len(new)} not as expected are listed in {a.known}; {len(new)} are not")
        bad = new
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
