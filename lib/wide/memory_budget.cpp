#include "lib/wide/memory_budget.hpp"

#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/memory_limits.hpp"

namespace skew::wide {

namespace {
std::string mib(std::int64_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << double(bytes) / double(1 << 20) << " MiB";
  return s.str();
}
}  // namespace

ProcessMemory process_memory() {
  ProcessMemory m;
  std::ifstream status("/proc/self/status");
  std::string key;
  std::int64_t kib = 0;
  while (status >> key) {
    if (key == "VmRSS:" && status >> kib)
      m.resident = kib << 10;
    else if (key == "VmHWM:" && status >> kib)
      m.peak = kib << 10;
    status.ignore(1 << 12, '\n');
  }
  SKEW_CHECK(m.resident > 0 && m.peak > 0,
             "cannot read VmRSS and VmHWM from /proc/self/status: "
             "data.max_memory_mb needs the process's resident memory");
  return m;
}

std::int64_t settled_resident_bytes() {
  ::malloc_trim(0);
  return process_memory().resident;
}

void release_freed_memory_promptly() {
  ::mallopt(M_MMAP_THRESHOLD, int(kAllocatorSlackBytes));
  ::mallopt(M_TRIM_THRESHOLD, int(kAllocatorSlackBytes));
}

std::string RunMemory::describe() const {
  return "baseline " + mib(baseline) + " (measured: libraries, MPI, data.valid) + model " + mib(model) +
         " + gradient " + mib(gradient) + " + optimizer state " + mib(optimizer) + " + flow buffers " + mib(flow) +
         " + best-epoch copy " + mib(best_copy) + " + batch and validation " + mib(step) + " + allocator slack " +
         mib(allocator) + " = " + mib(total());
}

std::int64_t flow_buffer_bytes(std::int64_t features, int row_len, std::int64_t batch_rows, std::int64_t row_nonzeros,
                               int threads, std::int64_t hot) {
  const std::int64_t batch_nonzeros = batch_rows * std::max<std::int64_t>(row_nonzeros, 1);
  const std::int64_t distinct = std::min(features, batch_nonzeros);
  // Per feature: the batch's slot tag (8 B) and touched stamp (4 B). Per thread: gradient rows
  // for the distinct features, the hot replicas, and the tile's sort keys, orders and values
  // (8 words a nonzero, over the whole batch at worst; FM keeps every tile's). Per row: FM's
  // partial sums and loss gradient (row_len + 2 floats, above FFM's and LR's needs).
  return 12 * features + std::int64_t(threads) * (distinct * row_len * 4 + hot * 4 + batch_nonzeros * 32) +
         batch_rows * (row_len + 2) * 4;
}

std::int64_t ring_bytes_left(std::int64_t budget, const RunMemory& held, std::int64_t min_ring,
                             const std::string& budget_setting) {
  const std::int64_t left = budget - held.total();
  SKEW_CHECK(left >= min_ring, budget_setting << " MiB cannot hold what the run holds (" << held.describe()
                                              << ") and a stream ring of at least " << mib(min_ring)
                                              << ": raise data.max_memory_mb (or shrink the model)");
  return left;
}

namespace {
// A regular file's bytes; 0 for a synthetic: spec, a pipe or a missing file.
double file_bytes(const std::string& spec) {
  struct stat st {};
  return !spec.empty() && ::stat(spec.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? double(st.st_size) : 0.0;
}
}  // namespace

double data_file_bytes(const DataOptions& data) {
  return file_bytes(data.train) + file_bytes(data.valid);
}

kernels::WideShape shape_from_keys(const WideOptions& o) {
  kernels::WideShape shape;
  shape.kind = o.model.type;
  shape.k = shape.kind == kernels::WideKind::LR ? 0 : o.model.k;
  shape.num_fields = 1;  // FFM: at least one field
  shape.num_features = o.model.features > 0   ? o.model.features
                       : o.data.hash_bits > 0 ? std::int64_t(1) << o.data.hash_bits
                                              : 0;
  return shape;
}

void check_model_memory(const WideOptions& o, const kernels::WideShape& shape, bool count_data_files) {
  std::vector<MemoryPart> parts;
  if (shape.num_features > 0) {
    const double params = double(shape.num_params()) * sizeof(float);
    const int state_arrays = o.train.optimizer == OptimizerKind::Ftrl      ? 2
                             : o.train.optimizer == OptimizerKind::AdaGrad ? 1
                                                                           : 0;
    parts.push_back(
        {"model (" + std::to_string(shape.num_features) + " features x " + std::to_string(shape.row_len()) + " floats)",
         params});
    if (state_arrays > 0)
      parts.push_back(
          {std::string("optimizer state (") + optimizer_name(o.train.optimizer) + ")", params * state_arrays});
  }
  if (count_data_files && o.data.max_memory_mb == 0)
    for (const std::string* spec : {&o.data.train, &o.data.valid})
      if (file_bytes(*spec) > 0) parts.push_back({*spec + " loaded whole (about its file size)", file_bytes(*spec)});
  if (parts.empty()) return;
  std::string remedy = shape.num_features > 0 ? "lower model.features (or data.hash_bits) or model.k" : "";
  if (parts.back().what.find("loaded whole") != std::string::npos)
    remedy += (remedy.empty() ? "" : "; or ") + std::string("set data.max_memory_mb > 0 to stream data.train");
  require_memory("wide_train", parts, {o.data.max_memory_mb, "data.max_memory_mb", remedy});
}

}  // namespace skew::wide
