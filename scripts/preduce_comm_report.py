#!/usr/bin/env python3
"""The simulator's constants from the calibration runs, and the table of measured against
predicted times to accuracy, for scripts/bench_preduce_comm.sh.

  preduce_comm_report.py calibrate DIR REPEATS WIDTHS   the --sim.* flags (stdout); the measured
                                                        costs into DIR/calibration.csv
  preduce_comm_report.py report DIR REPEATS MODE...     results.csv (stdout)

DIR/runs holds summary_cal_<mode>_r<k>.json (calibration, no straggler), summary_real_<mode>_r<k>
.json (measured) and summary_sim_<mode>.json (predicted). WIDTHS: the MLP's layer widths
(784,2048,2048,10), for the model's bytes.
"""
import csv
import json
import statistics
import sys


def workers(path):
    return json.load(open(path))["per_worker"]


def per_step(w, key):
    return w[key] / (w["steps_per_s"] * w["end_s"])


def calibrate(out, repeats, widths):
    """compute, overhead (end - compute - injected - wait - comm, which the slowdown does not scale)
    and the step per step of all-reduce; the reduction cost of all-reduce (4 members: the least
    waiting worker's comm per step) and of blocking P=2 (2 members: comm per group, mean over
    workers) and P=2's controller latency per group; means over the repeats."""
    acc = {k: 0.0 for k in ("compute", "overhead", "step", "comm4", "comm2", "controller")}
    for r in range(1, repeats + 1):
        ws = workers(f"{out}/runs/summary_cal_allreduce_r{r}.json")
        acc["compute"] += statistics.mean(per_step(w, "compute_s") for w in ws) / repeats
        acc["overhead"] += statistics.mean(
            (w["end_s"] - w["compute_s"] - w["injected_s"] - w["wait_s"] - w["comm_s"]) / (w["steps_per_s"] * w["end_s"])
            for w in ws) / repeats
        acc["step"] += statistics.mean(1.0 / w["steps_per_s"] for w in ws) / repeats
        acc["comm4"] += min(per_step(w, "comm_s") for w in ws) / repeats
        ws = workers(f"{out}/runs/summary_cal_preduce_p2_blocking_r{r}.json")
        acc["comm2"] += statistics.mean(w["comm_s"] / w["syncs"] for w in ws) / repeats
        acc["controller"] += statistics.mean(w["controller_s"] / w["syncs"] for w in ws) / repeats
    # The simulator's reduction among k members costs latency x hops + 2 (k-1)/k x bytes / bandwidth;
    # with a ring's hops (k - 1): c4 = 3 L + 1.5 X, c2 = L + X, X = bytes / bandwidth. Solved for
    # L, X, the transfer held to [5%, 100%] of c2 where the two costs do not fit the form.
    c4, c2 = acc["comm4"], acc["comm2"]
    transfer = min(max((3.0 * c2 - c4) / 1.5, 0.05 * c2), c2)
    latency = c2 - transfer
    sizes = [int(x) for x in widths.split(",")]
    model_bytes = 4 * sum(a * b + b for a, b in zip(sizes, sizes[1:]))
    with open(f"{out}/calibration.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["quantity", "value", "from"])
        rows = [
            ("model_bytes", model_bytes, "layer widths " + widths),
            ("compute_ms_per_step", 1e3 * acc["compute"], "cal allreduce"),
            ("overhead_ms_per_step", 1e3 * acc["overhead"], "cal allreduce"),
            ("allreduce_ms_per_step", 1e3 * c4, "cal allreduce (least waiting worker)"),
            ("step_ms", 1e3 * acc["step"], "cal allreduce"),
            ("communication_share_of_step", c4 / acc["step"], "cal allreduce"),
            ("group_of_2_reduce_ms", 1e3 * c2, "cal preduce_p2_blocking"),
            ("controller_ms_per_group", 1e3 * acc["controller"], "cal preduce_p2_blocking"),
            ("fitted_latency_ms_per_hop", 1e3 * latency, "fit of the two reductions"),
            ("fitted_bandwidth_gbs", model_bytes / transfer / 1e9, "fit of the two reductions"),
        ]
        writer.writerows((q, f"{v:.4g}", src) for q, v, src in rows)
    print(f"--sim.compute_ms={1e3 * acc['compute']:.4f} --sim.overhead_ms={1e3 * acc['overhead']:.4f} "
          f"--sim.latency_ms={1e3 * latency:.4f} --sim.latency_growth=linear "
          f"--sim.bandwidth_gbs={model_bytes / transfer / 1e9:.6f} --sim.controller_ms={1e3 * acc['controller']:.4f}")


def time_to_target(path):
    t = json.load(open(path))["time_to_target_s"]
    return float("inf") if t < 0 else t


def text(t):
    return "not reached" if t == float("inf") else f"{t:.4g}"


def report(out, repeats, modes):
    real = {m: [time_to_target(f"{out}/runs/summary_real_{m}_r{r}.json") for r in range(1, repeats + 1)] for m in modes}
    median = {m: statistics.median(ts) for m, ts in real.items()}
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["mode", "time_to_target_s", "repeats", "final_accuracy_mean", "speedup_vs_allreduce",
                     "speedup_vs_adpsgd", "predicted_time_to_target_s", "prediction_error"])
    for m in modes:
        finals = [json.load(open(f"{out}/runs/summary_real_{m}_r{r}.json"))["final_accuracy_mean"]
                  for r in range(1, repeats + 1)]
        predicted = time_to_target(f"{out}/runs/summary_sim_{m}.json")
        error = predicted / median[m] - 1.0 if max(predicted, median[m]) < float("inf") else float("nan")
        writer.writerow([m, text(median[m]), " ".join(text(t) for t in real[m]), f"{statistics.mean(finals):.4f}",
                         f"{median['allreduce'] / median[m]:.3f}", f"{median['adpsgd'] / median[m]:.3f}",
                         text(predicted), f"{error:+.3f}"])


if __name__ == "__main__":
    if sys.argv[1] == "calibrate":
        calibrate(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        report(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
