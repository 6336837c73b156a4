// What one moe_train run holds, built from its options: the loop's options, the model family
// (model.arch: GPT, BERT or Swin) with its MoE layers consulting the balancing policy, AdamW, and
// the checkpoint directory. The trainer drives it; resume.hpp loads a checkpoint into it; tests build one to
// look at the state a resume restores.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/checkpoint.hpp"
#include "lib/moe/models/model.hpp"
#include "lib/moe/optimizer.hpp"
#include "lib/moe/options.hpp"
#include "lib/moe/policies/policy.hpp"
#include "lib/moe/state.hpp"
#include "mpi/process_group.hpp"

namespace skew::moe {

// train.* and output.* as the loop uses them (the model family reads its own).
struct LoopOptions {
  AdamWOptions adam;
  std::int64_t iterations = 0, eval_interval = 0, log_interval = 0, checkpoint_interval = 0;
  // Whether iteration `it` ends an `interval` (0 = none), or is the last.
  bool due(std::int64_t interval, std::int64_t it) const {
    return (interval > 0 && (it + 1) % interval == 0) || it + 1 == iterations;
  }
};

LoopOptions loop_options(const MoeTrainOptions& options);

// train.device resolved for this rank, which sees `visible_gpus` GPUs: cuda when asked for (an
// error naming the key where the build has no CUDA or no GPU is visible, naming model.arch too
// for bert and swin, whose networks run on the host only), or asked `auto` of a CUDA build that
// sees a GPU and trains model.arch=gpt or bert (under any moe.policy); else the host.
Device train_device(const MoeTrainOptions& options, int visible_gpus);

// moe.*: experts, gate, and the balancing policy with its knobs (d_model is the model's).
MoeOptions moe_options(const MoeSection& moe);

// The policy moe.policy names for `moe_layers` MoE layers over `world`; flexmoe's placement
// machinery from the [placement] settings (collective: it measures its cost constants).
std::shared_ptr<BalancingPolicy<float>> make_balancing_policy(const placement::PlacementSettings& settings,
                                                              const MoeOptions& moe, int moe_layers,
                                                              comm::ProcessGroup& world);

struct Session {
  Session(const MoeTrainOptions& options, comm::ProcessGroup& world);
  MoeTrainOptions options;
  comm::ProcessGroup& world;
  LoopOptions loop;
  std::string policy_name;
  Json model_keys;  // model.arch and its shape keys, recorded in and checked against checkpoints
  std::shared_ptr<BalancingPolicy<float>> policy;
  std::unique_ptr<Model> model;
  std::unique_ptr<AdamW> adam;
  std::unique_ptr<ModelExpertStore> store;  // where the policy moves expert state
  std::unique_ptr<CheckpointDir> ckpt;
};

}  // namespace skew::moe
