"""Kinds `config` (bad values, generated from each app's --help, plus values in range that must
be refused together) and `cmdline` (flags, --config files, INI syntax)."""
import itertools
import os
import subprocess

from . import APPS, Case, error, key_re, place_re, success, tiny_args
from .schema import FLOAT_GARBAGE, INT_GARBAGE, garbage_values

# moe_train declares the [placement] keys through the same function as placement_sim
# (apps/placement_options.cpp): they are tried once, in placement_sim.
SHARED_ELSEWHERE = {"moe_train": ("placement.",)}


def ini_for(key: str, value: str) -> tuple:
    """An INI text setting `key` and the line it is on (line 1 is a comment, so a message that
    says ':1' for every error does not pass by luck)."""
    if "." not in key:
        return f"# bad input case\n{key} = {value}\n", 2
    section, name = key.split(".", 1)
    return f"# bad input case\n\n[{section}]\n{name} = {value}\n", 4


def value_case(app: str, key: str, value: str, label: str, source: str) -> Case:
    cid = f"config:{app}:{key}={label}:{source}"
    if source == "cli":
        return Case(cid, "config", app, tiny_args(app, drop=(key,)) + [f"--{key}={value}"],
                    error(key_re(key)), note=f"--{key}={value!r}")
    text, line = ini_for(key, value)
    return Case(cid, "config", app, tiny_args(app, drop=(key,)) + ["--config", "{dir}/case.ini"],
                error(place_re("case.ini", line), key_re(key)), files={"case.ini": text}, note=f"{key} = {value!r}")


def value_cases(app: str, keys: list) -> list:
    skip = SHARED_ELSEWHERE.get(app, ())
    keys = [k for k in keys if not k.name.startswith(skip)]
    out, sources = [], itertools.cycle(["cli", "cli", "cli", "ini"])
    # Range edges, one in four from an INI file. A key with no declared range gets both edges of
    # the range it should have (schema.DEMANDED). A declared range is enforced by one code path
    # (Config::store) for every key, so each such key gets one edge, below and above by turns.
    edge_turn = itertools.cycle([0, 1])
    for k in keys:
        edges = [("below_min", k.below()), ("above_max", k.above())]
        edges = [(label, value) for label, value in edges if value is not None and k.type in ("int", "float")]
        if k.declared and len(edges) == 2:
            edges = [edges[next(edge_turn)]]
        for label, value in edges:
            out.append(value_case(app, k.name, value, label, next(sources)))
        if k.type == "choice":
            out.append(value_case(app, k.name, "bogus", "unknown_choice", next(sources)))
        if k.type == "bool":
            out.append(value_case(app, k.name, "maybe", "maybe", next(sources)))
    # Malformed numbers go through one parser per type: each is tried once per app and type, on
    # the command line or in a file by turns, on keys taken in turn.
    for type_, garbage in (("int", INT_GARBAGE + ["4294967297"]), ("float", FLOAT_GARBAGE)):
        typed = [k for k in keys if k.type == type_]
        if not typed:
            continue
        turn = 0
        for n, value in enumerate(garbage):
            for source in [("cli", "ini")[(n + len(type_)) % 2]]:
                # the next key in turn that must refuse this value (2^32 + 1 only out of range)
                fits = [typed[(turn + j) % len(typed)] for j in range(len(typed))]
                fits = [k for k in fits if value in garbage_values(k)]
                if not fits:
                    continue
                k = fits[0]
                turn = typed.index(k) + 1
                label = {"": "empty"}.get(value, value)
                out.append(value_case(app, k.name, value, label, source))
    return out


def joint(app, cid, keys, *args, ranks=1, extra_re=()) -> Case:
    """Values each in range but wrong together: the error must name every key at fault."""
    return Case(f"config:{app}:{cid}", "config", app, tiny_args(app) + list(args),
                error(*[key_re(k) for k in keys], *extra_re), ranks=ranks)


def joint_cases() -> list:
    return [
        joint("moe_train", "d_model_not_multiple_of_heads", ["model.d_model", "model.heads"],
              "--model.d_model=18", "--model.heads=4"),
        joint("moe_train", "top_k_above_experts", ["moe.top_k", "moe.num_experts"], "--moe.top_k=3"),
        joint("moe_train", "experts_not_multiple_of_ranks_np2", ["moe.num_experts"], "--moe.num_experts=3", ranks=2),
        joint("moe_train", "seq_len_above_corpus", ["model.seq_len"], "--model.seq_len=6000"),
        joint("moe_train", "flexmoe_slots_below_experts_per_rank", ["placement.slots_per_rank"],
              "--moe.policy=flexmoe", "--moe.num_experts=4", "--placement.slots_per_rank=1"),
        joint("moe_train", "resume_without_checkpoint_dir", ["output.resume", "output.checkpoint_dir"],
              "--output.resume=true"),
        joint("moe_train", "eval_sequences_below_ranks_np2", ["train.eval_sequences"], "--train.eval_sequences=1",
              ranks=2),
        joint("preduce_train", "group_size_above_workers", ["preduce.group_size"], "--preduce.group_size=3"),
        joint("preduce_train", "group_size_above_ranks_np2", ["preduce.group_size"], "--simulate=false",
              "--preduce.group_size=3", ranks=2),
        joint("preduce_train", "rows_below_workers", ["data.rows"], "--data.rows=1"),
        joint("preduce_train", "refresh_staleness_one_with_overlap", ["preduce.refresh_staleness"],
              "--preduce.overlap=true", "--preduce.refresh_staleness=1"),
        joint("preduce_train", "fm_on_clusters", ["model.kind", "data.source"], "--model.kind=fm"),
        joint("preduce_train", "mlp_on_ctr", ["model.kind", "data.source"], "--data.source=synthetic_ctr"),
        joint("preduce_train", "slowdown_below_one", ["hetero.slowdown"], "--hetero.slowdown=1,0.5"),
        joint("preduce_train", "slowdown_not_a_number", ["hetero.slowdown"], "--hetero.slowdown=1,abc"),
        joint("preduce_train", "slowdown_nan", ["hetero.slowdown"], "--hetero.slowdown=1,nan"),
        joint("preduce_train", "slowdown_inf", ["hetero.slowdown"], "--hetero.slowdown=1,inf"),
        joint("preduce_train", "slowdown_1e300", ["hetero.slowdown"], "--hetero.slowdown=1,1e300"),
        joint("preduce_train", "slowdown_trailing_junk", ["hetero.slowdown"], "--hetero.slowdown=1,2x"),
        joint("preduce_train", "slowdown_empty_item", ["hetero.slowdown"], "--hetero.slowdown=1,,4"),
        joint("preduce_train", "link_ms_inf", ["hetero.link_ms"], "--hetero.link_ms=0,inf"),
        joint("preduce_train", "link_ms_negative", ["hetero.link_ms"], "--hetero.link_ms=0,-1"),
        joint("preduce_train", "hidden_not_a_number", ["model.hidden"], "--model.hidden=8,abc"),
        joint("preduce_train", "hidden_zero", ["model.hidden"], "--model.hidden=0"),
        joint("preduce_train", "hidden_negative", ["model.hidden"], "--model.hidden=-4"),
        joint("preduce_train", "hidden_empty_item", ["model.hidden"], "--model.hidden=8,,8"),
        joint("placement_sim", "top_k_above_experts", ["sim.top_k"], "--sim.top_k=5", "--sim.experts_per_gpu=1"),
        joint("placement_sim", "scaling_not_a_number", ["sim.scaling"], "--sim.scaling=8,abc"),
        joint("placement_sim", "scaling_zero", ["sim.scaling"], "--sim.scaling=0"),
        joint("placement_sim", "scaling_negative", ["sim.scaling"], "--sim.scaling=-8"),
        joint("placement_sim", "scaling_fraction", ["sim.scaling"], "--sim.scaling=8,2.5"),
        joint("placement_sim", "scaling_inf", ["sim.scaling"], "--sim.scaling=8,inf"),
        joint("placement_sim", "slots_below_experts_per_gpu", ["placement.slots_per_rank"],
              "--sim.experts_per_gpu=2", "--placement.slots_per_rank=1"),
        joint("wide_train", "train_empty", ["data.train"], "--data.train="),
        joint("wide_train", "synthetic_rows_not_a_number", ["rows"], "--data.train=synthetic:criteo?rows=abc&features=1000"),
        joint("wide_train", "synthetic_rows_negative", ["rows"], "--data.train=synthetic:criteo?rows=-5&features=1000"),
        joint("wide_train", "synthetic_rows_zero", ["rows"], "--data.train=synthetic:criteo?rows=0&features=1000"),
        joint("wide_train", "synthetic_unknown_generator", ["synthetic:bogus"], "--data.train=synthetic:bogus?rows=10"),
        joint("wide_train", "synthetic_unknown_parameter", ["bogus"],
              "--data.train=synthetic:criteo?rows=10&features=1000&bogus=1"),
        joint("wide_train", "synthetic_alpha_nan", ["alpha"], "--data.train=synthetic:criteo?rows=10&features=1000&alpha=nan"),
        joint("wide_train", "features_below_data", ["model.features"], "--model.features=3"),
    ]


def cmd(app, cid, args, expect, files=None, prepare=None, tiny=True) -> Case:
    return Case(f"cmdline:{app}:{cid}", "cmdline", app, (tiny_args(app) if tiny else []) + args, expect,
                files=files or {}, prepare=prepare)


# A typo of a real key per app, and a key to leave without its value.
TYPO = {"moe_train": ("train.lrr", "train.lr"), "wide_train": ("model.kk", "model.k"),
        "preduce_train": ("preduce.group_sise", "preduce.group_size"), "placement_sim": ("sim.gpu", "sim.gpus")}
NO_VALUE = {"moe_train": "train.lr", "wide_train": "train.lr", "preduce_train": "train.lr", "placement_sim": "sim.zipf"}
# One valid key = value per app for the INI files that must be accepted: [section] and line.
GOOD = {"moe_train": ("train", "iterations", "2"), "wide_train": ("train", "epochs", "1"),
        "preduce_train": ("train", "steps", "10"), "placement_sim": ("sim", "iterations", "4")}
# INI syntax errors, spread over the apps: (name, text, bad line).
SYNTAX = [("section_unclosed", "# c\n[train\nlr = 0.1\n", 2), ("line_without_equals", "[train]\nlr 0.1\n", 2),
          ("empty_key", "[train]\n = 0.1\n", 2), ("unterminated_quote", '[train]\nlr = "0.1\n', 2),
          ("unknown_section", "# c\n[bogus]\nx = 1\n", 3), ("key_outside_section", "lr = 0.1\n", 1),
          ("key_twice", "[train]\nlr = 0.1\nlr = 0.2\n", 3), ("empty_section_name", "[]\nx = 1\n", 1),
          ("value_after_quote", '[train]\nlr = "0.1" 2\n', 2)]


def printed_config_prepare(env, app):
    def prepare(d):
        text = subprocess.run([env.exe(app), "--print-config"] + tiny_args(app), capture_output=True,
                              check=True, timeout=60).stdout
        (d / "printed.ini").write_bytes(text)
    return prepare


def make_fifo(d):
    """A named pipe that a writer fills, as `--config <(generate_ini)` gives: the config is read
    from it like a file. (A pipe nobody writes to waits, as `cat` does; that is not refused.)"""
    os.mkfifo(d / "fifo.ini")
    subprocess.Popen(["timeout", "30", "sh", "-c", "printf '[train]\\niterations = 2\\n' > fifo.ini"], cwd=d,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cmdline_cases(env) -> list:
    out = []
    for i, app in enumerate(APPS):
        typo, right = TYPO[app]
        sec, name, value = GOOD[app]
        out += [
            cmd(app, "unknown_flag", ["--frobnicate"], error(r"unknown.*frobnicate")),
            cmd(app, "single_dash_flag", ["-x"], error(r"'-x'|\"-x\"| -x\b")),
            cmd(app, "typo_key", [f"--{typo}=1"], error(key_re(typo), r"did you mean.*" + key_re(right))),
            cmd(app, "positional_argument", ["stray"], error(r"stray")),
            cmd(app, "key_without_value", [f"--{NO_VALUE[app]}"], error(key_re(NO_VALUE[app]))),
            cmd(app, "config_without_file", ["--config"], error(r"--config")),
            cmd(app, "config_missing_file", ["--config", "{dir}/missing.ini"], error(place_re("missing.ini"))),
            cmd(app, "config_directory", ["--config", "{dir}"], error(r"is a directory")),
            cmd(app, "config_binary_file", ["--config", "{dir}/blob.ini"], error(place_re("blob.ini") + r":\d"),
                files={"blob.ini": bytes(range(256)) * 4}),
            cmd(app, "ini_with_bom", ["--config", "{dir}/bom.ini"], success(),
                files={"bom.ini": f"\ufeff[{sec}]\n{name} = {value}\n".encode("utf-8")}),
            cmd(app, "ini_crlf", ["--config", "{dir}/crlf.ini"], success(),
                files={"crlf.ini": f"# windows\r\n[{sec}]\r\n{name} = {value}   # why\r\n"}),
            cmd(app, "print_config_round_trip", ["--config", "{dir}/printed.ini"], success(),
                prepare=printed_config_prepare(env, app)),
            cmd(app, "help", ["--help"], success(r"usage: " + app)),
        ]
        for name_, text, line in SYNTAX[i::len(APPS)] + SYNTAX[(i + 1) % len(APPS)::len(APPS)][:1]:
            out.append(cmd(app, f"ini_{name_}", ["--config", "{dir}/bad.ini"], error(place_re("bad.ini", line)),
                           files={"bad.ini": text}))
    out += [
        cmd("moe_train", "config_fifo", ["--config", "{dir}/fifo.ini"], success(r'"iterations":2'), prepare=make_fifo,
            tiny=False),
        cmd("preduce_train", "key_twice", ["--train.steps=5", "--train.steps=20"],
            error(key_re("train.steps"), "twice")),
        Case("cmdline:preduce_train:two_configs_merge_later_wins", "cmdline", "preduce_train",
             tiny_args("preduce_train", drop=("train.steps", "sim.workers")) +
             ["--config", "{dir}/a.ini", "--config", "{dir}/b.ini"], success(r'"steps":12', r'"workers":3'),
             files={"a.ini": "[train]\nsteps = 10\n[sim]\nworkers = 3\n", "b.ini": "[train]\nsteps = 12\n"}),
        cmd("placement_sim", "space_separated_value", ["--sim.iterations", "4"], success(r'"iterations":4')),
    ]
    return out


def cases(env) -> list:
    out = []
    for app in APPS:
        out += value_cases(app, env.schema(app))
    return out + joint_cases() + cmdline_cases(env)
