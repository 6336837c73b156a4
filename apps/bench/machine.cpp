#include "apps/bench/machine.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "apps/bench/table.hpp"

namespace skew::bench {
namespace {

std::string file_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string cpu_model_of(const std::string& cpuinfo) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto first = line.find_first_not_of(" \t", colon + 1);
    const auto last = line.find_last_not_of(" \t\r");
    if (first != std::string::npos) return line.substr(first, last - first + 1);
  }
  return "unknown";
}

void read_load_averages(const std::string& loadavg, Machine& m) {
  std::istringstream in(loadavg);
  double one = 0, five = 0, fifteen = 0;
  if (in >> one >> five >> fifteen) m.load_1m = one, m.load_5m = five, m.load_15m = fifteen;
}

Machine this_machine() {
  Machine m;
  m.cpu_model = cpu_model_of(file_text("/proc/cpuinfo"));
  m.cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  refresh_load(m);
  return m;
}

void refresh_load(Machine& m) {
  read_load_averages(file_text("/proc/loadavg"), m);
}

Json machine_json(const Machine& m) {
  return Json{{"cpu_model", m.cpu_model},
              {"cores", m.cores},
              {"load_1m", m.load_1m},
              {"load_5m", m.load_5m},
              {"load_15m", m.load_15m}};
}

std::string machine_line(const Machine& m) {
  return "machine: " + m.cpu_model + ", " + std::to_string(m.cores) + " cores, load " + significant(m.load_1m, 3) +
         " " + significant(m.load_5m, 3) + " " + significant(m.load_15m, 3) + " (1, 5, 15 min)";
}

std::optional<std::string> load_warning(const Machine& m, int cores_used) {
  const int free_cores = std::max(0, m.cores - cores_used);
  if (m.load_1m <= free_cores) return std::nullopt;
  return "WARNING: load " + significant(m.load_1m, 3) + " over the " + std::to_string(free_cores) +
         " core(s) this run leaves free (" + std::to_string(m.cores) + " cores, " + std::to_string(cores_used) +
         " used): timings are not comparable";
}

Machine print_machine_header(int cores_used) {
  const Machine m = this_machine();
  std::printf("# %s\n", machine_line(m).c_str());
  if (const auto warning = load_warning(m, cores_used)) {
    std::printf("# %s\n", warning->c_str());
    std::fprintf(stderr, "%s\n", warning->c_str());
  }
  std::fflush(stdout);
  return m;
}

}  // namespace skew::bench
