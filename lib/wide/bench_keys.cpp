#include "lib/wide/bench_keys.hpp"

namespace skew::wide {

void add_bench_data_keys(Schema& schema, const std::string& models) {
  schema.add_string("bench.data", "synthetic:criteo?rows=1000000&features=4194304&alpha=1.1&seed=1",
                    "data (file or synthetic spec)");
  schema.add_string("bench.models", models, "models to run (lr, fm, ffm)");
}

void add_bench_flow_keys(Schema& schema) {
  schema.add_int("bench.tile_samples", 256, {1, 1 << 20}, "flow: samples per tile");
  schema.add_int("bench.hot_features", 4096, {0, 1 << 30}, "flow: cached hottest features");
}

}  // namespace skew::wide
