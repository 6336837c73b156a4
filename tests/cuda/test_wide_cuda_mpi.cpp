// Data-parallel training on GPUs (train.device = cuda, one GPU per rank; ranks share a GPU
// when there are fewer): the ranks' gradients are summed on the host between the gradient
// kernel and the update, and the run must end where one CPU rank ends on the same global
// batches (tests/mpi/wide_data_parallel.hpp). Only the touched rows cross PCIe, packed, and
// the group's rows (other ranks' features included) come back into the device's touched list.
#include "tests/cuda_skip.hpp"
#include "tests/mpi/wide_data_parallel.hpp"

using namespace skew;
using namespace skew::wide;

TEST_CASE("CUDA data parallel (gradient summed on the host) equals one CPU rank") {
  SKEW_REQUIRE_GPU();
  for (const char* schema : {"classical", "flow"}) {
    for (const char* model_type : {"lr", "fm", "ffm"}) {
      TrainOptions cuda, cpu;
      for (TrainOptions* o : {&cuda, &cpu}) {
        o->schema = schema_from_name(schema);
        o->optimizer.kind = OptimizerKind::AdaGrad;
        o->optimizer.lr = 0.1f;
        o->optimizer.l2 = 1e-4f;
      }
      cuda.device = TrainDevice::Cuda;
      cpu.classical_sync = ClassicalSync::Atomic;  // the CPU rank to match sums a batch gradient too
      INFO(schema << " " << model_type);
      testing::check_data_parallel_equals_one_rank(kernels::wide_kind_from_name(model_type), cuda, cpu, 1e-3);
    }
  }
}
