// data.max_memory_mb as a cap on the whole process (a streamed data.train, lib/wide/stream.hpp):
// what the run holds besides the stream's ring -- the process's resident memory measured before
// the model exists (libraries, MPI, data.valid, the renumbering), plus the model-shaped arrays
// and the flow schema's buffers it will touch, counted at their full size -- and what is left for
// the ring. The kernel's counts (/proc/self/status) are the measure: a test holds the process's
// peak (VmHWM) to M.
#pragma once
#include <cstdint>
#include <string>

#include "lib/wide/options.hpp"

namespace skew::wide {

// The process's resident bytes (VmRSS) and their peak so far (VmHWM), from /proc/self/status.
struct ProcessMemory {
  std::int64_t resident = 0, peak = 0;
};
ProcessMemory process_memory();
// VmRSS once the allocator has handed its free pages back to the kernel (malloc_trim): what the
// process holds, not what it held before.
std::int64_t settled_resident_bytes();

// What each malloc arena may keep free after release_freed_memory_promptly.
constexpr std::int64_t kAllocatorSlackBytes = std::int64_t(1) << 20;
// Has freed memory go back to the kernel: glibc's mmap and trim thresholds fixed at
// kAllocatorSlackBytes, instead of thresholds that grow to the largest block freed (up to 32 and
// 64 MiB), under which a first pass's arrays and the ring's chunks, freed, stay resident in the
// arena of the thread that made them (malloc_trim trims only the main arena's top).
void release_freed_memory_promptly();

// What a streamed run holds outside its ring, by part (bytes).
struct RunMemory {
  std::int64_t baseline = 0;   // measured: resident before the model (libraries, MPI, data.valid)
  std::int64_t model = 0;      // parameters
  std::int64_t gradient = 0;   // the dense batch gradient (zero pages, touched where used)
  std::int64_t optimizer = 0;  // the optimizer's state
  std::int64_t flow = 0;       // per-feature tags and stamps, per-thread gradient rows and scratch
  std::int64_t best_copy = 0;  // the best epoch's parameters, kept while the next epoch trains
  std::int64_t step = 0;       // a batch spanning two chunks, its logits; validation's scores
  std::int64_t allocator = 0;  // free memory the threads' malloc arenas may keep
  std::int64_t total() const { return baseline + model + gradient + optimizer + flow + best_copy + step + allocator; }
  // "baseline 21.3 MiB + model 1.0 MiB + ..." for an error message.
  std::string describe() const;
};

// The flow schema's buffers for a step of `batch_rows` rows of at most `row_nonzeros` nonzeros
// each, over `features` model rows of `row_len` floats, run by `threads` threads keeping `hot`
// replicated features each: an upper bound (each thread's gradient rows sized for every distinct
// feature the batch can touch).
std::int64_t flow_buffer_bytes(std::int64_t features, int row_len, std::int64_t batch_rows, std::int64_t row_nonzeros,
                               int threads, std::int64_t hot);

// The bytes of `budget` left for a stream's ring once `held` is taken out; throws naming
// `budget_setting` and each part of `held` when fewer than `min_ring` remain.
std::int64_t ring_bytes_left(std::int64_t budget, const RunMemory& held, std::int64_t min_ring,
                             const std::string& budget_setting);

// Memory checked before the work (core/memory_limits.hpp): refuses a run whose model parameters
// and optimizer state -- and, for a data.train loaded whole (data.max_memory_mb = 0), its
// files' bytes, about what its parsed rows take -- exceed data.max_memory_mb or MemAvailable.
// Called before any data is read (`shape` from model.features or data.hash_bits, one field for
// FFM; no model part when neither sets the size; count_data_files true) and again once the data
// gave the whole shape, before the model is made (the data is then in memory: count_data_files
// false).
void check_model_memory(const WideOptions& o, const kernels::WideShape& shape, bool count_data_files);
// The bytes of data.train's and data.valid's files (0 for a synthetic: spec or a pipe).
double data_file_bytes(const DataOptions& data);
// The model's shape as the keys give it before any data is read: num_features 0 when only the
// data can tell.
kernels::WideShape shape_from_keys(const WideOptions& o);

}  // namespace skew::wide
