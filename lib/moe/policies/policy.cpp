#include "lib/moe/policies/policy.hpp"

#include "core/error.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/policies/deepspeed.hpp"
#include "lib/moe/policies/static.hpp"

namespace skew::moe {

Policy parse_policy(const std::string& name) {
  if (name == "static") return Policy::Static;
  if (name == "deepspeed") return Policy::DeepSpeed;
  if (name == "fastermoe") return Policy::FasterMoE;
  if (name == "flexmoe") return Policy::FlexMoE;
  SKEW_THROW("moe.policy: unknown policy '" << name << "' (static, deepspeed, fastermoe, flexmoe)");
}

template <class T>
std::shared_ptr<BalancingPolicy<T>> make_policy(const MoeOptions& o) {
  switch (o.policy) {
    case Policy::Static: return std::make_shared<StaticPolicy<T>>();
    case Policy::DeepSpeed:
      return std::make_shared<DeepSpeedPolicy<T>>(DeepSpeedOptions{.capacity_factor_train = o.capacity_factor_train,
                                                                   .capacity_factor_eval = o.capacity_factor_eval,
                                                                   .min_capacity = o.min_capacity,
                                                                   .drop_tokens = o.drop_tokens,
                                                                   .use_rts = o.use_rts,
                                                                   .drop_by_probability = o.drop_by_probability});
    case Policy::FasterMoE:
      SKEW_THROW(
          "moe.policy fastermoe needs its measured cost model: build it with make_fastermoe "
          "(policies/fastermoe.hpp)");
    case Policy::FlexMoE: break;
  }
  SKEW_THROW("moe.policy flexmoe needs its placement machinery: build it with make_flexmoe (policies/flexmoe.hpp)");
}

template std::shared_ptr<BalancingPolicy<float>> make_policy<float>(const MoeOptions&);
template std::shared_ptr<BalancingPolicy<double>> make_policy<double>(const MoeOptions&);

}  // namespace skew::moe
