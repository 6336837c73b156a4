#include "apps/bench/harness.hpp"

#include <algorithm>
#include <iostream>

#include "core/tensor.hpp"

namespace skew::bench {

double median(std::vector<double> samples) {
  const auto middle = samples.begin() + std::ptrdiff_t(samples.size() / 2);
  std::nth_element(samples.begin(), middle, samples.end());
  return *middle;
}

CsvTable::CsvTable(const std::string& path, const std::vector<std::string>& columns) {
  if (!path.empty()) writer_ = std::make_unique<CsvWriter>(path, columns);
}

void CsvTable::row(const std::vector<std::string>& cells) {
  if (writer_) writer_->row(cells);
}

bool skipped_without_gpu(const std::string& app, const std::string& note, Json& summary) {
  if (cuda_device_count() > 0) return false;
  std::cout << app << ": SKIPPED: no CUDA device (this build " << (cuda_built() ? "has" : "lacks") << " CUDA)" << note
            << "\n";
  summary["skipped"] = true;
  print_summary(summary);
  return true;
}

}  // namespace skew::bench
