#include "lib/preduce/hetero.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "lib/core/error.hpp"
#include "lib/core/rng.hpp"

namespace skew::preduce {

Hetero::Hetero(const HeteroOptions& options, int worker) : opt_(options), worker_(worker) {
  if (!opt_.slowdown.empty()) slowdown_ = opt_.slowdown[static_cast<std::size_t>(worker) % opt_.slowdown.size()];
  SKEW_CHECK(slowdown_ >= 1.0, "hetero.slowdown: factor " << slowdown_ << " for worker " << worker << " is below 1");
  SKEW_CHECK(opt_.jitter == "none" || opt_.jitter == "exp" || opt_.jitter == "uniform" || opt_.jitter == "spike",
             "hetero.jitter: unknown distribution '" << opt_.jitter << "' (none, exp, uniform, spike)");
  SKEW_CHECK(opt_.jitter_ms >= 0.0 && opt_.base_ms >= 0.0, "hetero.jitter_ms and hetero.base_ms must be >= 0");
  if (opt_.trace.empty()) return;
  std::ifstream in(opt_.trace);
  SKEW_CHECK(in, "hetero.trace: cannot open " << opt_.trace);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<double> row;
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      try {
        row.push_back(std::stod(cell));
      } catch (const std::exception&) {
        SKEW_THROW("hetero.trace: " << opt_.trace << ":" << line_no << ": bad delay '" << cell << "'");
      }
      SKEW_CHECK(row.back() >= 0.0, "hetero.trace: " << opt_.trace << ":" << line_no << ": negative delay");
    }
    // A short row is a trace recorded for fewer workers: repeating its values would invent delays.
    SKEW_CHECK(row.size() > static_cast<std::size_t>(worker),
               "hetero.trace: " << opt_.trace << ":" << line_no << ": " << row.size()
                                << " delays, none for worker " << worker << " (one value per worker)");
    trace_ms_.push_back(std::move(row));
  }
  SKEW_CHECK(!trace_ms_.empty(), "hetero.trace: " << opt_.trace << " has no delays");
}

double Hetero::injected_s(std::int64_t step, double compute_s) const {
  double ms = opt_.base_ms * slowdown_ + compute_s * 1e3 * (slowdown_ - 1.0);
  Rng rng(opt_.seed, 0x4e7e000000ull + static_cast<std::uint64_t>(worker_), static_cast<std::uint64_t>(step) * 2);
  if (opt_.jitter == "exp") ms += -opt_.jitter_ms * std::log(1.0 - static_cast<double>(rng.uniform()));
  else if (opt_.jitter == "uniform") ms += 2.0 * opt_.jitter_ms * rng.uniform();
  else if (opt_.jitter == "spike" && rng.uniform() < opt_.jitter_prob) ms += opt_.jitter_ms;
  if (!trace_ms_.empty()) {
    const auto& row = trace_ms_[static_cast<std::size_t>(step) % trace_ms_.size()];
    ms += row[static_cast<std::size_t>(worker_)];
  }
  return ms * 1e-3;
}

}  // namespace skew::preduce
