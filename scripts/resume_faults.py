#!/usr/bin/env python3
"""Checkpoint faults for each app, deterministic (issue 38): what a resume makes of them.

    scripts/resume_faults.py BUILD_DIR APP      APP: moe | wide | preduce_sim | preduce_np2

Reference: one straight run with checkpoints every few steps. Then, each against it:
  kill  the run dies by SIGKILL halfway through writing its shard of a middle checkpoint step
        (SKEW_TEST_KILL_IN_CHECKPOINT, core/checkpoint.cpp: a half-written temporary file, no
        marker), is resumed, and must end with a final model byte-identical to the reference's.
  flip  one byte flipped in the middle of a tensor of the newest checkpoint's shard: the resume
        must skip that step with a warning naming the file, redo it from the previous step, and
        end byte-identical to the reference.
The final model: the newest checkpoint's shards (moe, preduce) and output.model (wide), tensor by
tensor, leaving out only what depends on the wall clock (wide's run.*_seconds; the MPI preduce
workers' w*.totals and w*.series, accuracy sampled on a grid of wall-clock seconds). Exits non-zero naming what differs.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")
ENV.pop("SKEW_TEST_KILL_IN_CHECKPOINT", None)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Per app: the command (before the checkpoint keys), the step to die in, the tensors that hold
# wall-clock seconds, and whether output.model is part of the final model.
WIDE_DATA = "synthetic:criteo?rows=3000&features=5000&alpha=1.1&seed=2"
APPS = {
    "moe": dict(ranks=1, app="moe_train", kill_step=8, timing=(), model_file=False,
                args=["--config", os.path.join(ROOT, "configs", "moe.ini"), "--train.iterations=16",
                      "--train.eval_interval=8", "--train.log_interval=0", "--output.checkpoint_interval=4"]),
    "wide": dict(ranks=1, app="wide_train", kill_step=20, timing=("run.epoch_seconds", "run.train_seconds"),
                 model_file=True,
                 args=[f"--data.train={WIDE_DATA}", "--train.batch_size=256", "--train.epochs=3",
                       "--train.threads=1", "--output.checkpoint_interval=5"]),
    "preduce_sim": dict(ranks=1, app="preduce_train", kill_step=40, timing=(), model_file=False,
                        args=["--config", os.path.join(ROOT, "configs", "preduce.ini"), "--simulate",
                              "--train.steps=80", "--output.checkpoint_interval=20"]),
    "preduce_np2": dict(ranks=2, app="preduce_train", kill_step=40, timing=("w0.totals", "w1.totals", "w0.series", "w1.series"),
                        model_file=False,
                        args=["--config", os.path.join(ROOT, "configs", "preduce.ini"), "--sync.mode=allreduce",
                              "--train.steps=80", "--output.checkpoint_interval=20"]),
}


def command(build, spec, case_dir, resume):
    app = os.path.join(os.path.abspath(build), "apps", spec["app"])
    cmd = [app] + spec["args"] + [f"--output.checkpoint_dir={os.path.join(case_dir, 'ckpt')}", "--output.keep=2",
                                  f"--output.resume={'true' if resume else 'false'}"]
    if spec["model_file"]:
        cmd.append(f"--output.model={os.path.join(case_dir, 'model.safetensors')}")
    if spec["ranks"] > 1:
        cmd = ["mpirun", "-np", str(spec["ranks"]), "--oversubscribe"] + cmd
    return cmd


def run(build, spec, case_dir, resume, extra_env=None):
    env = dict(ENV, **(extra_env or {}))
    p = subprocess.run(command(build, spec, case_dir, resume), env=env, capture_output=True, text=True,
                       timeout=300)
    return p.returncode, p.stderr


def tensors(path):
    """{name: (dtype, shape, bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {k: (v["dtype"], v["shape"], blob[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in header.items()}


def newest_step(ckpt):
    steps = sorted(d for d in os.listdir(ckpt) if d.startswith("step_")
                   and os.path.exists(os.path.join(ckpt, d, "COMPLETE")))
    return os.path.join(ckpt, steps[-1])


def model_files(spec, case_dir):
    step = newest_step(os.path.join(case_dir, "ckpt"))
    files = {os.path.join(os.path.basename(step), f): os.path.join(step, f)
             for f in sorted(os.listdir(step)) if f.endswith(".safetensors")}
    if spec["model_file"]:
        files["model.safetensors"] = os.path.join(case_dir, "model.safetensors")
    return files


def difference(spec, ref_dir, case_dir):
    """What of the final model differs from the reference's ('' when nothing)."""
    ref, got = model_files(spec, ref_dir), model_files(spec, case_dir)
    if sorted(ref) != sorted(got):
        return f"files {sorted(got)} are not the reference's {sorted(ref)}"
    for name in ref:
        a, b = tensors(ref[name]), tensors(got[name])
        if sorted(a) != sorted(b):
            return f"{name}: tensors {sorted(b)} are not the reference's {sorted(a)}"
        for t in a:
            if t not in spec["timing"] and a[t] != b[t]:
                return f"{name}: tensor {t} differs from the reference's"
    return ""


def kill_case(build, spec, work, ref_dir):
    case = os.path.join(work, "kill")
    step = spec["kill_step"]
    rc, err = run(build, spec, case, False, {"SKEW_TEST_KILL_IN_CHECKPOINT": str(step)})
    step_dir = os.path.join(case, "ckpt", f"step_{step:08d}")
    left = sorted(os.listdir(step_dir)) if os.path.isdir(step_dir) else []
    if rc == 0:
        return f"the run meant to die in step {step}'s checkpoint exited 0"
    if not any(".tmp." in f for f in left) or "COMPLETE" in left:
        return f"the kill did not land mid-write: step {step} holds {left}"
    rc, err = run(build, spec, case, True)
    if rc != 0:
        return f"the resume failed: {err.strip()[-400:]}"
    if "skipping checkpoint step" in err:
        return "the resume skipped a step, though the torn one had no marker and the older ones are intact"
    return difference(spec, ref_dir, case)


def flip_case(build, spec, work, ref_dir):
    case = os.path.join(work, "flip")
    shutil.copytree(ref_dir, case)
    shard = os.path.join(newest_step(os.path.join(case, "ckpt")), "rank_00000.safetensors")
    with open(shard, "r+b") as f:
        header = int.from_bytes(f.read(8), "little")
        at = 8 + header + (os.path.getsize(shard) - 8 - header) // 2  # the middle of the tensor data
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))
    rc, err = run(build, spec, case, True)
    if rc != 0:
        return f"the resume failed: {err.strip()[-400:]}"
    if not any("skipping checkpoint step" in line and shard in line for line in err.splitlines()):
        return f"no warning named the damaged {shard}: {err.strip()[-400:]}"
    return difference(spec, ref_dir, case)


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in APPS:
        sys.exit(__doc__)
    build, spec = sys.argv[1], APPS[sys.argv[2]]
    with tempfile.TemporaryDirectory(prefix="skew-resume-faults-") as work:
        ref_dir = os.path.join(work, "reference")
        rc, err = run(build, spec, ref_dir, False)
        if rc != 0:
            sys.exit(f"resume_faults: the reference run failed:\n{err}")
        failed = False
        for name, case in (("kill", kill_case), ("flip", flip_case)):
            lost = case(build, spec, work, ref_dir)
            print(f"resume_faults {sys.argv[2]}: {name}: {'LOST: ' + lost if lost else 'byte-identical final model'}")
            failed = failed or bool(lost)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
