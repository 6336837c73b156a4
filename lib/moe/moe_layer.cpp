#include "lib/moe/moe_layer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/moe_dispatch.hpp"
#include "lib/core/error.hpp"
#include "lib/core/rng.hpp"
#include "lib/core/timer.hpp"
#include "lib/moe/ops.hpp"
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

// Rows each source rank sends to each replica of one expert. Replica targets are the shares of
// the expert's global count; every source first fills a replica on its own rank (up to that
// replica's target), and only the remainder crosses ranks, filling the other replicas' room in
// source order. Every rank computes the same table from the all-gathered per-source counts.
std::vector<std::vector<std::int64_t>> locality_split(const std::vector<std::int64_t>& per_source,
                                                      const std::vector<placement::Replica>& replicas) {
  const std::int64_t total = std::accumulate(per_source.begin(), per_source.end(), std::int64_t{0});
  std::vector<std::int64_t> room = placement::split_tokens(total, replicas);
  std::vector<std::vector<std::int64_t>> out(per_source.size(), std::vector<std::int64_t>(replicas.size(), 0));
  std::vector<std::int64_t> left = per_source;
  for (std::size_t i = 0; i < replicas.size(); ++i) {
    const auto src = static_cast<std::size_t>(replicas[i].rank);
    const std::int64_t local = std::min(left[src], room[i]);
    out[src][i] = local, left[src] -= local, room[i] -= local;
  }
  std::size_t i = 0;
  for (std::size_t src = 0; src < per_source.size(); ++src)
    while (left[src] > 0) {
      while (room[i] == 0) ++i;
      const std::int64_t moved = std::min(left[src], room[i]);
      out[src][i] += moved, left[src] -= moved, room[i] -= moved;
    }
  return out;
}
}  // namespace

template <class T>
MoeLayer<T>::MoeLayer(const MoeOptions& opt, comm::ProcessGroup& world, placement::LayerPlacement placement,
                      std::shared_ptr<BalancingPolicy<T>> policy)
    : opt_(opt),
      world_(world),
      placement_(std::move(placement)),
      policy_(policy ? std::move(policy) : make_policy<T>(opt)) {
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
  s.w = Tensor::zeros({p}, dtype_of<T>());
  s.m = Tensor::zeros({p}, dtype_of<T>());
  s.v = Tensor::zeros({p}, dtype_of<T>());
  s.g.assign(static_cast<std::size_t>(p), T(0));
  return s;
}

template <class T>
void MoeLayer<T>::init_experts(std::uint64_t seed, int layer, double stddev) {
  const int D = opt_.d_model, F = opt_.d_ff;
  for (auto& [e, s] : experts_) {
    Rng rng(seed, 1000003ULL + static_cast<std::uint64_t>(layer) * 65536 + static_cast<std::uint64_t>(e));
    T* w = s.w.template data<T>();
    std::fill(w, w + s.w.numel(), T(0));
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(D) * F; ++i) w[i] = static_cast<T>(stddev * rng.normal());
    T* w2 = w + static_cast<std::size_t>(D) * F + F;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(D) * F; ++i) w2[i] = static_cast<T>(stddev * rng.normal());
  }
}

template <class T>
void MoeLayer<T>::set_shadowed(std::vector<int> experts) {
  shadowed_ = std::move(experts);
  shadow_flag_.assign(static_cast<std::size_t>(opt_.gate.num_experts), 0);
  for (int e : shadowed_) shadow_flag_[static_cast<std::size_t>(e)] = 1;
  shadows_.clear();
}

template <class T>
T* MoeLayer<T>::params_of(int e) {
  auto it = experts_.find(e);
  if (it != experts_.end()) return it->second.w.template data<T>();
  auto sh = shadows_.find(e);
  SKEW_CHECK(sh != shadows_.end(),
             "rank " << world_.rank() << " received tokens for expert " << e << " it does not hold");
  return sh->second.w.data();
}

template <class T>
T* MoeLayer<T>::grads_of(int e) {
  auto it = experts_.find(e);
  return it != experts_.end() ? it->second.g.data() : shadows_.at(e).g.data();
}

template <class T>
void MoeLayer<T>::expert_forward(int e, int rows, const T* x, T* hpre, T* h, T* y) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const T* w = params_of(e);
  linear_forward<T>(rows, D, F, x, w, w + static_cast<std::size_t>(D) * F, hpre, opt_.precision);
  gelu_forward<T>(static_cast<std::size_t>(rows) * F, hpre, h);
  const T* w2 = w + static_cast<std::size_t>(D) * F + F;
  linear_forward<T>(rows, F, D, h, w2, w2 + static_cast<std::size_t>(D) * F, y, opt_.precision);
}

template <class T>
void MoeLayer<T>::expert_backward_rows(int e, int rows, const T* hpre, const T* dy, T* dhpre, T* dx) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const T* w = params_of(e);
  matmul<T>(false, true, rows, F, D, T(1), dy, w + static_cast<std::size_t>(D) * F + F, T(0), dhpre, opt_.precision);
  gelu_backward<T>(static_cast<std::size_t>(rows) * F, hpre, dhpre, dhpre);
  matmul<T>(false, true, rows, D, F, T(1), dhpre, w, T(0), dx, opt_.precision);
}

template <class T>
void MoeLayer<T>::expert_weight_grads(int e, int rows, const T* x, const T* h, const T* dy, const T* dhpre) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const T* w = params_of(e);
  T* g = grads_of(e);
  const std::size_t off2 = static_cast<std::size_t>(D) * F + F;
  linear_backward<T>(rows, F, D, h, w + off2, dy, nullptr, g + off2, g + off2 + static_cast<std::size_t>(D) * F,
                     opt_.precision);
  linear_backward<T>(rows, D, F, x, w, dhpre, nullptr, g, g + static_cast<std::size_t>(D) * F, opt_.precision);
}

// Decides the destination (rank, expert) block of every kept assignment and its row there.
template <class T>
void MoeLayer<T>::route() {
  const int E = opt_.gate.num_experts, k = opt_.gate.top_k, N = world_.size();
  const std::size_t nk = static_cast<std::size_t>(n_) * k;
  std::vector<std::int64_t> kept_count(static_cast<std::size_t>(E), 0);
  for (std::size_t a = 0; a < nk; ++a)
    if (kept_[a]) ++kept_count[static_cast<std::size_t>(gate_.expert[a])];
  // Replica split: the expert's tokens over all ranks go to its replicas by the placement
  // shares, each rank's own replica taking its local tokens first (locality_split).
  bool replicated = false;
  for (int e = 0; e < E; ++e) replicated = replicated || placement_.experts[static_cast<std::size_t>(e)].size() >= 2;
  std::vector<std::int64_t> all_counts(static_cast<std::size_t>(N) * E);
  if (replicated) world_.allgather(comm::view(kept_count), comm::view(all_counts));
  // The policy decides how each replicated expert's tokens split among its replicas this step.
  const placement::LayerPlacement shares =
      replicated ? policy_->replica_shares(*this, all_counts) : placement::LayerPlacement{};
  std::vector<std::vector<std::int64_t>> split(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) {
    if (is_shadowed(e)) continue;
    if (!replicated) {
      split[static_cast<std::size_t>(e)] = {kept_count[static_cast<std::size_t>(e)]};
      continue;
    }
    std::vector<std::int64_t> per_source(static_cast<std::size_t>(N));
    for (int r = 0; r < N; ++r)
      per_source[static_cast<std::size_t>(r)] = all_counts[static_cast<std::size_t>(r) * E + e];
    split[static_cast<std::size_t>(e)] = locality_split(
        per_source, shares.experts[static_cast<std::size_t>(e)])[static_cast<std::size_t>(world_.rank())];
  }
  std::vector<std::int32_t> keys;
  std::vector<std::size_t> key_of;  // assignment index of each key
  std::vector<std::size_t> replica_at(static_cast<std::size_t>(E), 0);
  std::vector<std::int64_t> left(static_cast<std::size_t>(E), 0);
  for (int e = 0; e < E; ++e)
    if (!is_shadowed(e)) left[static_cast<std::size_t>(e)] = split[static_cast<std::size_t>(e)][0];
  for (std::size_t a = 0; a < nk; ++a) {
    if (!kept_[a]) continue;
    const int e = gate_.expert[a];
    int dest = world_.rank();
    if (!is_shadowed(e)) {
      auto& r = replica_at[static_cast<std::size_t>(e)];
      while (left[static_cast<std::size_t>(e)] == 0)
        left[static_cast<std::size_t>(e)] = split[static_cast<std::size_t>(e)][++r];
      --left[static_cast<std::size_t>(e)];
      dest = placement_.experts[static_cast<std::size_t>(e)][r].rank;
    }
    keys.push_back(dest * E + e);
    key_of.push_back(a);
  }
  const int bins = N * E;
  std::vector<std::int64_t> block(static_cast<std::size_t>(bins)), offsets(static_cast<std::size_t>(bins));
  km::histogram(Device::Host, keys.data(), static_cast<std::int64_t>(keys.size()), bins, block.data());
  const std::int64_t padded = policy_->pad(*this, block);
  std::vector<double> totals = {static_cast<double>(nk - keys.size()), static_cast<double>(padded)};
  world_.allreduce(comm::view(totals), comm::ReduceOp::Sum);
  dropped_ = std::llround(totals[0]);
  padded_ = std::llround(totals[1]);
  km::exclusive_scan(Device::Host, block.data(), bins, offsets.data());
  std::vector<std::int64_t> pos(keys.size());
  km::stable_positions(Device::Host, keys.data(), static_cast<std::int64_t>(keys.size()), bins, offsets.data(),
                       pos.data());
  pos_.assign(nk, -1);
  for (std::size_t i = 0; i < keys.size(); ++i) pos_[key_of[i]] = pos[i];
  send_rows_.assign(static_cast<std::size_t>(N), 0);
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e)
      send_rows_[static_cast<std::size_t>(r)] += static_cast<std::size_t>(block[static_cast<std::size_t>(r * E + e)]);
  recv_expert_rows_.assign(static_cast<std::size_t>(bins), 0);
  world_.alltoall(comm::view(block), comm::view(recv_expert_rows_));
  recv_rows_.assign(static_cast<std::size_t>(N), 0);
  std::vector<std::int64_t> per_expert(static_cast<std::size_t>(E), 0);
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e) {
      recv_rows_[static_cast<std::size_t>(r)] +=
          static_cast<std::size_t>(recv_expert_rows_[static_cast<std::size_t>(r * E + e)]);
      per_expert[static_cast<std::size_t>(e)] += recv_expert_rows_[static_cast<std::size_t>(r * E + e)];
    }
  // Received rows arrive grouped by (source, expert); regroup them expert-contiguously.
  local_experts_.clear();
  std::vector<std::int32_t> local_index(static_cast<std::size_t>(E), -1);
  for (int e = 0; e < E; ++e)
    if (per_expert[static_cast<std::size_t>(e)] > 0) {
      local_index[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(local_experts_.size());
      local_experts_.push_back(e);
    }
  const int L = static_cast<int>(local_experts_.size());
  std::vector<std::int32_t> recv_keys;
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e)
      recv_keys.insert(recv_keys.end(),
                       static_cast<std::size_t>(recv_expert_rows_[static_cast<std::size_t>(r * E + e)]),
                       local_index[static_cast<std::size_t>(e)]);
  std::vector<std::int64_t> local_counts(static_cast<std::size_t>(L));
  local_offset_.assign(static_cast<std::size_t>(L) + 1, 0);
  km::histogram(Device::Host, recv_keys.data(), static_cast<std::int64_t>(recv_keys.size()), L, local_counts.data());
  km::exclusive_scan(Device::Host, local_counts.data(), L, local_offset_.data());
  local_offset_[static_cast<std::size_t>(L)] = static_cast<std::int64_t>(recv_keys.size());
  local_pos_.assign(recv_keys.size(), 0);
  km::stable_positions(Device::Host, recv_keys.data(), static_cast<std::int64_t>(recv_keys.size()), L,
                       local_offset_.data(), local_pos_.data());
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
  const std::size_t send_total = std::accumulate(send_rows_.begin(), send_rows_.end(), std::size_t{0});
  const std::size_t recv_total = std::accumulate(recv_rows_.begin(), recv_rows_.end(), std::size_t{0});
  std::vector<T> send(send_total * D, T(0)), recv(recv_total * D);
  for (std::size_t a = 0; a < pos_.size(); ++a)
    if (pos_[a] >= 0) std::copy(x + (a / k) * D, x + (a / k + 1) * D, send.data() + pos_[a] * D);
  times_.dispatch += timer.seconds();
  // Dispatch and combine, forward and backward: each rank sends its send rows twice and its
  // received rows back twice.
  times_.alltoall_bytes +=
      2.0 * sizeof(T) * (sent_elements(send_rows_, world_.rank(), D) + sent_elements(recv_rows_, world_.rank(), D));
  xe_.assign(recv_total * D, T(0));
  hpre_.assign(recv_total * F, T(0));
  h_.assign(recv_total * F, T(0));
  std::vector<T> ye(recv_total * D);
  back_.assign(send_total * D, T(0));
  if (opt_.schedule_chunks > 0) {
    forward_pipelined(send, recv, ye);
  } else {
    timer.reset();
    world_.alltoallv(comm::view(send), times_width(send_rows_, D), comm::view(recv), times_width(recv_rows_, D));
    times_.alltoall += timer.seconds();
    timer.reset();
    const double cpu = thread_cpu_seconds();
    scatter_rows_at(recv.data(), local_pos_.data(), recv_total, D, xe_.data());
    for (std::size_t i = 0; i < local_experts_.size(); ++i) {
      const std::int64_t o = local_offset_[i], rows = local_offset_[i + 1] - o;
      expert_forward(local_experts_[i], static_cast<int>(rows), xe_.data() + o * D, hpre_.data() + o * F,
                     h_.data() + o * F, ye.data() + o * D);
    }
    gather_rows_from(ye.data(), local_pos_.data(), recv_total, D, recv.data());
    times_.expert += timer.seconds();
    times_.expert_cpu += thread_cpu_seconds() - cpu;
    timer.reset();
    world_.alltoallv(comm::view(recv), times_width(recv_rows_, D), comm::view(back_), times_width(send_rows_, D));
    times_.alltoall += timer.seconds();
  }
  timer.reset();
  std::fill(y, y + static_cast<std::size_t>(n) * D, T(0));
  for (std::size_t a = 0; a < pos_.size(); ++a)
    if (pos_[a] >= 0) {
      const T w = gate_.weight[a];
      const T* src = back_.data() + pos_[a] * D;
      T* dst = y + (a / k) * D;
      for (int c = 0; c < D; ++c) dst[c] += w * src[c];
    }
  times_.combine += timer.seconds();
}

template <class T>
void MoeLayer<T>::backward(const T* dy, const T* wg, T* dx, T* dwg) {
  const int D = opt_.d_model, k = opt_.gate.top_k;
  Timer timer;
  const std::size_t send_total = back_.size() / D, recv_total = xe_.size() / D;
  std::vector<T> dsend(send_total * D, T(0));
  std::vector<T> dweight(pos_.size(), T(0));
  for (std::size_t a = 0; a < pos_.size(); ++a)
    if (pos_[a] >= 0) {
      const T* g = dy + (a / k) * D;
      const T* out = back_.data() + pos_[a] * D;
      T* d = dsend.data() + pos_[a] * D;
      double dot = 0;
      for (int c = 0; c < D; ++c) {
        dot += g[c] * out[c];
        d[c] = gate_.weight[a] * g[c];
      }
      dweight[a] = static_cast<T>(dot);
    }
  times_.combine += timer.seconds();
  const int F = opt_.d_ff;
  std::vector<T> dback(send_total * D), dye(recv_total * D), dhpre(recv_total * F);
  if (opt_.schedule_chunks > 0) {
    backward_pipelined(dsend, dback, dye, dhpre);
  } else {
    std::vector<T> drecv(recv_total * D);
    timer.reset();
    world_.alltoallv(comm::view(dsend), times_width(send_rows_, D), comm::view(drecv), times_width(recv_rows_, D));
    times_.alltoall += timer.seconds();
    timer.reset();
    const double cpu = thread_cpu_seconds();
    std::vector<T> dxe(recv_total * D);
    scatter_rows_at(drecv.data(), local_pos_.data(), recv_total, D, dye.data());
    for (std::size_t i = 0; i < local_experts_.size(); ++i) {
      const std::int64_t o = local_offset_[i];
      const int e = local_experts_[i], rows = static_cast<int>(local_offset_[i + 1] - o);
      expert_backward_rows(e, rows, hpre_.data() + o * F, dye.data() + o * D, dhpre.data() + o * F, dxe.data() + o * D);
      expert_weight_grads(e, rows, xe_.data() + o * D, h_.data() + o * F, dye.data() + o * D, dhpre.data() + o * F);
    }
    gather_rows_from(dxe.data(), local_pos_.data(), recv_total, D, drecv.data());
    times_.expert += timer.seconds();
    times_.expert_cpu += thread_cpu_seconds() - cpu;
    timer.reset();
    world_.alltoallv(comm::view(drecv), times_width(recv_rows_, D), comm::view(dback), times_width(send_rows_, D));
    times_.alltoall += timer.seconds();
  }
  timer.reset();
  gate_backward<T>(opt_.gate, gate_, wg, dweight.data(), dx, dwg);
  for (std::size_t a = 0; a < pos_.size(); ++a)
    if (pos_[a] >= 0) {
      const T* src = dback.data() + pos_[a] * D;
      T* dst = dx + (a / k) * D;
      for (int c = 0; c < D; ++c) dst[c] += src[c];
    }
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
