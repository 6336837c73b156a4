"""Medians per (model, threads, binary) of measure.sh's lines: rows/s, set-up s, whole run s."""
import collections, statistics, sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, model, threads, binary, rows, setup, wall = line.split()
    runs[(model, int(threads), binary)].append((int(rows), float(setup), float(wall)))
print("model,threads,binary,rows_per_s,setup_s,wall_s,runs_rows_per_s")
for (model, threads, binary), v in sorted(runs.items()):
    med = [statistics.median(x[i] for x in v) for i in range(3)]
    print(f"{model},{threads},{binary},{med[0]:.0f},{med[1]:.3f},{med[2]:.3f},{' '.join(str(x[0]) for x in v)}")
