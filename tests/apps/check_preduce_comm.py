#!/usr/bin/env python3
"""scripts/bench_preduce_comm.sh's smoke run, checked: every mode measured and predicted, each
prediction within a factor of the measured time, and the simulator's constants from the
calibration runs alone (no measured run's summary is read before the constants are written).

  check_preduce_comm.py RUN_DIR   (prints PASS or FAIL: ...)
"""
import csv
import os
import sys

MODES = ["allreduce", "adpsgd", "eager", "preduce_p2_blocking", "preduce_p3_blocking", "preduce_p2", "preduce_p3"]
FACTOR = 3.0  # the smoke's runs are 3 s on a shared machine: a loose bound, but a prediction off by more is broken


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def main(run_dir):
    out = os.path.join(run_dir, "comm_4rank")
    rows = {r["mode"]: r for r in csv.DictReader(open(os.path.join(out, "results.csv")))}
    if sorted(rows) != sorted(MODES):
        fail(f"modes {sorted(rows)}, expected {sorted(MODES)}")
    for mode, r in rows.items():
        if "not reached" in (r["time_to_target_s"], r["predicted_time_to_target_s"]):
            fail(f"{mode}: target not reached (measured {r['time_to_target_s']}, predicted {r['predicted_time_to_target_s']})")
        measured, predicted = float(r["time_to_target_s"]), float(r["predicted_time_to_target_s"])
        if not (measured / FACTOR <= predicted <= measured * FACTOR):
            fail(f"{mode}: predicted {predicted} s is not within {FACTOR}x of the measured {measured} s")
        if abs(predicted / measured - 1.0 - float(r["prediction_error"])) > 1e-3:
            fail(f"{mode}: prediction_error {r['prediction_error']} is not predicted / measured - 1")
    calibration = {r["quantity"]: (float(r["value"]), r["from"]) for r in csv.DictReader(open(os.path.join(out, "calibration.csv")))}
    for quantity, (value, source) in calibration.items():
        if not source.startswith(("cal ", "fit ", "layer widths")):
            fail(f"{quantity} comes from {source}, not a calibration run")
        if not (value >= 0 if quantity == "fitted_latency_ms_per_hop" else value > 0):
            fail(f"{quantity} = {value}, out of range")
    calibrated = os.path.getmtime(os.path.join(out, "calibration.txt"))
    runs = os.path.join(out, "runs")
    for name in os.listdir(runs):
        if name.startswith("summary_real_") and os.path.getmtime(os.path.join(runs, name)) < calibrated:
            fail(f"{name} was written before the simulator's constants")
    print(f"PASS: {len(rows)} modes measured and predicted within {FACTOR}x; constants from the calibration runs")


if __name__ == "__main__":
    main(sys.argv[1])
