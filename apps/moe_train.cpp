// moe_train: trains a GPT-style MoE language model with experts spread over the MPI ranks.
//   mpirun -np 2 moe_train --config configs/moe.ini [--moe.policy=deepspeed ...]
#include <iostream>
#include <string>

#include "apps/moe_train_options.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/tensor.hpp"
#include "lib/moe/session.hpp"
#include "lib/moe/trainer.hpp"
#include "mpi/runtime.hpp"

namespace {
// What the start-up line adds to train.device's outcome: why auto left a visible GPU unused.
std::string device_note(const skew::moe::MoeTrainOptions& options, skew::Device device, int visible_gpus) {
  if (device == skew::Device::Cuda || options.train.device != "auto" || visible_gpus == 0) return "";
  if (!skew::cuda_built()) return "; this build has no CUDA";
  return "; model.arch=" + options.model.arch + " runs on the CPU only";  // every policy runs on cuda
}
}  // namespace

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::moe_train_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    const skew::moe::MoeTrainOptions options = skew::moe_train_options(config);
    // The GPU is bound (train.device resolved to cuda) before the trainer allocates anything.
    const int visible_gpus = skew::cuda_device_count();
    const skew::Device device = skew::moe::train_device(options, visible_gpus);
    if (device == skew::Device::Cuda) skew::comm::bind_local_gpu(rt);
    const std::string where = device == skew::Device::Cuda ? "cuda" : "cpu";
    // On the GPU the world is hybrid: device buffers (expert exchange, gradient all-reduce) over
    // NCCL, host buffers (counts, plans, scalars) over MPI. NCCL refuses two ranks on one GPU:
    // ranks sharing GPUs stay on MPI, which stages device buffers through pinned host memory.
    const bool nccl = device == skew::Device::Cuda && skew::comm::every_rank_has_own_gpu(rt);
    const auto world = skew::comm::make_world_group(rt, nccl ? skew::comm::Backend::Hybrid : skew::comm::Backend::Mpi);
    if (rt.world_rank == 0)
      SKEW_INFO("moe_train: " << rt.world_size << " rank(s), step on " << where
                              << " (train.device=" << options.train.device << ", " << visible_gpus << " GPU(s) visible"
                              << device_note(options, device, visible_gpus) << "), world group " << world->backend());
    skew::Json summary = skew::moe::train(options, *world);
    summary["device"] = where;
    if (rt.world_rank == 0) skew::print_summary(summary);
    return 0;
  });
}
