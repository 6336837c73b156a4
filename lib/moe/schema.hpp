// moe_train's configuration: its schema (every key, default and help text), the values of the
// [moe] section as the MoE layers' options, and the balancing policy moe.policy names.
#pragma once
#include <memory>

#include "core/config.hpp"
#include "lib/moe/moe_layer.hpp"

namespace skew::moe {

Schema moe_train_schema();

// train.device resolved for this rank, which sees `visible_gpus` GPUs: cuda when asked for (an
// error naming the key where the build has no CUDA or no GPU is visible, naming model.arch too
// for bert and swin, whose networks run on the host only), or asked `auto` of a CUDA build that
// sees a GPU and trains model.arch=gpt (under any moe.policy); else the host.
Device train_device(const Config& config, int visible_gpus);

// moe.*: experts, gate, and the balancing policy with its knobs (d_model is the model's).
MoeOptions moe_options(const Config& config);

// The policy `moe` names for `moe_layers` MoE layers over `world`; flexmoe's placement machinery
// from the [placement] keys (collective: it measures its cost constants).
std::shared_ptr<BalancingPolicy<float>> policy_from_config(const Config& config, const MoeOptions& moe, int moe_layers,
                                                           comm::ProcessGroup& world);

}  // namespace skew::moe
