import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cfgs = []
for r in rows:
    if r["config"] not in cfgs: cfgs.append(r["config"])
print("config binary n setup_s(median) [min-max] startup_s data_s trainer_s wall_s(median) load1(median)")
for c in cfgs:
    for b in ("base", "new"):
        sel = [r for r in rows if r["config"] == c and r["binary"] == b]
        med = lambda k: statistics.median(float(r[k]) for r in sel)
        s = [float(r["setup_s"]) for r in sel]
        print(f"{c} {b} {len(sel)} {med('setup_s'):.3f} [{min(s):.3f}-{max(s):.3f}] {med('startup_s'):.4f} {med('data_s'):.4f} {med('trainer_s'):.4f} {med('wall_s'):.3f} {med('load1'):.2f}")
    base = statistics.median(float(r["setup_s"]) for r in rows if r["config"] == c and r["binary"] == "base")
    new = statistics.median(float(r["setup_s"]) for r in rows if r["config"] == c and r["binary"] == "new")
    print(f"  {c}: set-up {base:.3f} -> {new:.3f} s ({new / base:.2f}x)")
