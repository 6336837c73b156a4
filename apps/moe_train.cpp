// moe_train: trains a GPT-style MoE language model with experts spread over the MPI ranks.
//   mpirun -np 2 moe_train --config configs/moe.ini [--moe.policy=deepspeed ...]
#include <iostream>
#include <string>

#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
#include "lib/core/tensor.hpp"
#include "lib/moe/trainer.hpp"
#include "mpi/runtime.hpp"

namespace {

// The device the step runs on, from train.device and the GPUs this rank sees. The step exists on
// the CPU only: cuda is refused with the reason rather than quietly run on the CPU, and auto
// says in the log when it leaves a visible GPU unused. No GPU is bound (run_main's bind_gpu is
// off) while nothing runs there: binding creates a CUDA context per rank for no work.
std::string resolve_device(const std::string& requested, int visible_gpus, bool log_here) {
  if (requested == "cuda") {
    SKEW_CHECK(visible_gpus > 0, "train.device=cuda, but no CUDA device is visible to this rank "
                                 "(train.device=cpu or auto runs on the CPU)");
    SKEW_THROW("train.device=cuda: not yet: the GPT-MoE step runs on the CPU only (the CUDA twins of its kernels "
               "exist, no driver runs a whole step on the GPU); use train.device=cpu or auto");
  }
  if (requested == "auto" && visible_gpus > 0 && log_here)
    SKEW_INFO("train.device=auto: " << visible_gpus << " GPU(s) visible, but the CUDA step is not yet written; "
                                    << "running on the CPU");
  return "cpu";
}

}  // namespace

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::moe::moe_train_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    const int visible_gpus = skew::cuda_device_count();
    const std::string device = resolve_device(config.get_string("train.device"), visible_gpus, rt.world_rank == 0);
    if (rt.world_rank == 0)
      SKEW_INFO("moe_train: " << rt.world_size << " rank(s), step on " << device << " (train.device="
                              << config.get_string("train.device") << ", " << visible_gpus << " GPU(s) visible)");
    skew::Json summary = skew::moe::train(config, *rt.world);
    summary["device"] = device;
    if (rt.world_rank == 0) skew::print_summary(summary);
    return 0;
  });
}
