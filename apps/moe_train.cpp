// moe_train: trains a GPT-style MoE language model with experts spread over the MPI ranks.
//   mpirun -np 2 moe_train --config configs/moe.ini [--moe.policy=deepspeed ...]
#include <iostream>
#include <string>

#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
#include "lib/core/tensor.hpp"
#include "lib/moe/schema.hpp"
#include "lib/moe/trainer.hpp"
#include "mpi/runtime.hpp"

namespace {
// What the start-up line adds to train.device's outcome: what stays on the CPU, or why auto left a
// visible GPU unused.
std::string device_note(const skew::Config& config, skew::Device device, int visible_gpus) {
  if (device == skew::Device::Cuda) return "; the MoE layers run on the CPU";
  if (config.get_string("train.device") != "auto" || visible_gpus == 0) return "";
  return skew::cuda_built() ? "; model.arch=" + config.get_string("model.arch") + " runs on the CPU only"
                            : "; this build has no CUDA";
}
}  // namespace

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::moe::moe_train_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    // The GPU is bound (train.device resolved to cuda) before the trainer allocates anything.
    const int visible_gpus = skew::cuda_device_count();
    const skew::Device device = skew::moe::train_device(config, visible_gpus);
    if (device == skew::Device::Cuda) skew::comm::bind_local_gpu(rt);
    const std::string where = device == skew::Device::Cuda ? "cuda" : "cpu";
    if (rt.world_rank == 0)
      SKEW_INFO("moe_train: " << rt.world_size << " rank(s), step on " << where << " (train.device="
                              << config.get_string("train.device") << ", " << visible_gpus << " GPU(s) visible"
                              << device_note(config, device, visible_gpus) << ")");
    skew::Json summary = skew::moe::train(config, *rt.world);
    summary["device"] = where;
    if (rt.world_rank == 0) skew::print_summary(summary);
    return 0;
  });
}
