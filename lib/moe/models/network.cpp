#include "lib/moe/models/network.hpp"

#include <type_traits>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"

namespace skew::moe {

int ModelOptions::moe_layers() const {
  int count = 0;
  for (int l = 0; l < layers; ++l) count += is_moe_block(l) ? 1 : 0;
  return count;
}

template <class T>
MoeNetwork<T>::MoeNetwork(const ModelOptions& opt, comm::ProcessGroup& world)
    : opt_(opt), world_(world), dense_w_(opt.device), dense_g_(opt.device) {
  SKEW_CHECK((opt.device == Device::Host || std::is_same_v<T, float>),
             "the float64 network runs on the host only (it is the reference of the float one)");
  opt_.moe.device = opt.device;  // the layers take the network's device pointers as they are
}

template <class T>
std::size_t MoeNetwork<T>::add(const std::string& name, std::size_t size) {
  const std::size_t off = dense_size_;
  segments_.push_back({name, off, size});
  offset_of_[name] = off;
  dense_size_ += size;
  return off;
}

template <class T>
void MoeNetwork<T>::allocate_dense() {
  dense_w_.resize(dense_size_);
  dense_g_.resize(dense_size_);
}

template <class T>
T* MoeNetwork<T>::param(const std::string& name) {
  auto it = offset_of_.find(name);
  SKEW_CHECK(it != offset_of_.end(), "model has no parameter '" << name << "'");
  return dense_w_.data() + it->second;
}

template <class T>
T* MoeNetwork<T>::grad(const std::string& name) {
  auto it = offset_of_.find(name);
  SKEW_CHECK(it != offset_of_.end(), "model has no parameter '" << name << "'");
  return dense_g_.data() + it->second;
}

template <class T>
void MoeNetwork<T>::zero_grads() {
  dense_g_.zero();
  for (auto& layer : moe_)
    for (auto& [e, s] : layer->experts()) s.g.zeros(s.g.size());
}

template <class T>
void MoeNetwork<T>::sync_grads() {
  Timer timer;
  // In place on the device: NCCL under the hybrid world group, MPI's pinned staging otherwise.
  world_.allreduce(comm::view(dense_g_.data(), dense_g_.size(), device()), comm::ReduceOp::Sum);
  for (auto& layer : moe_) layer->reduce_replica_grads();
  sync_seconds_ = timer.seconds();
}

template <class T>
double MoeNetwork<T>::moe_forward(int layer, int n, const T* x, const T* wg, const StepInputs& in, T* y) {
  StepContext ctx;
  ctx.training = in.training;
  ctx.seed = in.seed, ctx.iteration = in.iteration, ctx.layer = layer;
  if (layer < static_cast<int>(in.forced.size())) ctx.forced = in.forced[static_cast<std::size_t>(layer)];
  MoeLayer<T>& moe = *moe_[static_cast<std::size_t>(layer)];
  const std::size_t nD = static_cast<std::size_t>(n) * static_cast<std::size_t>(moe.options().d_model);
  std::vector<T> noise;
  if (in.training && opt_.jitter > 0) {
    // Keyed by (iteration, layer, global token), so it does not depend on the world size.
    Rng rng(in.seed, (static_cast<std::uint64_t>(in.iteration) << 8) + static_cast<std::uint64_t>(layer) + 7,
            static_cast<std::uint64_t>(world_.rank()) * nD);
    noise.resize(nD);
    for (auto& v : noise) v = static_cast<T>(1.0 - opt_.jitter + 2.0 * opt_.jitter * rng.uniform());
    ctx.jitter = noise.data();
  }
  moe.forward(n, x, wg, ctx, y);
  return moe.gate_state().aux_loss + moe.gate_state().z_loss;
}

template <class T>
void MoeNetwork<T>::moe_backward(int layer, const T* dy, const T* wg, T* dx, T* dwg) {
  moe_[static_cast<std::size_t>(layer)]->backward(dy, wg, dx, dwg);
}

template class MoeNetwork<float>;
template class MoeNetwork<double>;

}  // namespace skew::moe
