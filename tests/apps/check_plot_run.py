#!/usr/bin/python3
"""The tests of scripts/plot_run.py (ctest runs both):
  check_plot_run.py draw MOE_TRAIN WIDE_TRAIN PREDUCE_TRAIN
      runs each trainer on its tiny built-in data (one rank, about a second each) into its run
      directory (output.dir: metrics, summary, checkpoints; preduce's per-rank file also copied
      under the name older quickstart runs gave it), draws the runs into one PNG, and checks the PNG
      (header, > 10 kB) and the fields plot_run.py says it drew per run file; exits 77 (skipped)
      when matplotlib is not installed.
  check_plot_run.py errors
      a missing RUN, an empty and a malformed JSONL line (named file:line), a file with no
      plottable field: each refused with exit status 1 and its message (needs no matplotlib)."""
import os
import shutil
import subprocess
import sys
import tempfile

PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "plot_run.py")
SKIPPED, MISSING_MATPLOTLIB = 77, 3
# The fields each run file must show; the apps' records are the source of the names.
EXPECTED = {
    "moe (": {"loss", "val_loss", "tokens_per_s", "balance", "dropped"},
    "wide (": {"train_loss", "train_logloss", "valid_logloss", "valid_auc", "samples_per_s"},
    "preduce rank 0 (": {"loss", "steps_per_s"},
    "preduce curve (": {"mean_accuracy"},
    "preduce_quickstart rank 0 (": {"loss", "steps_per_s"},
}


def plot(*args):
    return subprocess.run([PLOT, *args], capture_output=True, text=True)


def train(out, moe_train, wide_train, preduce_train):
    # Each app's run directory as it writes it by default (output.dir names it here).
    runs = [[moe_train, "--train.iterations=10", f"--output.dir={out}/moe"],
            [wide_train, f"--output.dir={out}/wide"],
            [preduce_train, "--train.eval_interval_s=0.005", f"--output.dir={out}/preduce"]]
    for command in runs:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    # Every app and script now names per-rank files metrics.rank<N>.jsonl; runs from before named
    # them metrics_rank<N>.jsonl (quickstart), and a directory of those must still draw.
    os.makedirs(f"{out}/preduce_quickstart")
    shutil.copy(f"{out}/preduce/metrics.rank0.jsonl", f"{out}/preduce_quickstart/metrics_rank0.jsonl")


def check_draw(moe_train, wide_train, preduce_train):
    with tempfile.TemporaryDirectory() as out:
        train(out, moe_train, wide_train, preduce_train)
        png = f"{out}/runs.png"
        done = plot(f"{out}/moe", f"{out}/wide", f"{out}/preduce", f"{out}/preduce_quickstart", "-o", png)
        print(done.stdout + done.stderr)
        if done.returncode == MISSING_MATPLOTLIB:
            print("SKIPPED: matplotlib is not installed")
            return SKIPPED
        assert done.returncode == 0, done.returncode
        drawn = {line.split(": ")[0].split("(")[0] + "(": set(line.split(": ", 1)[1].split(", "))
                 for line in done.stdout.splitlines() if not line.startswith("wrote ")}
        assert drawn == EXPECTED, drawn
        assert done.stdout.splitlines()[-1].startswith(f"wrote {png}: 6 panel(s)"), done.stdout
        with open(png, "rb") as f:
            image = f.read()
        assert image.startswith(b"\x89PNG\r\n\x1a\n"), image[:8]
        assert len(image) > 10 * 1024, len(image)
        print(f"ok: {png} {len(image)} bytes")
    return 0


def refused(args, message):
    done = plot(*args)
    assert done.returncode == 1 and message in done.stderr, (args, done.returncode, done.stderr)
    print(f"ok: {done.stderr.strip()}")


def check_errors():
    with tempfile.TemporaryDirectory() as out:
        refused([f"{out}/none"], f"{out}/none: no such file or directory")
        refused([out], f"{out}: no metrics*.jsonl or curve*.csv in it")
        good = '{"iter":0,"loss":1.5}\n'
        cases = {"empty.jsonl": (good + "\n" + good, "empty.jsonl:2: empty line"),
                 "malformed.jsonl": (good + good + '{"iter":2,"loss":\n', "malformed.jsonl:3: malformed JSON"),
                 "list.jsonl": ("[1, 2]\n", "list.jsonl:1: not a JSON object"),
                 "nothing.jsonl": ("", "nothing.jsonl: empty file, no records"),
                 "summary.jsonl": ('{"app":"wide_train","seconds":1.0}\n',
                                   "summary.jsonl: no plottable field (has: app, seconds)")}
        for name, (text, message) in cases.items():
            with open(f"{out}/{name}", "w") as f:
                f.write(text)
            refused([f"{out}/{name}"], message)
    return 0


if __name__ == "__main__":
    sys.exit(check_draw(*sys.argv[2:5]) if sys.argv[1] == "draw" else check_errors())
