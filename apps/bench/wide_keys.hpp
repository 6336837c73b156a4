// Config keys that both wide benchmarks read (wide_bench on the CPU, wide_gpu_bench on the GPU),
// defined once so that the same data spec and flow settings mean the same in both, and turned
// into typed values once here.
#pragma once
#include <string>
#include <vector>

#include "core/config.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_model.hpp"

namespace skew::bench {

// bench.data (file or synthetic spec, 1M synthetic Criteo-like rows by default) and
// bench.models (the models to run, `models` by default).
void add_wide_data_keys(Schema& schema, const std::string& models);
// bench.tile_samples and bench.hot_features: the flow schema's tiling and hot-feature cache.
void add_wide_flow_keys(Schema& schema);

// bench.models as a comma-separated list of whole names (lr, fm, ffm), in the order given; an
// unknown or empty name is an error naming the key and its value.
std::vector<kernels::WideKind> wide_model_kinds(const Config& config);
// bench.tile_samples and bench.hot_features (the replica budget at its default).
kernels::WideFlowOptions wide_flow_options(const Config& config);

}  // namespace skew::bench
