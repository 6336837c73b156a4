#include "lib/moe/session.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_threads.hpp"
#include "lib/moe/models/bert.hpp"
#include "lib/moe/models/swin.hpp"
#include "lib/moe/schema.hpp"

namespace skew::moe {

LoopOptions loop_options(const Config& c) {
  LoopOptions o;
  o.iterations = c.get_int("train.iterations");
  o.eval_interval = c.get_int("train.eval_interval");
  o.log_interval = c.get_int("train.log_interval");
  o.checkpoint_interval = c.get_int("output.checkpoint_interval");
  o.adam.lr = c.get_float("train.lr");
  o.adam.min_lr_ratio = c.get_float("train.min_lr_ratio");
  o.adam.warmup = c.get_int("train.warmup");
  o.adam.total = o.iterations;
  o.adam.weight_decay = c.get_float("train.weight_decay");
  o.adam.beta1 = c.get_float("train.beta1");
  o.adam.beta2 = c.get_float("train.beta2");
  o.adam.grad_clip = c.get_float("train.grad_clip");
  return o;
}

Session::Session(const Config& config, comm::ProcessGroup& world_group)
    : world(world_group),
      loop(loop_options(config)),
      policy_name(config.get_string("moe.policy")),
      model_keys(moe::model_keys(config)) {
  if (config.get_int("train.blas_threads") > 0)
    kernels::moe::set_blas_threads(static_cast<int>(config.get_int("train.blas_threads")));
  const std::string arch = config.get_string("model.arch");
  ModelOptions options = arch == "swin"   ? SwinModel::options(config, moe_options(config))
                         : arch == "bert" ? BertModel::options(config, moe_options(config))
                                          : GptModel::options(config, moe_options(config));
  options.device = options.moe.device = train_device(config, cuda_device_count());
  const int N = world.size(), E = options.moe.gate.num_experts;
  if (options.precision == Precision::Bf16 && world.rank() == 0)
    SKEW_INFO("train.precision = bf16: matrix products on the CPU use " << kernels::gemm_bf16_host_path());
  SKEW_CHECK(E % N == 0, "moe.num_experts " << E << " is not a multiple of the " << N << " ranks");
  policy = policy_from_config(config, options.moe, options.moe_layers(), world);
  const std::vector<placement::LayerPlacement> placements(
      static_cast<std::size_t>(options.moe_layers()),
      placement::LayerPlacement::block(E, N, policy->slots_per_rank(E, N)));
  if (arch == "swin")
    model = std::make_unique<SwinModel>(config, options, world, placements, policy);
  else if (arch == "bert")
    model = std::make_unique<BertModel>(config, options, world, placements, policy);
  else
    model = std::make_unique<GptModel>(config, options, world, placements, policy);
  adam = std::make_unique<AdamW>(loop.adam, model->network(), world);
  store = std::make_unique<ModelExpertStore>(model->network());
  if (!config.get_string("output.checkpoint_dir").empty())
    ckpt = std::make_unique<CheckpointDir>(config.get_string("output.checkpoint_dir"), world.rank(), N,
                                           static_cast<int>(config.get_int("output.keep")));
}

}  // namespace skew::moe
