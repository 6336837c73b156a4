// MoeLayer's routing (moe_layer.hpp): where every kept assignment goes, (rank, expert) block
// and row, decided on the layer's device from the gate's choices, with only per-expert and
// per-block counts on the host.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_route.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/policies/policy.hpp"

namespace skew::moe {

namespace km = kernels::moe;

namespace {
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

// The replica split: each expert's tokens over all ranks go to its replicas by the placement
// shares (the policy's this step), each rank's own replica taking its local tokens first
// (locality_split); into replica_end_ and replica_rank_ ([E, R]). Returns R, the most replicas
// of one expert.
template <class T>
int MoeLayer<T>::split_replicas(const std::vector<std::int64_t>& kept_count) {
  const int E = opt_.gate.num_experts, N = world_.size();
  bool replicated = false;
  for (int e = 0; e < E; ++e) replicated = replicated || placement_.experts[static_cast<std::size_t>(e)].size() >= 2;
  std::vector<std::int64_t> all_counts(static_cast<std::size_t>(N) * E);
  if (replicated) world_.allgather(comm::cview(kept_count), comm::view(all_counts));
  // The policy decides how each replicated expert's tokens split among its replicas this step.
  const placement::LayerPlacement shares =
      replicated ? policy_->replica_shares(*this, all_counts) : placement::LayerPlacement{};
  std::vector<std::vector<std::int64_t>> split(static_cast<std::size_t>(E));
  std::size_t replicas = 1;
  for (int e = 0; e < E; ++e) {
    if (policy_->computed_where_routed(*this, e)) continue;
    if (!replicated) {
      split[static_cast<std::size_t>(e)] = {kept_count[static_cast<std::size_t>(e)]};
      continue;
    }
    std::vector<std::int64_t> per_source(static_cast<std::size_t>(N));
    for (int r = 0; r < N; ++r)
      per_source[static_cast<std::size_t>(r)] = all_counts[static_cast<std::size_t>(r) * E + e];
    split[static_cast<std::size_t>(e)] = locality_split(
        per_source, shares.experts[static_cast<std::size_t>(e)])[static_cast<std::size_t>(world_.rank())];
    replicas = std::max(replicas, split[static_cast<std::size_t>(e)].size());
  }
  // Expert e's j-th kept assignment goes to its first replica r with j < replica_end[e][r]
  // (cumulative split); an expert the policy has computed where routed: all to this rank.
  const auto R = static_cast<std::size_t>(replicas);
  std::vector<std::int64_t> replica_end(static_cast<std::size_t>(E) * R, std::numeric_limits<std::int64_t>::max());
  std::vector<std::int32_t> replica_rank(static_cast<std::size_t>(E) * R, world_.rank());
  for (int e = 0; e < E; ++e) {
    std::int64_t end = 0;
    const auto& parts = split[static_cast<std::size_t>(e)];
    for (std::size_t r = 0; r < parts.size(); ++r) {
      end += parts[r];
      replica_end[static_cast<std::size_t>(e) * R + r] = end;
      replica_rank[static_cast<std::size_t>(e) * R + r] = placement_.experts[static_cast<std::size_t>(e)][r].rank;
    }
  }
  replica_end_.assign_from(replica_end);
  replica_rank_.assign_from(replica_rank);
  return static_cast<int>(R);
}

// Exchanges the per-block row counts (`block`: what this rank sends) and regroups the rows it
// will receive, grouped by (source, expert), expert-contiguously: local_experts_, local_offset_
// and each received row's position (local_pos_).
template <class T>
void MoeLayer<T>::regroup_received(const std::vector<std::int64_t>& block) {
  const int E = opt_.gate.num_experts, N = world_.size(), bins = N * E;
  const Device device = opt_.device;
  recv_expert_rows_.assign(static_cast<std::size_t>(bins), 0);
  world_.alltoall(comm::cview(block), comm::view(recv_expert_rows_));
  recv_rows_.assign(static_cast<std::size_t>(N), 0);
  std::vector<std::int64_t> per_expert(static_cast<std::size_t>(E), 0);
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e) {
      recv_rows_[static_cast<std::size_t>(r)] +=
          static_cast<std::size_t>(recv_expert_rows_[static_cast<std::size_t>(r * E + e)]);
      per_expert[static_cast<std::size_t>(e)] += recv_expert_rows_[static_cast<std::size_t>(r * E + e)];
    }
  // Received rows arrive grouped by (source, expert); regroup them expert-contiguously: each
  // (source, expert) block's first row goes after the expert's rows from lower sources.
  local_experts_.clear();
  local_offset_.assign(1, 0);
  std::vector<std::int64_t> expert_begin(static_cast<std::size_t>(E), 0);
  for (int e = 0; e < E; ++e)
    if (per_expert[static_cast<std::size_t>(e)] > 0) {
      expert_begin[static_cast<std::size_t>(e)] = local_offset_.back();
      local_experts_.push_back(e);
      local_offset_.push_back(local_offset_.back() + per_expert[static_cast<std::size_t>(e)]);
    }
  std::vector<std::int64_t> block_begin(static_cast<std::size_t>(bins) + 1, 0),
      block_target(static_cast<std::size_t>(bins));
  for (int b = 0; b < bins; ++b) {
    const auto e = static_cast<std::size_t>(b % E);
    block_target[static_cast<std::size_t>(b)] = expert_begin[e];
    expert_begin[e] += recv_expert_rows_[static_cast<std::size_t>(b)];
    block_begin[static_cast<std::size_t>(b) + 1] =
        block_begin[static_cast<std::size_t>(b)] + recv_expert_rows_[static_cast<std::size_t>(b)];
  }
  block_begin_.assign_from(block_begin);
  block_target_.assign_from(block_target);
  local_pos_.resize(static_cast<std::size_t>(block_begin.back()));
  km::local_positions(device, block_begin.back(), bins, block_begin_.data(), block_target_.data(), local_pos_.data());
}

// Decides the destination (rank, expert) block of every kept assignment and its row there, on
// the layer's device; the per-block counts come to the host (the policy's padding, the exchange
// sizes) and the receive side's regrouping is computed there from counts alone.
template <class T>
void MoeLayer<T>::route() {
  const int E = opt_.gate.num_experts, k = opt_.gate.top_k, N = world_.size();
  const Device device = opt_.device;
  const std::size_t nk = static_cast<std::size_t>(n_) * k;
  const auto nk64 = static_cast<std::int64_t>(nk);
  kept_flags_.assign_from(std::vector<std::uint8_t>(kept_.begin(), kept_.end()));
  // Kept assignments per expert (bin E: the dropped ones), and each one's rank among its expert's.
  keys_.resize(nk);
  km::choice_keys(device, nk64, E, gate_.expert.data(), kept_flags_.data(), keys_.data());
  counts_.resize(static_cast<std::size_t>(E) + 1);
  km::histogram(device, keys_.data(), nk64, E + 1, counts_.data());
  std::vector<std::int64_t> kept_count = counts_.host_copy();
  kept_count.resize(static_cast<std::size_t>(E));
  offsets_.zeros(static_cast<std::size_t>(E) + 1);
  order_.resize(nk);
  km::stable_positions(device, keys_.data(), nk64, E + 1, offsets_.data(), order_.data());
  const int R = split_replicas(kept_count);
  const int bins = N * E;
  km::dispatch_keys(device, nk64, E, R, gate_.expert.data(), kept_flags_.data(), order_.data(), replica_end_.data(),
                    replica_rank_.data(), bins, keys_.data());
  counts_.resize(static_cast<std::size_t>(bins) + 1);
  km::histogram(device, keys_.data(), nk64, bins + 1, counts_.data());
  std::vector<std::int64_t> block = counts_.host_copy();
  const std::int64_t dropped = block[static_cast<std::size_t>(bins)];
  block.resize(static_cast<std::size_t>(bins));
  const std::int64_t padded = policy_->pad(*this, block);
  std::vector<double> totals = {static_cast<double>(dropped), static_cast<double>(padded)};
  world_.allreduce(comm::view(totals), comm::ReduceOp::Sum);
  dropped_ = std::llround(totals[0]);
  padded_ = std::llround(totals[1]);
  // Block offsets with the policy's padding; the dropped assignments' bin starts past the last row.
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(bins) + 1);
  km::exclusive_scan(Device::Host, block.data(), bins, offsets.data());
  offsets[static_cast<std::size_t>(bins)] = offsets[static_cast<std::size_t>(bins) - 1] + block.back();
  offsets_.assign_from(offsets);
  pos_.resize(nk);
  km::stable_positions(device, keys_.data(), nk64, bins + 1, offsets_.data(), pos_.data());
  send_rows_.assign(static_cast<std::size_t>(N), 0);
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e)
      send_rows_[static_cast<std::size_t>(r)] += static_cast<std::size_t>(block[static_cast<std::size_t>(r * E + e)]);
  regroup_received(block);
}

template void MoeLayer<float>::route();
template void MoeLayer<double>::route();
template int MoeLayer<float>::split_replicas(const std::vector<std::int64_t>&);
template int MoeLayer<double>::split_replicas(const std::vector<std::int64_t>&);
template void MoeLayer<float>::regroup_received(const std::vector<std::int64_t>&);
template void MoeLayer<double>::regroup_received(const std::vector<std::int64_t>&);

}  // namespace skew::moe
