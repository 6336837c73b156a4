"""The case catalogue behind scripts/bad_inputs.py: what a bad-input case is, what a demanding
user expects of it, and the tiny configurations every case starts from (so a case that is
wrongly accepted still finishes in about a second instead of training for minutes)."""
import dataclasses
import pathlib
import re
from typing import Callable, Optional

KINDS = ["config", "cmdline", "data", "checkpoint", "output"]
APPS = ["moe_train", "wide_train", "preduce_train", "placement_sim"]

# The smallest runs that still exercise each app's whole path (about a second each, most of it
# MPI start-up). A case adds its own keys after these; a key it sets again replaces the tiny
# value (the apps refuse a key given twice on the command line: see without_replaced_tiny).
TINY = {
    "moe_train": {"model.d_model": "16", "model.heads": "2", "model.layers": "1", "model.seq_len": "16",
                  "model.d_ff": "16", "moe.num_experts": "2", "moe.d_ff": "16", "train.batch_size": "2",
                  "train.iterations": "3", "train.warmup": "1", "train.eval_interval": "3",
                  "train.eval_sequences": "4", "train.log_interval": "1", "data.builtin_bytes": "5000"},
    "wide_train": {"data.train": "synthetic:criteo?rows=300&features=1000&alpha=1.1&seed=1",
                   "data.valid": "", "train.epochs": "1", "model.k": "2", "train.batch_size": "64"},
    "preduce_train": {"simulate": "true", "train.steps": "20", "data.rows": "200", "data.test_rows": "50",
                      "sim.workers": "2", "model.hidden": "8"},
    "placement_sim": {"sim.gpus": "4", "sim.iterations": "5", "sim.tokens_per_gpu": "64", "sim.hidden": "64",
                      "sim.ffn_hidden": "64"},
}


@dataclasses.dataclass
class Expect:
    """What a demanding user wants. `error`: regexes a clear error's stderr must all match (None:
    no error is right). `success`: regexes stdout+stderr must all match on exit 0 (None: exit 0 is
    wrong); with `error` also set, exit 0 is handled too (say, resuming an older intact checkpoint
    with a warning naming the bad file). `creates`: files a success must leave."""
    error: Optional[list] = None
    success: Optional[list] = None
    creates: list = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        parts = []
        if self.error is not None:
            parts.append("error /" + "/ & /".join(self.error) + "/")
        if self.success is not None:
            parts.append("success" + ("" if not self.success else " /" + "/ & /".join(self.success) + "/"))
        if self.creates:
            parts.append("creates " + ", ".join(self.creates))
        return " or ".join(parts)


def error(*regexes: str) -> Expect:
    return Expect(error=list(regexes))


def success(*regexes: str) -> Expect:
    return Expect(success=list(regexes))


@dataclasses.dataclass
class Case:
    """One bad input. `args` and file contents may say {dir}: the case's own temporary directory
    (also its working directory). `prepare(dir)` runs before the app (copies and corrupts a
    checkpoint, say); `needs` names shared set-ups it reads (see state_cases.SETUPS)."""
    id: str
    kind: str
    app: str
    args: list
    expect: Expect
    files: dict = dataclasses.field(default_factory=dict)
    ranks: int = 1
    prepare: Optional[Callable[[pathlib.Path], None]] = None
    needs: tuple = ()
    stdout_to: Optional[str] = None  # a path stdout is written to instead of a pipe (/dev/full)
    note: str = ""


def tiny_args(app: str, drop=(), **extra) -> list:
    """TINY[app] as --key=value, without the keys in `drop` (a case that sets them in an INI file:
    the command line would win over the file)."""
    values = {k: v for k, v in TINY[app].items() if k not in drop}
    values.update(extra)  # a key given in `extra` replaces the tiny value: a key twice is refused
    return [f"--{k}={v}" for k, v in values.items()]


def without_replaced_tiny(app: str, args: list) -> list:
    """`args` without the tiny --key=value arguments of TINY[app] whose key a later argument sets
    again (--key=value or --key value), so a case's own value replaces the tiny one."""
    def key_of(arg):
        return arg[2:].split("=", 1)[0] if arg.startswith("--") else None
    out = []
    for i, arg in enumerate(args):
        key = key_of(arg)
        tiny = key in TINY.get(app, {}) and arg == f"--{key}={TINY[app][key]}"
        if not (tiny and any(key_of(later) == key for later in args[i + 1:])):
            out.append(arg)
    return out


def key_re(key: str) -> str:
    """A regex naming `key` as a whole word (train.lr must not match train.lr_decay)."""
    return r"(?<![\w.])" + re.escape(key) + r"(?![\w])"


def place_re(name: str, line: Optional[int] = None) -> str:
    """A regex naming a file (by its base name) and, when given, its line: 'case.ini:3'."""
    return re.escape(name) + (f":{line}(?!\\d)" if line is not None else "")


def all_cases(env) -> list:
    from . import config_cases, data_cases, state_cases
    cases = config_cases.cases(env) + data_cases.cases(env) + state_cases.cases(env)
    seen = set()
    for c in cases:
        if c.id in seen:
            raise ValueError(f"duplicate case id {c.id}")
        if c.kind not in KINDS:
            raise ValueError(f"case {c.id}: unknown kind {c.kind}")
        seen.add(c.id)
    return cases
