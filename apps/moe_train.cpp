// moe_train: trains a GPT-style MoE language model with experts spread over the MPI ranks.
//   mpirun -np 2 moe_train --config configs/moe.ini [--moe.policy=deepspeed ...]
#include <iostream>
#include <string>

#include "apps/moe_train_options.hpp"
#include "apps/run_dir.hpp"
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

// Every output path is tried before any work, so a bad one fails at once, naming its key.
void check_outputs(const skew::moe::MoeTrainOptions& options, int rank) {
  if (rank == 0) skew::require_writable_file("output.metrics", options.output.metrics);  // rank 0 writes it
  skew::require_writable_dir("output.checkpoint_dir", options.output.checkpoint_dir);    // every rank's shard
  // moe.save_trace is FILE.rank<r>, one per rank.
  if (!options.moe.save_trace.empty())
    skew::require_writable_file("moe.save_trace", options.moe.save_trace + ".rank" + std::to_string(rank));
}
}  // namespace

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::moe_train_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    skew::moe_train_options(config);  // every key's rules, before a run directory is made
    const skew::RunDir run(config, *rt.world);
    const skew::moe::MoeTrainOptions options = skew::moe_train_options(config, run.path());
    check_outputs(options, rt.world_rank);
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
    run.finish(summary);
    if (rt.world_rank == 0) skew::print_summary(summary);
    return 0;
  });
}
