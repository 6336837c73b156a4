// Config keys that both wide benchmarks read (wide_bench on the CPU, wide_gpu_bench on the GPU),
// defined once so that the same data spec and flow settings mean the same in both.
#pragma once
#include <string>
#include <vector>

#include "core/config.hpp"
#include "kernels/wide_model.hpp"

namespace skew::wide {

// bench.data (file or synthetic spec, 1M synthetic Criteo-like rows by default) and
// bench.models (the models to run, `models` by default).
void add_bench_data_keys(Schema& schema, const std::string& models);
// bench.models as a comma-separated list of whole names (lr, fm, ffm), in the order given; an
// unknown or empty name is an error naming the key and its value.
std::vector<kernels::WideKind> bench_model_kinds(const Config& config);
// bench.tile_samples and bench.hot_features: the flow schema's tiling and hot-feature cache.
void add_bench_flow_keys(Schema& schema);

}  // namespace skew::wide
