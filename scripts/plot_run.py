#!/usr/bin/python3
"""Draws one or more training runs' metrics into one PNG, the runs overlaid with a legend.

  scripts/plot_run.py RUN [RUN...] [-o OUT.png]

A RUN is a metrics file or a directory holding the files the apps write there:
  moe_train      output.metrics (metrics.jsonl), one record per iteration
  wide_train     output.dir/metrics.jsonl, a record per logged step and one per epoch
  preduce_train  output.metrics, one file per rank (metrics.rank<N>.jsonl; older runs metrics_rank<N>),
                 and output.curve (curve.csv: time_s, mean_accuracy)
In a directory, metrics*.jsonl and curve*.csv are read. Panels, each drawn only when a run has
its fields: loss (every field ending in "loss": train and validation/held-out), accuracy / AUC
(fields ending in "accuracy" or "auc"), throughput on a log scale (fields ending in "_per_s";
preduce's steps/s from its records' step and time_s), and moe's balance (max/mean rows over
ranks, mean over layers) and dropped tokens. Records are drawn against their "iter" or "step",
the curve against time; a run's files share a colour, held-out fields are dashed.
Prints, per run file, the fields it drew. The PNG goes to -o, by default plot.png in the run's
directory for one RUN, ./plot_run.png for several.

Exit status: 0 drawn, 1 a bad RUN (missing file, empty or malformed line: file:line, no
plottable field), 3 matplotlib missing (scripts/setup.sh --bench installs python3-matplotlib).
"""
import argparse
import csv
import json
import os
import re
import sys

MISSING_MATPLOTLIB = 3
STEP_KEYS = ("iter", "step")  # the x of a record, first present
METRICS_FILE = re.compile(r"metrics.*\.jsonl$")
CURVE_FILE = re.compile(r"curve.*\.csv$")


class RunError(Exception):
    """A RUN that cannot be drawn; the message names the file (and line)."""


def panel_of(field):
    """The panel a numeric field is drawn in, or None: the rules cover every app's names."""
    if field.endswith("loss"):
        return "loss"
    if field.endswith("accuracy") or field.endswith("auc"):
        return "accuracy / AUC"
    if field.endswith("_per_s"):
        return "throughput (per s)"
    if field == "balance":
        return "balance (max/mean rows over ranks)"
    if field == "dropped":
        return "dropped tokens"
    return None


def scalar(value):
    """A record's value as one number: a per-layer list (moe's balance) is its mean."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return sum(value) / len(value)
    return None


def read_jsonl(path):
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                raise RunError(f"{path}:{number}: empty line")
            try:
                record = json.loads(line.rstrip("\n"))
            except json.JSONDecodeError as e:
                raise RunError(f"{path}:{number}: malformed JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(record, dict):
                raise RunError(f"{path}:{number}: not a JSON object")
            records.append(record)
    if not records:
        raise RunError(f"{path}: empty file, no records")
    return records


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2:
        raise RunError(f"{path}: no rows under the header")
    header, records = rows[0], []
    for number, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise RunError(f"{path}:{number}: {len(row)} columns, the header has {len(header)}")
        try:
            records.append({name: float(cell) for name, cell in zip(header, row)})
        except ValueError:
            raise RunError(f"{path}:{number}: a value is not a number") from None
    return records


def series_of(records, x_keys):
    """{field: (xs, ys)} of every plottable field, each against the first of x_keys a record has."""
    series = {}
    for record in records:
        x_key = next((k for k in x_keys if k in record), None)
        if x_key is None:
            continue
        for field, value in record.items():
            y = scalar(value)
            if field in x_keys or y is None or panel_of(field) is None:
                continue
            xs, ys = series.setdefault(field, ([], []))
            xs.append(float(record[x_key]))
            ys.append(y)
    return series


def steps_per_second(records):
    """preduce_train's throughput, from its records' step and time_s over windows of ~1/50 of the run."""
    timed = [(r["step"], r["time_s"]) for r in records if "step" in r and "time_s" in r]
    window = max(1, len(timed) // 50)
    xs, ys = [], []
    for i in range(window, len(timed), window):
        (step0, t0), (step1, t1) = timed[i - window], timed[i]
        if t1 > t0:
            xs.append(float(step1))
            ys.append((step1 - step0) / (t1 - t0))
    return (xs, ys) if xs else None


def load(path, label, colour):
    """One metrics file: its label, colour (its RUN's), the panels' series and the x axis they are drawn on."""
    if path.endswith(".csv"):
        records = read_csv(path)
        series, x_name = series_of(records, ("time_s",)), "time (s)"
    else:
        records = read_jsonl(path)
        series, x_name = series_of(records, STEP_KEYS), "iteration / step"
        if not any(field.endswith("_per_s") for field in series):
            derived = steps_per_second(records)
            if derived:
                series["steps_per_s"] = derived
    if not series:
        names = sorted({k for r in records for k in r})
        raise RunError(f"{path}: no plottable field (has: {', '.join(names)})")
    return {"label": label, "colour": colour, "path": path, "series": series, "x": x_name}


def run_files(run):
    """The metrics files of a RUN argument, each with its legend label."""
    if os.path.isfile(run):
        return [(run, os.path.splitext(os.path.basename(run))[0])]
    if not os.path.isdir(run):
        raise RunError(f"{run}: no such file or directory")
    name = os.path.basename(os.path.normpath(os.path.abspath(run)))
    files = sorted(f for f in os.listdir(run) if METRICS_FILE.match(f) or CURVE_FILE.match(f))
    if not files:
        raise RunError(f"{run}: no metrics*.jsonl or curve*.csv in it")
    labelled = []
    for f in files:
        rank = re.search(r"rank(\d+)", f)
        suffix = f" rank {rank.group(1)}" if rank else (" curve" if f.endswith(".csv") else "")
        labelled.append((os.path.join(run, f), name + suffix))
    return labelled


def panels(runs):
    """[(panel title, x axis name)] in a fixed order, those that some run has a field for."""
    order = ("loss", "accuracy / AUC", "throughput (per s)", "balance (max/mean rows over ranks)", "dropped tokens")
    present = {(panel_of(field), run["x"]) for run in runs for field in run["series"]}
    return [(title, x) for title in order for x in ("iteration / step", "time (s)") if (title, x) in present]


def draw(runs, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout = panels(runs)
    columns = 2 if len(layout) > 1 else 1
    rows = (len(layout) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(7 * columns, 3.6 * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, x_name) in zip(axes.flat, layout):
        for run in runs:
            if run["x"] != x_name:
                continue
            for field, (xs, ys) in sorted(run["series"].items()):
                if panel_of(field) != title:
                    continue
                held_out = field.startswith(("val", "valid", "mean_"))
                ax.plot(xs, ys, color=colours[run["colour"] % len(colours)], linestyle="--" if held_out else "-",
                        marker="o" if len(xs) <= 30 else None, markersize=3, label=f"{run['label']}: {field}")
        ax.set_title(title if x_name != "time (s)" else f"{title} (curve)")
        if title.startswith("throughput"):
            ax.set_yscale("log")  # tokens, rows and steps per second differ by orders of magnitude
        ax.set_xlabel(x_name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(layout):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    return layout


def default_output(runs):
    if len(runs) != 1:
        return "plot_run.png"
    run = runs[0]
    return os.path.join(run if os.path.isdir(run) else os.path.dirname(run) or ".", "plot.png")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="a metrics file or a run directory holding them")
    parser.add_argument("-o", "--output", help="the PNG (default: RUN/plot.png for one run, ./plot_run.png)")
    args = parser.parse_args()
    try:
        runs = [load(path, label, index) for index, run in enumerate(args.runs) for path, label in run_files(run)]
    except (RunError, OSError, UnicodeDecodeError) as e:
        sys.exit(f"plot_run.py: error: {e}")
    try:
        import matplotlib  # noqa: F401  (checked before drawing: the one missing-package message)
    except ImportError:
        print("plot_run.py: error: matplotlib is not installed; install it with: scripts/setup.sh --bench "
              "(python3-matplotlib)", file=sys.stderr)
        sys.exit(MISSING_MATPLOTLIB)
    out = args.output or default_output(args.runs)
    for run in runs:
        print(f"{run['label']} ({run['path']}): {', '.join(sorted(run['series']))}")
    layout = draw(runs, out)
    print(f"wrote {out}: {len(layout)} panel(s): {', '.join(title for title, _ in layout)}")


if __name__ == "__main__":
    main()
