// DeepSpeed-MoE's token capacity (deepspeed/moe/sharded_moe.py): each expert takes at most
// C = ceil(tokens / E * capacity_factor) assignments per rank (times k for top-k), and the rest
// are dropped, first choices before second ones and earlier tokens first ("position"), or the
// most probable first ("probability", where DeepSpeed samples at random). With drop_tokens =
// false nothing is dropped; instead every expert's block is padded to the largest block over
// the group, DeepSpeed's fixed [E, C, M] all-to-all buffer. Placement as in StaticPolicy.
#pragma once
#include "lib/moe/policies/static.hpp"

namespace skew::moe {

struct DeepSpeedOptions {
  double capacity_factor_train = 1.0, capacity_factor_eval = 2.0;
  bool drop_tokens = true;           // false: pad every expert to the largest load instead
  bool drop_by_probability = false;  // keep the most probable assignments rather than the first
};

template <class T>
class DeepSpeedPolicy : public StaticPolicy<T> {
 public:
  explicit DeepSpeedPolicy(DeepSpeedOptions options) : opt_(options) {}
  void keep(const MoeLayer<T>& layer, bool training, std::vector<char>& kept) const override;
  std::int64_t pad(const MoeLayer<T>& layer, std::vector<std::int64_t>& block) const override;

 private:
  DeepSpeedOptions opt_;
};

}  // namespace skew::moe
