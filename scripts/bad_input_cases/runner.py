"""Runs one bad-input case and names its outcome (the list is in scripts/bad_inputs.py)."""
import os
import pathlib
import re
import signal
import subprocess
import tempfile
import time

from . import without_replaced_tiny
from .schema import read_schema
from .state_cases import SETUPS

OUTCOMES = ["clear_error", "handled", "success", "vague_error", "crash", "hang", "accepted", "refused",
            "wrong_output", "case_error"]
EXPECTED = {"clear_error", "handled", "success"}
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
    argv = [env.exe(case.app)] + [a.replace("{dir}", str(d)) for a in without_replaced_tiny(case.app, case.args)]
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
            return "handled" if e.error is not None else "success"
        return "accepted" if e.error is not None else "wrong_output"
    if e.error is None:
        return "refused"
    return "clear_error" if all(re.search(r, err) for r in e.error) else "vague_error"
