"""Kinds `checkpoint` (a moe_train checkpoint and a wide_train model, written once by a tiny run,
then damaged copy by copy) and `output` (output paths that cannot be written)."""
import json
import math
import shutil
import struct
import subprocess

from . import Case, Expect, error, key_re, place_re, success, tiny_args

STEP2, STEP4 = "ck/step_00000002", "ck/step_00000004"
SHARD = "rank_00000.safetensors"


def write_moe_checkpoint(env, d):
    """Steps 2 and 4 of a 4-iteration run (checkpoint every 2): a resume to 6 iterations starts at
    4, or at 2 when a checker falls back past a damaged step 4."""
    subprocess.run([env.exe("moe_train")] + tiny_args("moe_train", **{
        "train.iterations": "4", "output.checkpoint_dir": str(d / "ck"), "output.checkpoint_interval": "2"}),
        capture_output=True, check=True, timeout=120, cwd=d)


def write_wide_model(env, d):
    subprocess.run([env.exe("wide_train")] + tiny_args("wide_train", **{"output.model": str(d / "model.safetensors")}),
                   capture_output=True, check=True, timeout=120, cwd=d)


SETUPS = {"moe_ckpt": write_moe_checkpoint, "wide_model": write_wide_model}


def layout(path):
    """(bytes, header length, header) of a safetensors file."""
    b = path.read_bytes()
    n = int.from_bytes(b[:8], "little")
    return b, n, json.loads(b[8:8 + n])


def set_value(path, tensor, index, value):
    b, n, h = layout(path)
    at = 8 + n + h[tensor]["data_offsets"][0] + 4 * index
    path.write_bytes(b[:at] + struct.pack("<f", value) + b[at + 4:])


def flip_data_bit(path, tensor):
    b, n, h = layout(path)
    at = 8 + n + (h[tensor]["data_offsets"][0] + h[tensor]["data_offsets"][1]) // 2
    path.write_bytes(b[:at] + bytes([b[at] ^ 0x10]) + b[at + 1:])


def edit_header(path, old, new):
    """Replaces text of the same length in the JSON header (so the data offsets stay put)."""
    b, n, _ = layout(path)
    header = b[8:8 + n].decode()
    assert len(old) == len(new) and old in header, (old, new)
    path.write_bytes(b[:8] + header.replace(old, new, 1).encode() + b[8 + n:])


def offsets_past_end(path, tensor):
    _, _, h = layout(path)
    a, b = h[tensor]["data_offsets"]
    edit_header(path, f"[{a},{b}]", f"[{a},{'9' * len(str(b))}]")


def shape_shrunk(path, tensor):
    """The tensor's first dimension one less, where that keeps the digit count (5568 -> 5567)."""
    _, _, h = layout(path)
    shape = h[tensor]["shape"]
    edit_header(path, json.dumps(shape, separators=(",", ":")),
                json.dumps([shape[0] - 1] + shape[1:], separators=(",", ":")))


def dtype_changed(path, tensor):
    b, n, h = layout(path)
    header = b[8:8 + n].decode()
    at = header.index(f'"{tensor}":')
    dtype = header.index('"F32"', at)
    path.write_bytes(b[:8] + (header[:dtype] + '"F16"' + header[dtype + 5:]).encode() + b[8 + n:])


def truncate(path, size=None):
    b = path.read_bytes()
    path.write_bytes(b[: len(b) // 2 if size is None else size])


def moe_ckpt(env, cid, damage, expect, extra=(), ranks=1) -> Case:
    def prepare(d):
        shutil.copytree(env.shared / "moe_ckpt" / "ck", d / "ck")
        damage(d)
    return Case(f"checkpoint:moe_train:{cid}", "checkpoint", "moe_train",
                tiny_args("moe_train", **{"train.iterations": "6", "output.checkpoint_dir": "{dir}/ck",
                                          "output.resume": "true"}) + list(extra),
                expect, prepare=prepare, needs=("moe_ckpt",), ranks=ranks)


def handled(*names, step=STEP2):
    """A clear error naming `names`, or a resume from the older intact `step` with a warning
    naming them."""
    res = [place_re(n) if "/" in n or "." in n else key_re(n) for n in names]
    return Expect(error=res, success=res + [r"resumed from .*" + place_re(step)])


def checkpoint_cases(env) -> list:
    s4 = lambda d: d / STEP4 / SHARD  # noqa: E731
    shard = f"{STEP4}/{SHARD}"
    out = [
        moe_ckpt(env, "shard_truncated", lambda d: truncate(s4(d)), handled(shard)),
        moe_ckpt(env, "shard_empty", lambda d: truncate(s4(d), 0), handled(shard)),
        moe_ckpt(env, "shard_header_length_huge", lambda d: s4(d).write_bytes((2**62).to_bytes(8, "little") +
                                                                         s4(d).read_bytes()[8:]), handled(shard)),
        moe_ckpt(env, "shard_header_not_json", lambda d: edit_header(s4(d), '{"__metadata__"', '{"__metadata__['),
                 handled(shard)),
        moe_ckpt(env, "shard_offsets_past_end", lambda d: offsets_past_end(s4(d), "dense.w"), handled(shard)),
        moe_ckpt(env, "shard_shape_changed", lambda d: shape_shrunk(s4(d), "dense.w"), handled(shard, "dense.w")),
        moe_ckpt(env, "shard_dtype_changed", lambda d: dtype_changed(s4(d), "dense.w"),
                 handled(shard, "dense.w")),
        moe_ckpt(env, "shard_trailing_bytes", lambda d: s4(d).write_bytes(s4(d).read_bytes() + b"junk" * 16),
                 handled(shard)),
        moe_ckpt(env, "tensor_bit_flipped", lambda d: flip_data_bit(s4(d), "dense.w"), handled(shard, "dense.w")),
        moe_ckpt(env, "tensor_nan", lambda d: set_value(s4(d), "dense.w", 5, math.nan), handled(shard, "dense.w")),
        moe_ckpt(env, "expert_tensor_inf", lambda d: set_value(s4(d), "moe0.e1.w", 3, math.inf),
                 handled(shard, "moe0.e1.w")),
        moe_ckpt(env, "adam_moment_negative_v", lambda d: set_value(s4(d), "dense.v", 7, -1.0), handled(shard, "dense.v")),
        moe_ckpt(env, "shard_deleted", lambda d: s4(d).unlink(), handled(shard)),
        moe_ckpt(env, "index_garbage", lambda d: (d / STEP4 / "index.json").write_text("{garbage"),
                 handled(f"{STEP4}/index.json")),
        moe_ckpt(env, "index_deleted", lambda d: (d / STEP4 / "index.json").unlink(), handled(f"{STEP4}/index.json")),
        moe_ckpt(env, "complete_without_shards", lambda d: ((d / "ck/step_00000005").mkdir(),
                                                       (d / "ck/step_00000005/COMPLETE").write_text("world_size=1\n")),
                 handled("ck/step_00000005", step=STEP4)),
        moe_ckpt(env, "complete_garbage", lambda d: (d / STEP4 / "COMPLETE").write_text("\x00garbage"),
                 handled(f"{STEP4}/COMPLETE")),
        # A marker that disagrees with its step's index: that step is not trusted.
        moe_ckpt(env, "complete_world_size_2", lambda d: (d / STEP4 / "COMPLETE").write_text("world_size=2\n"),
                 handled(STEP4 + "/index.json")),
        moe_ckpt(env, "all_steps_truncated", lambda d: (truncate(s4(d)), truncate(d / STEP2 / SHARD)),
                 error(place_re(SHARD))),
        # A config that no longer matches the checkpoint: the step (file or directory) and the
        # tensor or key that differ.
        moe_ckpt(env, "resume_other_d_model", lambda d: None, error(place_re(STEP4), r"dense\.w|model\.d_model"),
                 ["--model.d_model=32"]),
        moe_ckpt(env, "resume_other_policy", lambda d: None, error(place_re(STEP4), key_re("moe.policy")),
                 ["--moe.policy=deepspeed"]),
        moe_ckpt(env, "resume_other_experts", lambda d: None,
                 error(place_re(STEP4), r"dense\.w|moe\.num_experts|moe0\.e\d"), ["--moe.num_experts=4"]),
        # moe_train re-shards experts and their AdamW moments when the rank count changes.
        moe_ckpt(env, "resume_np2_from_np1", lambda d: None, success(r"resumed from .*" + place_re(STEP4)), ranks=2),
        moe_ckpt(env, "resume_empty_dir", lambda d: (shutil.rmtree(d / "ck"), (d / "ck").mkdir()), success()),
    ]
    out += [wide_model(env, cid, damage, expect) for cid, damage, expect in [
        ("model_truncated", lambda p: truncate(p), error(place_re("model.safetensors"))),
        ("model_empty", lambda p: truncate(p, 0), error(place_re("model.safetensors"))),
        ("model_header_length_huge", lambda p: p.write_bytes((2**62).to_bytes(8, "little") + p.read_bytes()[8:]),
         error(place_re("model.safetensors"))),
        ("model_params_nan", lambda p: set_value(p, "params", 1, math.nan), error(place_re("model.safetensors"),
                                                                                  r"params")),
        ("model_params_bit_flipped", lambda p: flip_data_bit(p, "params"),
         error(place_re("model.safetensors"), r"params")),
        ("model_k_changed", lambda p: edit_header(p, '"k":"2"', '"k":"9"'), error(place_re("model.safetensors"))),
        ("model_kind_changed", lambda p: edit_header(p, '"kind":"fm"', '"kind":"lr"'),
         error(place_re("model.safetensors"))),
        ("model_missing", lambda p: p.unlink(), error(place_re("model.safetensors"))),
    ]]
    return out


def wide_model(env, cid, damage, expect) -> Case:
    def prepare(d):
        shutil.copy(env.shared / "wide_model" / "model.safetensors", d / "model.safetensors")
        damage(d / "model.safetensors")
    return Case(f"checkpoint:wide_train:{cid}", "checkpoint", "wide_train",
                ["--predict", "--predict.model={dir}/model.safetensors", "--predict.data={dir}/p.libsvm"], expect,
                files={"p.libsvm": "1 1:1 7:0.5\n0 3:1\n"}, prepare=prepare, needs=("wide_model",))


def output_cases() -> list:
    """Each output key pointed at a path in a missing directory (created, or an error naming it),
    at a directory and at /dev/full (an error naming it)."""
    out = []
    targets = [("moe_train", "output.metrics", "m.jsonl", ()), ("moe_train", "moe.save_trace", "tr", ()),
               ("wide_train", "output.model", "model.safetensors", ()), ("wide_train", "output.dir", "out", ()),
               ("preduce_train", "output.curve", "curve.csv", ()),
               ("preduce_train", "output.metrics", "m%r.jsonl", ("--simulate=false", "--sync.mode=allreduce")),
               # skewed enough that the (paper) planner changes the placement, planning from the first
               # iteration without a noise margin: /dev/full gets written
               ("placement_sim", "output.changes", "changes.jsonl",
                ("--sim.zipf=1.5", "--placement.warmup=1", "--placement.noise_z=0")),
               ("placement_sim", "output.plans", "plans.jsonl",
                ("--sim.zipf=1.5", "--placement.warmup=1", "--placement.noise_z=0")),
               ("placement_sim", "output.steps_csv", "steps.csv", ()),
               ("placement_sim", "output.summary_csv", "summary.csv", ()), ("placement_sim", "output.table", "t.md", ())]
    for app, key, name, extra in targets:
        written = name.replace("%r", "0") + (".rank0" if key == "moe.save_trace" else "")
        base = tiny_args(app) + list(extra)
        out += [
            Case(f"output:{app}:{key}:missing_dir", "output", app, base + [f"--{key}={{dir}}/no/such/{name}"],
                 Expect(error=[place_re("no/such/")], success=[], creates=[f"no/such/{written}"]))]
        if key != "output.dir":  # a directory is what output.dir wants
            out.append(Case(f"output:{app}:{key}:directory", "output", app, base + [f"--{key}={{dir}}/taken/{name}"],
                            error(place_re(f"taken/{written}")), files={f"taken/{written}/keep": ""}))
        if key not in ("moe.save_trace", "output.dir"):  # these append to the name: never /dev
            out.append(Case(f"output:{app}:{key}:dev_full", "output", app, base + [f"--{key}=/dev/full"],
                            error(place_re("/dev/full"))))
    out.append(Case("output:wide_train:output.dir:dev_full", "output", "wide_train",
                    tiny_args("wide_train", **{"output.dir": "/dev/full"}), error(place_re("/dev/full"))))
    out.append(Case("output:wide_train:output.dir:regular_file", "output", "wide_train",
                    tiny_args("wide_train", **{"output.dir": "{dir}/plain"}), error(place_re("plain")),
                    files={"plain": "a file\n"}))
    out.append(Case("output:moe_train:output.checkpoint_dir:regular_file", "output", "moe_train",
                    tiny_args("moe_train", **{"output.checkpoint_dir": "{dir}/plain"}), error(place_re("plain")),
                    files={"plain": "a file\n"}))
    for app in ("moe_train", "wide_train", "preduce_train", "placement_sim"):
        out.append(Case(f"output:{app}:stdout:dev_full", "output", app, tiny_args(app), error(r"stdout"),
                        stdout_to="/dev/full"))
    return out


def cases(env) -> list:
    return checkpoint_cases(env) + output_cases()
