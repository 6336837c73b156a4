#!/usr/bin/env python3
"""Fault injection for moe_train's checkpoints (issue 17): what is lost when things break.

    scripts/fault_check.py BUILD_DIR [--kills 12] [--seed 1] [--json FILE]

Reference: one straight 2-rank run with a checkpoint after every iteration. Then, each against
that reference:
  kill      a rank is SIGKILLed at a random moment, again and again, each time followed by a
            resumed run (checkpoints every iteration, so kills land inside checkpoint writes and
            pruning too); the job must end within a few seconds of each kill, and the finally
            completed run must match the reference bit for bit (final losses and every shard).
  flip      one byte flipped inside a tensor of the newest checkpoint: the resume must skip that
            step with a warning naming the file and redo it from the previous one, ending equal.
  disk-full the checkpoint directory on a tmpfs too small for a second checkpoint: the run must
            fail naming the file, and a resume (given room) must end equal to the reference.
            Skipped, saying so, where tmpfs cannot be mounted (not root).
Exits non-zero when anything was lost or a fault was not reported.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ITERATIONS = 48
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1")


class Runner:
    def __init__(self, build, root):
        self.app = os.path.join(os.path.abspath(build), "apps", "moe_train")
        if not os.access(self.app, os.X_OK):
            sys.exit(f"fault_check: no moe_train in {build}/apps: build it first")
        self.config = os.path.join(root, "configs", "moe.ini")

    def command(self, ckpt, resume, iterations=ITERATIONS):
        return ["mpirun", "-np", "2", "--oversubscribe", self.app, "--config", self.config,
                f"--train.iterations={iterations}", "--train.eval_interval=8", "--train.log_interval=0",
                f"--output.checkpoint_dir={ckpt}", "--output.checkpoint_interval=1", "--output.keep=2",
                f"--output.resume={'true' if resume else 'false'}"]

    def run(self, ckpt, resume, timeout=300):
        p = subprocess.run(self.command(ckpt, resume), env=ENV, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr


def summary_of(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("{") and '"app"' in line:
            return json.loads(line)
    return None


def final_step_dir(ckpt):
    steps = sorted(d for d in os.listdir(ckpt) if d.startswith("step_"))
    return os.path.join(ckpt, steps[-1]) if steps else None


def same_result(ref_summary, ref_ckpt, summary, ckpt):
    """Why the run differs from the reference ('' when it does not)."""
    if summary is None:
        return "no summary"
    # A resume that found the last step already done runs no iteration and reports no loss;
    # otherwise its last iteration is the reference's and so must its losses be.
    if summary.get("final_loss") is not None:
        for key in ("final_loss", "final_val_loss"):
            if summary.get(key) != ref_summary.get(key):
                return f"{key} {summary.get(key)} != {ref_summary.get(key)}"
    a, b = final_step_dir(ref_ckpt), final_step_dir(ckpt)
    if a is None or b is None or os.path.basename(a) != os.path.basename(b):
        return f"newest step {b} is not the reference's {a}"
    for name in sorted(os.listdir(a)):
        if name.endswith(".safetensors"):
            with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
                if x.read() != y.read():
                    return f"{name} differs from the reference's"
    return ""


def error_line(stderr):
    """skew's own error line (Open MPI's notes follow it)."""
    lines = [l for l in stderr.splitlines() if "error:" in l]
    return lines[0].strip() if lines else stderr.strip()[-300:]


def torn_steps(ckpt):
    """Step directories a kill left behind unfinished: no COMPLETE marker."""
    if not os.path.isdir(ckpt):
        return 0
    return sum(1 for d in os.listdir(ckpt)
               if d.startswith("step_") and not os.path.exists(os.path.join(ckpt, d, "COMPLETE")))


def kill_test(runner, work, ref, kills, rng, straight_seconds):
    ckpt = os.path.join(work, "kill")
    report = {"kills": 0, "torn_steps_seen": 0, "max_seconds_to_end": 0.0, "lost": ""}
    resume = False
    for _ in range(kills):
        job = subprocess.Popen(runner.command(ckpt, resume), env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        # Start-up takes a while; a kill then lands at a random iteration, a fraction of a run on.
        time.sleep(rng.uniform(0.2, 0.4 * straight_seconds))
        ranks = subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True, text=True).stdout.split()
        if job.poll() is not None or not ranks:
            job.communicate()
            break  # the job finished before the kill: the remaining kills have nothing to hit
        os.kill(int(rng.choice(ranks)), signal.SIGKILL)
        killed = time.monotonic()
        try:
            job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            report["lost"] = "the job did not end within 60 s of a rank being killed"
            return report
        report["max_seconds_to_end"] = max(report["max_seconds_to_end"], time.monotonic() - killed)
        report["kills"] += 1
        report["torn_steps_seen"] += torn_steps(ckpt)
        resume = True
    rc, out, err = runner.run(ckpt, resume=True)
    if rc != 0:
        report["lost"] = f"the final resume failed: {error_line(err)}"
    else:
        report["lost"] = same_result(ref[0], ref[1], summary_of(out), ckpt)
    return report


def flip_test(runner, work, ref):
    ckpt = os.path.join(work, "flip")
    shutil.copytree(ref[1], ckpt)
    newest = final_step_dir(ckpt)
    shard = os.path.join(newest, "rank_00001.safetensors")
    with open(shard, "r+b") as f:
        header = int.from_bytes(f.read(8), "little")
        size = os.path.getsize(shard)
        at = 8 + header + (size - 8 - header) // 2  # the middle of the tensor data
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))
    rc, out, err = runner.run(ckpt, resume=True)
    report = {"flipped": f"{shard} byte {at}", "warned": "rank_00001.safetensors" in err, "lost": ""}
    if rc != 0:
        report["lost"] = f"the resume failed: {error_line(err)}"
    elif not report["warned"]:
        report["lost"] = "the corrupt shard was not named"
    else:
        report["lost"] = same_result(ref[0], ref[1], summary_of(out), ckpt)
    return report


def disk_full_test(runner, work, ref):
    mnt = os.path.join(work, "small")
    os.makedirs(mnt)
    shard_bytes = os.path.getsize(os.path.join(final_step_dir(ref[1]), "rank_00000.safetensors"))
    # Room for one checkpoint (two shards, index, marker) and a little, not for two.
    size = int(2.6 * shard_bytes) // 4096 * 4096 + 4096
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt],
                      capture_output=True).returncode != 0:
        return {"skipped": "cannot mount a tmpfs (not root?)", "lost": ""}
    try:
        ckpt = os.path.join(mnt, "ckpt")
        rc, _, err = runner.run(ckpt, resume=False)
        report = {"tmpfs_bytes": size, "exit_code": rc, "error": error_line(err), "lost": ""}
        if rc == 0:
            report["lost"] = "the run exited 0 on a full disk"
            return report
        if "No space left" not in err or "safetensors" not in err:
            report["lost"] = "the error does not name the file and the full disk"
            return report
        roomy = os.path.join(work, "disk_full")
        shutil.copytree(ckpt, roomy)
    finally:
        subprocess.run(["umount", mnt])
    rc, out, err = runner.run(roomy, resume=True)
    report["lost"] = same_result(ref[0], ref[1], summary_of(out), roomy) if rc == 0 else \
        f"the resume failed: {error_line(err)}"
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runner = Runner(args.build, root)
    rng = random.Random(args.seed)
    results = {}
    with tempfile.TemporaryDirectory(prefix="skew-faults-") as work:
        ref_ckpt = os.path.join(work, "reference")
        start = time.monotonic()
        rc, out, err = runner.run(ref_ckpt, resume=False)
        straight_seconds = time.monotonic() - start
        if rc != 0:
            sys.exit(f"fault_check: the reference run failed:\n{err}")
        ref = (summary_of(out), ref_ckpt)
        results["kill"] = kill_test(runner, work, ref, args.kills, rng, straight_seconds)
        results["flip"] = flip_test(runner, work, ref)
        results["disk_full"] = disk_full_test(runner, work, ref)
    failed = [name for name, r in results.items() if r["lost"]]
    for name, r in results.items():
        print(f"fault_check: {name}: {'LOST: ' + r['lost'] if r['lost'] else 'nothing lost'} "
              f"{json.dumps({k: v for k, v in r.items() if k != 'lost'})}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
