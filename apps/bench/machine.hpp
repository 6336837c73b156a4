// What a timing was taken on: the CPU model, the cores, and `uptime`'s load averages. Every bench
// records them beside its figures (summary JSON, CSV rows, the table's header) and warns where
// the 1-minute load exceeds the cores the bench leaves free: its timings are then not comparable.
#pragma once
#include <optional>
#include <string>

#include "core/metrics.hpp"

namespace skew::bench {

struct Machine {
  std::string cpu_model = "unknown";  // /proc/cpuinfo's first "model name"
  int cores = 1;                      // online processors (nproc)
  double load_1m = 0, load_5m = 0, load_15m = 0;
};

// The parts of /proc/cpuinfo and /proc/loadavg that `Machine` holds (for tests, from any text).
std::string cpu_model_of(const std::string& cpuinfo);
void read_load_averages(const std::string& loadavg, Machine& m);

// This machine now; refresh_load re-reads only the load averages (before each timed row).
Machine this_machine();
void refresh_load(Machine& m);

// {"cpu_model", "cores", "load_1m", "load_5m", "load_15m"}, for summaries and records.
Json machine_json(const Machine& m);
// "machine: <cpu model>, 2 cores, load 1.23 0.98 0.77 (1, 5, 15 min)"
std::string machine_line(const Machine& m);
// The warning where the 1-minute load exceeds the cores left free by a bench using `cores_used`
// (ranks x threads): "WARNING: load 3.1 over the 1 core(s) this run leaves free (2 cores, 1 used):
// timings are not comparable". Empty where the load fits.
std::optional<std::string> load_warning(const Machine& m, int cores_used);

// Prints the machine line and, where due, the warning, to stdout as table header lines
// (prefixed "# ") and the warning also to stderr; returns the machine for the records.
Machine print_machine_header(int cores_used);

}  // namespace skew::bench
