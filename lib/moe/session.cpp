#include "lib/moe/session.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/memory_limits.hpp"
#include "core/thread_limits.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_threads.hpp"
#include "lib/moe/memory_estimate.hpp"
#include "lib/moe/models/bert.hpp"
#include "lib/moe/models/swin.hpp"
#include "lib/moe/policies/fastermoe.hpp"
#include "lib/moe/policies/flexmoe.hpp"

namespace skew::moe {

LoopOptions loop_options(const MoeTrainOptions& options) {
  const TrainSection& t = options.train;
  LoopOptions o;
  o.iterations = t.iterations;
  o.eval_interval = t.eval_interval;
  o.log_interval = t.log_interval;
  o.checkpoint_interval = options.output.checkpoint_interval;
  o.adam.lr = t.lr;
  o.adam.min_lr_ratio = t.min_lr_ratio;
  o.adam.warmup = t.warmup;
  o.adam.total = o.iterations;
  o.adam.weight_decay = t.weight_decay;
  o.adam.beta1 = t.beta1;
  o.adam.beta2 = t.beta2;
  o.adam.grad_clip = t.grad_clip;
  return o;
}

Device train_device(const MoeTrainOptions& options, int visible_gpus) {
  // Every moe.policy runs on the device (fastermoe's shadows and smart schedule, flexmoe's replica
  // moves included), so only the build, the GPUs and model.arch decide. BERT is GPT's network with
  // masked targets; Swin's network keeps its buffers on the host.
  const std::string& requested = options.train.device;
  const std::string& arch = options.model.arch;
  const bool arch_on_gpu = arch == "gpt" || arch == "bert";
  if (requested == "cpu") return Device::Host;
  if (requested == "cuda") {
    SKEW_CHECK(cuda_built(),
               "train.device=cuda, but this build has no CUDA (configure with -DSKEW_CUDA=ON, or "
               "use train.device=cpu)");
    SKEW_CHECK(visible_gpus > 0,
               "train.device=cuda, but no CUDA device is visible to this rank (train.device=cpu "
               "or auto runs on the CPU)");
    SKEW_CHECK(arch_on_gpu,
               "train.device=cuda with model.arch=" << arch << ": the " << arch
                                                    << " network runs on the CPU only (model.arch=gpt "
                                                       "and bert run on the GPU; or use train.device=cpu)");
    return Device::Cuda;
  }
  return cuda_built() && visible_gpus > 0 && arch_on_gpu ? Device::Cuda : Device::Host;
}

MoeOptions moe_options(const MoeSection& moe) {
  MoeOptions e;
  e.d_ff = moe.d_ff;
  e.gate.num_experts = moe.num_experts;
  e.gate.top_k = moe.top_k;
  SKEW_CHECK(e.gate.top_k <= e.gate.num_experts,
             "moe.top_k = " << e.gate.top_k << " routes each token to more experts than the " << e.gate.num_experts
                            << " of moe.num_experts: set moe.top_k to at most " << e.gate.num_experts
                            << " or raise moe.num_experts");
  e.gate.aux_weight = moe.aux_weight;
  e.gate.z_weight = moe.z_weight;
  e.policy = parse_policy(moe.policy);
  e.schedule_chunks = e.policy == Policy::FasterMoE ? moe.fastermoe_chunks : 0;
  e.capacity_factor_train = moe.capacity_factor;
  e.capacity_factor_eval = moe.eval_capacity_factor;
  e.min_capacity = moe.min_capacity;
  e.drop_tokens = moe.drop_tokens;
  e.use_rts = moe.use_rts;
  e.drop_by_probability = moe.drop_policy == "probability";
  return e;
}

std::shared_ptr<BalancingPolicy<float>> make_balancing_policy(const placement::PlacementSettings& settings,
                                                              const MoeOptions& moe, int moe_layers,
                                                              comm::ProcessGroup& world) {
  if (moe.policy == Policy::FasterMoE)
    return make_fastermoe<float>(placement::placement_options(settings, moe.device), world, moe);
  if (moe.policy != Policy::FlexMoE) return make_policy<float>(moe);
  const int slots = placement::slots_per_rank(settings, moe.gate.num_experts, world.size());
  return make_flexmoe<float>(placement::placement_options(settings, moe.device), slots, world, moe_layers, moe);
}

namespace {
std::unique_ptr<Model> make_model(const MoeTrainOptions& o, const ModelOptions& options, comm::ProcessGroup& world,
                                  const std::vector<placement::LayerPlacement>& placements,
                                  std::shared_ptr<BalancingPolicy<float>> policy) {
  if (o.model.arch == "swin") return std::make_unique<SwinModel>(o, options, world, placements, std::move(policy));
  if (o.model.arch == "bert") return std::make_unique<BertModel>(o, options, world, placements, std::move(policy));
  return std::make_unique<GptModel>(o, options, world, placements, std::move(policy));
}
}  // namespace

Session::Session(const MoeTrainOptions& run_options, comm::ProcessGroup& world_group)
    : options(run_options),
      world(world_group),
      loop(loop_options(options)),
      policy_name(options.moe.policy),
      model_keys(moe::model_keys(options)) {
  if (options.train.blas_threads > 0)
    kernels::moe::set_blas_threads(capped_thread_count("train.blas_threads", options.train.blas_threads));
  const std::string& arch = options.model.arch;
  ModelOptions model_options = arch == "swin"   ? SwinModel::options(options, moe_options(options.moe))
                               : arch == "bert" ? BertModel::options(options, moe_options(options.moe))
                                                : GptModel::options(options, moe_options(options.moe));
  model_options.device = model_options.moe.device = train_device(options, cuda_device_count());
  const int N = world.size(), E = model_options.moe.gate.num_experts;
  if (model_options.precision == Precision::Bf16 && world.rank() == 0)
    SKEW_INFO("train.precision = bf16: matrix products on the CPU use " << kernels::gemm_bf16_host_path());
  SKEW_CHECK(E % N == 0, "moe.num_experts = " << E << " cannot be shared evenly by the " << N
                                              << " ranks (each holds the same number of experts): set "
                                                 "moe.num_experts to a multiple of "
                                              << N << " (" << (E / N + 1) * N
                                              << ", say) or launch a number of ranks that divides " << E);
  policy = make_balancing_policy(options.placement, model_options.moe, model_options.moe_layers(), world);
  check_model_memory(options, model_options, policy->slots_per_rank(E, N));
  const std::vector<placement::LayerPlacement> placements(
      static_cast<std::size_t>(model_options.moe_layers()),
      placement::LayerPlacement::block(E, N, policy->slots_per_rank(E, N)));
  const std::string model_name = "the model (model.arch = " + arch +
                                 ", model.d_model = " + std::to_string(options.model.d_model) +
                                 ", model.layers = " + std::to_string(options.model.layers) +
                                 ", moe.num_experts = " + std::to_string(E) + " over " + std::to_string(N) + " ranks)";
  model = allocating(model_name, -1, [&] { return make_model(options, model_options, world, placements, policy); });
  adam = allocating("AdamW's moments of " + model_name, -1,
                    [&] { return std::make_unique<AdamW>(loop.adam, model->network(), world); });
  store = std::make_unique<ModelExpertStore>(model->network());
  if (!options.output.checkpoint_dir.empty())
    ckpt = std::make_unique<CheckpointDir>(options.output.checkpoint_dir, world.rank(), N, options.output.keep);
}

}  // namespace skew::moe
