"""Each app's keys as its --help prints them (type, declared range, choices), and the ranges a
demanding user expects of the keys that declare none yet. A declared range always wins: the
table only fills the gaps, so it goes stale harmlessly as the schemas gain ranges."""
import dataclasses
import re
import subprocess
from typing import Optional

KEY_LINE = re.compile(r"^  --(\S+) \((.*), default (.*)\)$")
INT_BOUNDED = re.compile(r"^int in \[(-?\d+), (-?\d+)\]$")
INT_AT_LEAST = re.compile(r"^int >= (-?\d+)$")
FLOAT_RANGE = re.compile(r"^float (?:in ([\[(])(\S+), (\S+)([\])])|(>=|>) (\S+))$")
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


@dataclasses.dataclass
class Key:
    name: str
    type: str  # int, float, bool, choice, string, int list, float list
    default: str
    choices: list = dataclasses.field(default_factory=list)
    lo: Optional[float] = None  # bounds of the accepted values (None: unbounded that side)
    hi: Optional[float] = None
    lo_open: bool = False
    hi_open: bool = False
    declared: bool = False  # the range comes from the app, not from DEMANDED below

    def contains(self, v: float) -> bool:
        if self.lo is not None and (v < self.lo or (self.lo_open and v == self.lo)):
            return False
        return not (self.hi is not None and (v > self.hi or (self.hi_open and v == self.hi)))

    def below(self) -> Optional[str]:
        """The nearest value under the range: min - 1 for ints, min itself when open."""
        if self.lo is None:
            return None
        if self.type == "int":
            return str(int(self.lo) - 1)
        return fmt(self.lo) if self.lo_open else fmt(self.lo - max(1.0, abs(self.lo)))

    def above(self) -> Optional[str]:
        if self.hi is None or (self.type == "int" and self.hi >= INT64_MAX):
            return None
        if self.type == "int":
            return str(int(self.hi) + 1)
        return fmt(self.hi) if self.hi_open else fmt(self.hi + max(1.0, abs(self.hi)))


def fmt(v: float) -> str:
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)


# What a demanding user expects of keys declared without a range ("int in [1, 1024]" style, as
# --help prints declared ones), chosen to agree with the ranged keys of the other apps: sizes
# and counts at least 1, weights and rates not negative, betas in [0, 1), seeds >= 0.
DEMANDED = {
    "moe_train": {
        "data.builtin_bytes": "int in [2, 1073741824]", "model.d_model": "int in [1, 65536]",
        "model.heads": "int in [1, 1024]", "model.layers": "int in [1, 1024]",
        "model.seq_len": "int in [1, 1048576]", "model.d_ff": "int in [1, 1048576]",
        "model.moe_every": "int in [1, 2]", "model.init_std": "float > 0",
        "moe.num_experts": "int in [1, 65536]", "moe.top_k": "int in [1, 64]", "moe.d_ff": "int in [1, 1048576]",
        "moe.aux_weight": "float >= 0", "moe.z_weight": "float >= 0", "moe.jitter": "float in [0, 1)",
        "moe.capacity_factor": "float > 0", "moe.eval_capacity_factor": "float > 0",
        "train.batch_size": "int in [1, 1048576]", "train.iterations": f"int in [1, {INT32_MAX}]",
        "train.lr": "float > 0", "train.min_lr_ratio": "float in [0, 1]", "train.warmup": f"int in [0, {INT32_MAX}]",
        "train.weight_decay": "float >= 0", "train.beta1": "float in [0, 1)", "train.beta2": "float in [0, 1)",
        "train.grad_clip": "float >= 0", "train.seed": "int >= 0", "train.eval_interval": f"int in [1, {INT32_MAX}]",
        "train.eval_sequences": "int in [1, 1048576]", "train.log_interval": f"int in [1, {INT32_MAX}]",
        "train.blas_threads": "int in [0, 1024]", "output.checkpoint_interval": f"int in [0, {INT32_MAX}]",
        "output.keep": "int in [1, 1048576]",
    },
    "wide_train": {
        "model.k": "int in [1, 1024]", "model.features": "int in [0, 4294967295]", "model.init_std": "float >= 0",
        "model.seed": "int >= 0", "train.lr": "float > 0", "train.l2": "float >= 0", "train.l1": "float >= 0",
        "train.ftrl_beta": "float >= 0", "train.epochs": "int in [1, 1048576]",
        "train.batch_size": "int in [1, 16777216]", "train.threads": "int in [1, 1024]",
        "train.patience": "int in [0, 1048576]", "train.tile_samples": "int in [1, 1048576]",
        "train.hot_features": "int in [0, 1073741824]", "train.replica_budget_mb": "int in [0, 1048576]",
        "train.log_every": f"int in [1, {INT32_MAX}]",
    },
}


def parse_type(k: Key, text: str) -> None:
    """Fills k's type, choices and bounds from --help's "(TYPE ..., default" text."""
    if text.startswith("choice: "):
        k.type, k.choices = "choice", text[len("choice: "):].split("|")
        return
    k.type = text.split()[0]
    if text.split()[1:2] == ["list"]:  # "int list in [1, 64]": the items' cases are listed by hand
        k.type = k.type + " list"
        return
    if k.type == "int":
        if m := INT_BOUNDED.match(text):
            k.lo, k.hi = int(m.group(1)), int(m.group(2))
        elif m := INT_AT_LEAST.match(text):
            k.lo = int(m.group(1))
    elif k.type == "float" and (m := FLOAT_RANGE.match(text)):
        if m.group(5):
            k.lo, k.lo_open = float(m.group(6)), m.group(5) == ">"
        else:
            k.lo, k.hi = float(m.group(2)), float(m.group(3))
            k.lo_open, k.hi_open = m.group(1) == "(", m.group(4) == ")"
    k.declared = k.lo is not None or k.hi is not None


def read_schema(exe: str, app: str) -> list:
    text = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True, timeout=60).stdout
    keys = []
    for line in text.splitlines():
        if m := KEY_LINE.match(line):
            k = Key(m.group(1), "", m.group(3).strip('"'))
            parse_type(k, m.group(2))
            if not k.declared and k.name in DEMANDED.get(app, {}):
                parse_type(k, DEMANDED[app][k.name])
                k.declared = False
            keys.append(k)
    if not keys:
        raise RuntimeError(f"{exe} --help lists no keys: has its format changed?")
    return keys


# Malformed values every int or float key must refuse, whatever its range. Integer overflow is
# 2^63 (past int64); 2^32 + 1 is added only where the key's range excludes it.
INT_GARBAGE = ["nan", "inf", "", "abc", "1x", "0x10", "1.5", "9223372036854775808", "-9223372036854775809", "1e400"]
FLOAT_GARBAGE = ["nan", "inf", "-inf", "", "abc", "1x", "1,5", "1e400", "-1e400"]


def garbage_values(k: Key) -> list:
    if k.type == "int":
        extra = [] if k.contains(2**32 + 1) else ["4294967297"]
        return INT_GARBAGE + extra
    if k.type == "float":
        return FLOAT_GARBAGE
    return []

