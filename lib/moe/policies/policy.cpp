#include "lib/moe/policies/policy.hpp"

#include "lib/core/error.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/policies/deepspeed.hpp"
#include "lib/moe/policies/fastermoe.hpp"
#include "lib/moe/policies/flexmoe.hpp"
#include "lib/moe/policies/static.hpp"

namespace skew::moe {

template <class T>
std::shared_ptr<BalancingPolicy<T>> make_policy(const MoeOptions& o) {
  switch (o.policy) {
    case Policy::Static: return std::make_shared<StaticPolicy<T>>();
    case Policy::DeepSpeed:
      return std::make_shared<DeepSpeedPolicy<T>>(DeepSpeedOptions{.capacity_factor_train = o.capacity_factor_train,
                                                                   .capacity_factor_eval = o.capacity_factor_eval,
                                                                   .drop_tokens = o.drop_tokens,
                                                                   .drop_by_probability = o.drop_by_probability});
    case Policy::FasterMoE:
      return std::make_shared<FasterMoePolicy<T>>(
          FasterMoeOptions{.gflops = o.fastermoe_gflops, .gbps = o.fastermoe_gbps}, o.d_model, o.d_ff,
          o.expert_params());
    case Policy::FlexMoE: return std::make_shared<FlexMoePolicy<T>>(o.live_replica_shares);
  }
  SKEW_THROW("unknown moe policy " << static_cast<int>(o.policy));
}

template std::shared_ptr<BalancingPolicy<float>> make_policy<float>(const MoeOptions&);
template std::shared_ptr<BalancingPolicy<double>> make_policy<double>(const MoeOptions&);

}  // namespace skew::moe
