// What one moe_train run holds, built from the config: the loop's options, the model family
// (model.arch: GPT, BERT or Swin) with its MoE layers consulting the balancing policy, AdamW, and
// the checkpoint directory. The trainer drives it; resume.hpp loads a checkpoint into it; tests build one to
// look at the state a resume restores.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/checkpoint.hpp"
#include "core/config.hpp"
#include "lib/moe/models/model.hpp"
#include "lib/moe/optimizer.hpp"
#include "lib/moe/policies/policy.hpp"
#include "lib/moe/state.hpp"
#include "mpi/process_group.hpp"

namespace skew::moe {

// train.* and output.* as the loop uses them (the model family reads its own keys).
struct LoopOptions {
  AdamWOptions adam;
  std::int64_t iterations = 0, eval_interval = 0, log_interval = 0, checkpoint_interval = 0;
  // Whether iteration `it` ends an `interval` (0 = none), or is the last.
  bool due(std::int64_t interval, std::int64_t it) const {
    return (interval > 0 && (it + 1) % interval == 0) || it + 1 == iterations;
  }
};

LoopOptions loop_options(const Config& c);

struct Session {
  Session(const Config& config, comm::ProcessGroup& world);
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
