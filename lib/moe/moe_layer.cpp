#include "lib/moe/moe_layer.hpp"

#include <numeric>
#include <type_traits>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "kernels/moe_route.hpp"
#include "lib/moe/ops.hpp"
#include "lib/moe/policies/policy.hpp"
#include "lib/moe/row_permute.hpp"

namespace skew::moe {

namespace km = kernels::moe;

namespace {
// Elements this rank sends to others when `rows[r]` rows of `width` go to each rank r.
double sent_elements(const std::vector<std::size_t>& rows, int self, int width) {
  double sum = 0;
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (static_cast<int>(r) != self) sum += static_cast<double>(rows[r]) * width;
  return sum;
}

}  // namespace

template <class T>
MoeLayer<T>::MoeLayer(const MoeOptions& opt, comm::ProcessGroup& world, placement::LayerPlacement placement,
                      std::shared_ptr<BalancingPolicy<T>> policy)
    : opt_(opt),
      world_(world),
      placement_(std::move(placement)),
      policy_(policy ? std::move(policy) : make_policy<T>(opt)),
      gate_(opt.device) {
  SKEW_CHECK(opt.device == Device::Host || (std::is_same_v<T, float>),
             "MoE layer on cuda: the float64 layer is the host-only reference");
  for (DeviceArray<T>* b :
       {&back_, &xe_, &hpre_, &h_, &send_, &recv_, &ye_, &dsend_, &dweight_, &drecv_, &dye_, &dxe_, &dhpre_, &dback_})
    b->set_device(opt.device);
  for (DeviceArray<std::int64_t>* b :
       {&pos_, &local_pos_, &counts_, &order_, &offsets_, &replica_end_, &block_begin_, &block_target_})
    b->set_device(opt.device);
  kept_flags_.set_device(opt.device);
  activation_bf16_.set_device(opt.device);
  keys_.set_device(opt.device);
  replica_rank_.set_device(opt.device);
  placement_.validate();
  SKEW_CHECK(placement_.world_size == world.size(),
             "placement is for " << placement_.world_size << " ranks, world has " << world.size());
  SKEW_CHECK(placement_.num_experts() == opt.gate.num_experts,
             "placement has " << placement_.num_experts() << " experts, moe.num_experts is " << opt.gate.num_experts);
  for (int e : placement_.experts_on(world.rank())) create_expert(e);
}

template <class T>
ExpertState<T>& MoeLayer<T>::create_expert(int e) {
  const std::int64_t p = opt_.expert_params();
  ExpertState<T>& s = experts_[e];
  s.w = Tensor::zeros({p}, dtype_of<T>(), opt_.device);
  s.m = Tensor::zeros({p}, dtype_of<T>(), opt_.device);
  s.v = Tensor::zeros({p}, dtype_of<T>(), opt_.device);
  s.g.set_device(opt_.device);
  s.g.zeros(static_cast<std::size_t>(p));
  weights_changed();
  return s;
}

template <class T>
void MoeLayer<T>::init_experts(std::uint64_t seed, int layer, double stddev) {
  const int D = opt_.d_model, F = opt_.d_ff;
  for (auto& [e, s] : experts_) {
    Rng rng(seed, 1000003ULL + static_cast<std::uint64_t>(layer) * 65536 + static_cast<std::uint64_t>(e));
    Tensor host = Tensor::zeros(s.w.shape(), s.w.dtype());  // drawn here, then moved to the layer's device
    T* w = host.template data<T>();
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(D) * F; ++i) w[i] = static_cast<T>(stddev * rng.normal());
    T* w2 = w + static_cast<std::size_t>(D) * F + F;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(D) * F; ++i) w2[i] = static_cast<T>(stddev * rng.normal());
    s.w.copy_from(host);
  }
  weights_changed();
}

template <class T>
T* MoeLayer<T>::params_of(int e) {
  auto it = experts_.find(e);
  if (it != experts_.end()) return it->second.w.template data<T>();
  T* lent = policy_->lent_params(*this, e);
  SKEW_CHECK(lent, "rank " << world_.rank() << " received tokens for expert " << e << " it does not hold");
  return lent;
}

template <class T>
T* MoeLayer<T>::grads_of(int e) {
  auto it = experts_.find(e);
  if (it != experts_.end()) return it->second.g.data();
  T* lent = policy_->lent_grads(*this, e);
  SKEW_CHECK(lent, "rank " << world_.rank() << " computed expert " << e << " it does not hold");
  return lent;
}

namespace {
std::vector<std::size_t> times_width(const std::vector<std::size_t>& rows, int d) {
  std::vector<std::size_t> out(rows);
  for (auto& v : out) v *= static_cast<std::size_t>(d);
  return out;
}
}  // namespace

template <class T>
void MoeLayer<T>::forward(int n, const T* x, const T* wg, const StepContext& ctx, T* y) {
  const int D = opt_.d_model, F = opt_.d_ff, k = opt_.gate.top_k;
  const Device device = opt_.device;
  n_ = n;
  step_ = ctx;
  Timer timer;
  gate_forward<T>(
      opt_.gate, n, D, x, wg, static_cast<const T*>(ctx.jitter), ctx.forced,
      [&](std::vector<double>& v) { world_.allreduce(comm::view(v), comm::ReduceOp::Sum); }, gate_);
  times_.gate += timer.seconds();
  timer.reset();
  policy_->plan(*this);
  kept_.assign(static_cast<std::size_t>(n_) * k, 1);
  policy_->keep(*this, ctx.training, kept_);
  route();
  round_expert_weights();
  const std::size_t send_total = std::accumulate(send_rows_.begin(), send_rows_.end(), std::size_t{0});
  const std::size_t recv_total = std::accumulate(recv_rows_.begin(), recv_rows_.end(), std::size_t{0});
  const auto rows = static_cast<std::int64_t>(send_total);
  send_.zeros(send_total * D);
  recv_.resize(recv_total * D);
  km::dispatch_rows(device, static_cast<std::int64_t>(pos_.size()), k, D, pos_.data(), rows, x, send_.data());
  times_.dispatch += timer.seconds();
  // Dispatch and combine, forward and backward: each rank sends its send rows twice and its
  // received rows back twice.
  times_.alltoall_bytes +=
      2.0 * sizeof(T) * (sent_elements(send_rows_, world_.rank(), D) + sent_elements(recv_rows_, world_.rank(), D));
  xe_.zeros(recv_total * D);
  hpre_.zeros(recv_total * F);
  h_.zeros(recv_total * F);
  ye_.resize(recv_total * D);
  back_.zeros(send_total * D);
  if (opt_.schedule_chunks > 0) {
    forward_pipelined(send_, recv_, ye_);
  } else {
    timer.reset();
    world_.alltoallv(comm::view(send_), times_width(send_rows_, D), comm::view(recv_), times_width(recv_rows_, D));
    times_.alltoall += timer.seconds();
    timer.reset();
    const double cpu = thread_cpu_seconds();
    scatter_rows_at(recv_.data(), local_pos_.data(), recv_total, D, xe_.data(), device);
    experts_forward(all_local_experts(), xe_.data(), hpre_.data(), h_.data(), ye_.data());
    gather_rows_from(ye_.data(), local_pos_.data(), recv_total, D, recv_.data(), device);
    times_.expert += timer.seconds();
    times_.expert_cpu += thread_cpu_seconds() - cpu;
    timer.reset();
    world_.alltoallv(comm::view(recv_), times_width(recv_rows_, D), comm::view(back_), times_width(send_rows_, D));
    times_.alltoall += timer.seconds();
  }
  timer.reset();
  km::combine(device, n, k, D, pos_.data(), rows, gate_.weight.data(), back_.data(), y);
  times_.combine += timer.seconds();
}

template <class T>
void MoeLayer<T>::backward(const T* dy, const T* wg, T* dx, T* dwg) {
  const int D = opt_.d_model, k = opt_.gate.top_k;
  const Device device = opt_.device;
  Timer timer;
  const std::size_t send_total = back_.size() / D, recv_total = xe_.size() / D;
  const auto rows = static_cast<std::int64_t>(send_total);
  dsend_.zeros(send_total * D);
  dweight_.resize(pos_.size());
  km::combine_backward(device, static_cast<std::int64_t>(pos_.size()), k, D, pos_.data(), rows, gate_.weight.data(), dy,
                       back_.data(), dsend_.data(), dweight_.data());
  times_.combine += timer.seconds();
  const int F = opt_.d_ff;
  dback_.resize(send_total * D);
  dye_.resize(recv_total * D);
  dhpre_.resize(recv_total * F);
  if (opt_.schedule_chunks > 0) {
    backward_pipelined(dsend_, dback_, dye_, dhpre_);
  } else {
    drecv_.resize(recv_total * D);
    timer.reset();
    world_.alltoallv(comm::view(dsend_), times_width(send_rows_, D), comm::view(drecv_), times_width(recv_rows_, D));
    times_.alltoall += timer.seconds();
    timer.reset();
    const double cpu = thread_cpu_seconds();
    dxe_.resize(recv_total * D);
    scatter_rows_at(drecv_.data(), local_pos_.data(), recv_total, D, dye_.data(), device);
    const ExpertGroups groups = all_local_experts();
    experts_backward_rows(groups, hpre_.data(), dye_.data(), dhpre_.data(), dxe_.data());
    experts_weight_grads(groups, xe_.data(), h_.data(), dye_.data(), dhpre_.data());
    gather_rows_from(dxe_.data(), local_pos_.data(), recv_total, D, drecv_.data(), device);
    times_.expert += timer.seconds();
    times_.expert_cpu += thread_cpu_seconds() - cpu;
    timer.reset();
    world_.alltoallv(comm::view(drecv_), times_width(recv_rows_, D), comm::view(dback_), times_width(send_rows_, D));
    times_.alltoall += timer.seconds();
  }
  timer.reset();
  gate_backward<T>(opt_.gate, gate_, wg, dweight_.data(), dx, dwg);
  km::add_rows(device, n_, k, D, pos_.data(), rows, dback_.data(), dx);
  times_.gate += timer.seconds();
}

template <class T>
void MoeLayer<T>::reduce_replica_grads() {
  Timer timer;
  policy_->reduce_grads(*this);
  times_.sync += timer.seconds();
}

template class MoeLayer<float>;
template class MoeLayer<double>;

}  // namespace skew::moe
