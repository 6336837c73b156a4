"""Checks the runner's verdicts on stand-in apps (/bin/sh scripts) whose outcome is known: an
error naming the key, a vague one, an uncaught exception, a signal, a hang (and that its child
is gone after the timeout), silent acceptance, a handled fallback, a missing output file."""
import pathlib
import tempfile
import time

from . import Case, Expect, error, key_re, success
from .runner import Env, run_case


class ShellEnv(Env):
    def exe(self, app: str) -> str:
        return "/bin/sh"


def sh(cid, script, expect, **kw) -> Case:
    return Case(f"self:{cid}", "config", "sh", ["-c", script], expect, **kw)


def broken_prepare(d):
    raise ValueError("no such tensor")


CASES = [
    (sh("clear", "echo \"command line: bad value 'x' for key 'train.lr'\" >&2; exit 1", error(key_re("train.lr"))),
     "clear_error"),
    (sh("other_key", "echo \"bad value for key 'train.lr_decay'\" >&2; exit 1", error(key_re("train.lr"))),
     "vague_error"),
    (sh("vague", "echo 'error: check failed' >&2; exit 1", error(key_re("train.lr"))), "vague_error"),
    (sh("name_on_stdout_only", "echo train.lr; exit 1", error(key_re("train.lr"))), "vague_error"),
    (sh("uncaught", "echo \"terminate called after throwing 'std::out_of_range' train.lr\" >&2; exit 1",
        error(key_re("train.lr"))), "crash"),
    (sh("signal", "kill -SEGV $$", error("x")), "crash"),
    (sh("exit_134", "exit 134", error("x")), "crash"),
    (sh("hang", "sleep 60 & echo $! > {dir}/child; wait", error("x")), "hang"),
    (sh("accepted", "exit 0", error("x")), "accepted"),
    (sh("good", "echo '{\"steps\":20}'", success(r'"steps":20')), "success"),
    (sh("good_wrong_output", "echo '{\"steps\":5}'", success(r'"steps":20')), "wrong_output"),
    (sh("good_refused", "echo 'error: no' >&2; exit 1", success()), "refused"),
    (sh("fallback", "echo 'warning: ck/step_4/a.st is corrupt; resumed from ck/step_2' >&2",
        Expect(error=["step_4/a"], success=["step_4/a", "resumed from .*step_2"])), "handled"),
    (sh("fallback_unsaid", "exit 0", Expect(error=["step_4/a"], success=["step_4/a"])), "accepted"),
    (sh("creates", "mkdir -p {dir}/no && touch {dir}/no/m.jsonl",
        Expect(error=["no/"], success=[], creates=["no/m.jsonl"])), "handled"),
    (sh("creates_nothing", "exit 0", Expect(error=["no/"], success=[], creates=["no/m.jsonl"])), "accepted"),
    (sh("files_written", "test \"$(cat {dir}/sub/f.ini)\" = 'k = 1' || exit 0; echo 'f.ini:1: bad' >&2; exit 1",
        error(r"f\.ini:1"), files={"sub/f.ini": "k = 1"}), "clear_error"),
    (sh("stdout_full", "echo 'a summary' || { echo 'cannot write to stdout' >&2; exit 1; }", error("stdout"),
        stdout_to="/dev/full"), "clear_error"),
    (sh("prepare_fails", "exit 0", error("x"), prepare=broken_prepare), "case_error"),
]


def running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run() -> int:
    failures = []
    with tempfile.TemporaryDirectory(prefix="bad_inputs_self_") as work:
        env = ShellEnv(pathlib.Path("/nonexistent"), pathlib.Path(work))
        for case, want in CASES:
            r = run_case(case, env, timeout=2)
            if r["outcome"] != want:
                failures.append(f"{case.id}: {r['outcome']}, expected {want} ({r['stderr_tail'].strip()[:200]})")
            if case.id == "self:hang":
                child = int((pathlib.Path(r["dir"]) / "child").read_text())
                time.sleep(0.2)  # let the kill land and the orphan be reaped
                if running(child):
                    failures.append(f"{case.id}: the hung case's child {child} outlived the timeout")
    for f in failures:
        print(f"self-test FAILED {f}")
    print(f"self-test: {len(CASES) - len(failures)} of {len(CASES)} verdicts right")
    return 1 if failures else 0
