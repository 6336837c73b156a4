// Data parallel wide training on the CPU: every schema and model (flow LR routed and all hot)
// against one rank stepping through the same global batches (tests/mpi/wide_data_parallel.hpp).
#include "tests/mpi/wide_data_parallel.hpp"

using namespace skew;
using namespace skew::wide;

TEST_CASE("allreduce data parallel equals one rank with the same global batch") {
  // Flow LR both ways: cold features routed to owners (no replica budget) and all hot.
  for (const auto& [schema, replica_budget] : {std::pair{"classical", 0}, {"flow", 0}, {"flow", 1 << 20}}) {
    for (const char* model_type : {"lr", "fm"}) {
      TrainOptions o;
      o.schema = schema_from_name(schema);
      // Several ranks sum a batch gradient; the one-rank run to match is the batch one too.
      o.classical_sync = ClassicalSync::Atomic;
      o.flow.replica_budget_bytes = replica_budget;
      o.optimizer.kind = OptimizerKind::AdaGrad;
      o.optimizer.lr = 0.1f;
      o.optimizer.l2 = 1e-4f;
      INFO(schema << " " << model_type << " replica budget " << replica_budget);
      testing::check_data_parallel_equals_one_rank(kernels::wide_kind_from_name(model_type), o, o);
    }
  }
}
