#include "apps/bench/wide_keys.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace skew::bench {

void add_wide_data_keys(Schema& schema, const std::string& models) {
  schema.add_string("bench.data", "synthetic:criteo?rows=1000000&features=4194304&alpha=1.1&seed=1",
                    "data (file or synthetic spec)");
  schema.add_string("bench.models", models, "models to run: comma-separated whole names (lr, fm, ffm)");
}

void add_wide_flow_keys(Schema& schema) {
  schema.add_int("bench.tile_samples", 256, {1, 1 << 20}, "flow: samples per tile");
  schema.add_int("bench.hot_features", 4096, {0, 1 << 30}, "flow: cached hottest features");
}

std::vector<kernels::WideKind> wide_model_kinds(const Config& config) {
  const std::string models = config.get_string("bench.models");
  std::vector<kernels::WideKind> kinds;
  for (std::size_t pos = 0; pos <= models.size();) {
    const std::size_t end = std::min(models.find(',', pos), models.size());
    const std::string name = models.substr(pos, end - pos);
    SKEW_CHECK(name == "lr" || name == "fm" || name == "ffm",
               "bad value '" << models << "' for key 'bench.models': '" << name << "' is not lr, fm or ffm");
    kinds.push_back(kernels::wide_kind_from_name(name));
    pos = end + 1;
  }
  return kinds;
}

kernels::WideFlowOptions wide_flow_options(const Config& config) {
  kernels::WideFlowOptions flow;
  flow.tile_samples = config.get_int_as<int>("bench.tile_samples");
  flow.hot_features = config.get_int("bench.hot_features");
  return flow;
}

}  // namespace skew::bench
