#include "lib/placement/cost_model.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "lib/placement/expert_step.hpp"
#include "mpi/process_group.hpp"

namespace skew::placement {

const char* overlap_name(Overlap overlap) {
  return overlap == Overlap::None ? "none" : "pipelined";
}

CostModel::CostModel(CostConstants constants, ExpertShape shape, ExchangeSchedule schedule)
    : c_(constants), s_(shape), schedule_(schedule) {
  SKEW_CHECK(c_.gemm_flops > 0 && c_.nvlink_bandwidth > 0 && c_.alltoall_bandwidth > 0 && c_.allreduce_bandwidth > 0,
             "cost model constants must be positive (gemm_flops "
                 << c_.gemm_flops << ", bandwidths " << c_.nvlink_bandwidth << ", " << c_.alltoall_bandwidth << ", "
                 << c_.allreduce_bandwidth << ")");
  SKEW_CHECK(c_.alltoall_latency >= 0 && c_.stage_latency >= 0, "all-to-all latencies must be >= 0, got "
                                                                    << c_.alltoall_latency << " a round, "
                                                                    << c_.stage_latency << " a stage");
  SKEW_CHECK(schedule_.stages >= 1, "pipeline stages must be >= 1, got " << schedule_.stages);
  SKEW_CHECK(c_.gpus_per_node >= 1, "gpus_per_node must be >= 1, got " << c_.gpus_per_node);
  SKEW_CHECK(s_.params > 0 && s_.hidden_dim > 0, "expert shape needs params > 0 and hidden_dim > 0");
}

double CostModel::compute_seconds(double tokens) const {
  return tokens * flops_per_token() / c_.gemm_flops;
}

double CostModel::scheduled_seconds(double compute, double alltoall, int ranks,
                                    const ExchangeSchedule& schedule) const {
  if (schedule.overlap == Overlap::None || ranks <= 1) return compute + alltoall;
  const double exchange = alltoall + 4.0 * (schedule.stages - 1) * c_.stage_latency;
  return std::max(compute, exchange) + std::min(compute, exchange) / schedule.stages;
}

namespace {

// Accumulates every source's equal part of single-replica experts in O(1) per expert (node
// totals with the receiver's own share taken back), and explicit transfers of replicated ones.
class TrafficBuilder {
 public:
  TrafficBuilder(int ranks, int gpus_per_node)
      : g_(gpus_per_node),
        out_(static_cast<std::size_t>(ranks)),
        node_intra_(static_cast<std::size_t>((ranks + g_ - 1) / g_), 0.0),
        node_inter_(node_intra_.size(), 0.0),
        own_(static_cast<std::size_t>(ranks), 0.0) {}
  int ranks() const { return static_cast<int>(out_.size()); }
  bool same_node(int a, int b) const { return a / g_ == b / g_; }
  int node_size(int node) const { return std::min(g_, ranks() - node * g_); }

  // Every rank but `dst` sends `part` tokens to `dst`.
  void from_all(int dst, double part) {
    const int node = dst / g_;
    auto& t = out_[static_cast<std::size_t>(dst)];
    t.recv_intra += part * (node_size(node) - 1);
    t.recv_inter += part * (ranks() - node_size(node));
    node_intra_[static_cast<std::size_t>(node)] += part;
    own_[static_cast<std::size_t>(dst)] += part;
    all_inter_ += part;
    node_inter_[static_cast<std::size_t>(node)] += part;
  }
  void transfer(int src, int dst, double tokens) {
    auto& s = out_[static_cast<std::size_t>(src)];
    auto& d = out_[static_cast<std::size_t>(dst)];
    (same_node(src, dst) ? s.send_intra : s.send_inter) += tokens;
    (same_node(src, dst) ? d.recv_intra : d.recv_inter) += tokens;
  }
  std::vector<RankTraffic> finish() {
    for (int r = 0; r < ranks(); ++r) {
      auto& t = out_[static_cast<std::size_t>(r)];
      const auto node = static_cast<std::size_t>(r / g_);
      t.send_intra += node_intra_[node] - own_[static_cast<std::size_t>(r)];
      t.send_inter += all_inter_ - node_inter_[node];
    }
    return std::move(out_);
  }

 private:
  int g_;
  std::vector<RankTraffic> out_;
  std::vector<double> node_intra_, node_inter_, own_;
  double all_inter_ = 0;
};

}  // namespace

double CostModel::alltoall_traffic_seconds(const std::vector<RankTraffic>& traffic) const {
  if (traffic.size() <= 1) return 0.0;
  const double token_bytes = static_cast<double>(s_.hidden_dim) * s_.activation_bytes;
  double round = 0;
  for (const auto& t : traffic)
    round = std::max(
        {round, t.send_intra * token_bytes / c_.nvlink_bandwidth, t.send_inter * token_bytes / c_.alltoall_bandwidth,
         t.recv_intra * token_bytes / c_.nvlink_bandwidth, t.recv_inter * token_bytes / c_.alltoall_bandwidth});
  return 4.0 * (round + c_.alltoall_latency);
}

double CostModel::alltoall_seconds(const std::vector<double>& recv_tokens) const {
  const int n = static_cast<int>(recv_tokens.size());
  if (n <= 1) return 0.0;
  TrafficBuilder b(n, c_.gpus_per_node);
  for (int r = 0; r < n; ++r) b.from_all(r, recv_tokens[static_cast<std::size_t>(r)] / n);
  return alltoall_traffic_seconds(b.finish());
}

std::vector<RankTraffic> CostModel::dispatch_traffic(const LayerPlacement& p, const std::vector<double>& load) const {
  SKEW_CHECK(load.size() == p.experts.size(), "load has " << load.size() << " experts, placement " << p.num_experts());
  const int n = p.world_size;
  TrafficBuilder b(n, c_.gpus_per_node);
  std::vector<double> left(static_cast<std::size_t>(n)), room;
  for (std::size_t e = 0; e < p.experts.size(); ++e) {
    const auto& reps = p.experts[e];
    const double part = load[e] / n;
    if (reps.size() == 1) {
      b.from_all(reps[0].rank, part);
      continue;
    }
    // locality_split on real numbers: each replica keeps its own rank's part up to its target,
    // then the remaining parts fill the remaining room, sources and replicas in order.
    std::fill(left.begin(), left.end(), part);
    room.clear();
    for (const auto& r : reps) {
      const double local = std::min(part, r.share * load[e]);
      left[static_cast<std::size_t>(r.rank)] -= local;
      room.push_back(r.share * load[e] - local);
    }
    const double eps = 1e-12 * std::max(1.0, load[e]);
    std::size_t i = 0;
    for (int src = 0; src < n; ++src) {
      double& l = left[static_cast<std::size_t>(src)];
      while (l > eps && i < reps.size()) {
        const double moved = std::min(l, room[i]);
        if (moved > 0) b.transfer(src, reps[i].rank, moved);
        l -= moved, room[i] -= moved;
        if (room[i] <= eps) ++i;
      }
    }
  }
  return b.finish();
}

double CostModel::allreduce_seconds(double bytes, const std::vector<int>& ranks) const {
  const auto n = static_cast<double>(ranks.size());
  if (ranks.size() <= 1) return 0.0;
  bool one_node = true;
  for (int r : ranks) one_node = one_node && r / c_.gpus_per_node == ranks.front() / c_.gpus_per_node;
  return 2.0 * (n - 1) / n * bytes / (one_node ? c_.nvlink_bandwidth : c_.allreduce_bandwidth);
}

double CostModel::expert_grad_bytes() const {
  return static_cast<double>(s_.params) * s_.grad_bytes_per_param;
}
double CostModel::expert_state_bytes() const {
  return static_cast<double>(s_.params) * s_.state_bytes_per_param;
}

std::vector<double> CostModel::rank_loads(const LayerPlacement& p, const std::vector<double>& load) const {
  SKEW_CHECK(load.size() == p.experts.size(), "load has " << load.size() << " experts, placement " << p.num_experts());
  std::vector<double> out(static_cast<std::size_t>(p.world_size), 0.0);
  for (std::size_t e = 0; e < p.experts.size(); ++e)
    for (const auto& r : p.experts[e]) out[static_cast<std::size_t>(r.rank)] += r.share * load[e];
  return out;
}

StepCost CostModel::predict(const LayerPlacement& p, const std::vector<double>& load) const {
  const auto loads = rank_loads(p, load);
  StepCost cost;
  cost.compute = compute_seconds(*std::max_element(loads.begin(), loads.end()));
  cost.alltoall = alltoall_traffic_seconds(dispatch_traffic(p, load));
  std::vector<double> sync(loads.size(), 0.0);
  for (const auto& reps : p.experts) {
    if (reps.size() <= 1) continue;
    std::vector<int> ranks;
    for (const auto& r : reps) ranks.push_back(r.rank);
    const double t = allreduce_seconds(expert_grad_bytes(), ranks);
    for (int r : ranks) sync[static_cast<std::size_t>(r)] += t;
  }
  cost.sync = *std::max_element(sync.begin(), sync.end());
  for (std::size_t r = 0; r < loads.size(); ++r)
    cost.busiest = std::max(cost.busiest, compute_seconds(loads[r]) + sync[r]);
  cost.step = schedule_.overlap == Overlap::None
                  ? cost.busiest + cost.alltoall
                  : scheduled_seconds(cost.compute, cost.alltoall, p.world_size) + (cost.busiest - cost.compute);
  return cost;
}

double CostModel::change_seconds(const LayerPlacement& before, const LayerPlacement& after) const {
  // Every rank's send and receive side of each link kind carries its transfers one after the
  // other (concurrent ones share its bandwidth); the two kinds and the ranks run in parallel.
  std::vector<RankTraffic> bytes(static_cast<std::size_t>(after.world_size));
  for (const auto& t : plan_transfers(before, after)) {
    const bool intra = t.src / c_.gpus_per_node == t.dst / c_.gpus_per_node;
    auto& src = bytes[static_cast<std::size_t>(t.src)];
    auto& dst = bytes[static_cast<std::size_t>(t.dst)];
    (intra ? src.send_intra : src.send_inter) += expert_state_bytes();
    (intra ? dst.recv_intra : dst.recv_inter) += expert_state_bytes();
  }
  double seconds = 0;
  for (const auto& b : bytes)
    seconds = std::max({seconds, b.send_intra / c_.nvlink_bandwidth, b.recv_intra / c_.nvlink_bandwidth,
                        b.send_inter / c_.alltoall_bandwidth, b.recv_inter / c_.alltoall_bandwidth});
  return seconds;
}

std::vector<Transfer> plan_transfers(const LayerPlacement& before, const LayerPlacement& after) {
  SKEW_CHECK(before.num_experts() == after.num_experts() && before.world_size == after.world_size,
             "placements differ in shape: " << before.num_experts() << " experts on " << before.world_size
                                            << " ranks vs " << after.num_experts() << " on " << after.world_size);
  std::vector<Transfer> out;
  for (int e = 0; e < after.num_experts(); ++e) {
    const auto& old_reps = before.experts[static_cast<std::size_t>(e)];
    SKEW_CHECK(!old_reps.empty(), "expert " << e << " has no replica to copy from");
    std::size_t k = 0;
    for (const auto& r : after.experts[static_cast<std::size_t>(e)]) {
      const bool held =
          std::any_of(old_reps.begin(), old_reps.end(), [&](const Replica& o) { return o.rank == r.rank; });
      if (!held) out.push_back({e, old_reps[k++ % old_reps.size()].rank, r.rank});
    }
  }
  return out;
}

double balance_ratio(const std::vector<double>& rank_loads) {
  if (rank_loads.empty()) return 1.0;
  const double total = std::accumulate(rank_loads.begin(), rank_loads.end(), 0.0);
  if (total <= 0) return 1.0;
  return *std::max_element(rank_loads.begin(), rank_loads.end()) / (total / static_cast<double>(rank_loads.size()));
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The rate the cost model charges expert compute at: flops_per_token() x tokens over the measured
// seconds of an expert's whole forward and backward over 256 tokens (ExpertStep: six GEMMs, GELU,
// biases), on shape.device as the experts run there. The ffn width is params / (2 hidden).
double measure_expert_flops(const ExpertShape& expert) {
  constexpr int rows = 256;
  const int hidden = std::max(1, expert.hidden_dim);
  const int ffn = static_cast<int>(std::max<std::int64_t>(1, expert.params / (2 * hidden)));
  const Device device = expert.device;
  SKEW_CHECK(device == Device::Host || cuda_device_count() > 0,
             "cost model: the experts run on " << device_name(device) << " but no CUDA device is visible to time them");
  ExpertStep step(rows, hidden, ffn, device, 7);
  step.run();  // warm-up
  step.wait();
  constexpr int reps = 4;
  std::vector<double> seconds;
  for (int trial = 0; trial < 5; ++trial) {
    Timer timer;
    for (int i = 0; i < reps; ++i) step.run();
    step.wait();
    seconds.push_back(timer.seconds() / reps);
  }
  const double flops_per_token = CostModel(CostConstants{}, expert).flops_per_token();
  return flops_per_token * rows / std::max(median(seconds), 1e-12);
}

// Median seconds of an all-to-all sending `per_peer` floats to every rank, from buffers on
// `device` (the experts' activations travel from there: device buffers take a hybrid group's
// NCCL half).
double time_alltoall(comm::ProcessGroup& world, std::size_t per_peer, Device device) {
  const auto count = static_cast<std::int64_t>(per_peer) * world.size();
  Tensor send = Tensor::from_vector(std::vector<float>(static_cast<std::size_t>(count), 1.0f), {count}).to(device);
  Tensor recv = Tensor::zeros({count}, DType::F32, device);
  world.alltoall(comm::view(send), comm::view(recv));  // warm-up
  std::vector<double> seconds;
  for (int trial = 0; trial < 7; ++trial) {
    world.barrier();
    Timer timer;
    world.alltoall(comm::view(send), comm::view(recv));
    seconds.push_back(timer.seconds());
  }
  return median(seconds);
}

}  // namespace

CostConstants measure_constants(comm::ProcessGroup& world, const CostConstants& overrides, const ExpertShape& shape) {
  CostConstants c = overrides;
  std::vector<double> measured{c.gemm_flops, c.alltoall_bandwidth, c.nvlink_bandwidth, c.allreduce_bandwidth,
                               c.alltoall_latency};
  if (measured[0] <= 0) measured[0] = measure_expert_flops(shape);
  const bool need_bw = measured[1] <= 0 || measured[2] <= 0 || measured[3] <= 0;
  // Every rank takes the same branches: the overrides come from the same config everywhere.
  double latency = 0, bandwidth = 10e9;
  if (world.size() > 1 && (need_bw || measured[4] < 0)) {
    latency = time_alltoall(world, 1, shape.device);
    constexpr std::size_t per_peer = 1 << 16;  // 256 KiB to each peer
    const double bytes = static_cast<double>(per_peer * sizeof(float)) * (world.size() - 1);
    // On a busy machine the small message can take nearly as long as the large one; the
    // bandwidth term then keeps at least a tenth of the large message's time.
    const double large = time_alltoall(world, per_peer, shape.device);
    bandwidth = bytes / std::max(large - latency, 0.1 * large);
  }
  for (std::size_t i = 1; i < 4; ++i)
    if (measured[i] <= 0) measured[i] = bandwidth;
  if (measured[4] < 0) measured[4] = latency;
  world.broadcast(comm::view(measured), 0);
  c.gemm_flops = measured[0];
  c.alltoall_bandwidth = measured[1];
  c.nvlink_bandwidth = measured[2];
  c.allreduce_bandwidth = measured[3];
  c.alltoall_latency = measured[4];
  return c;
}

Json cost_constants_summary(const CostConstants& c) {
  return {{"gemm_flops", c.gemm_flops},
          {"alltoall_bandwidth", c.alltoall_bandwidth},
          {"allreduce_bandwidth", c.allreduce_bandwidth},
          {"alltoall_latency", c.alltoall_latency}};
}

}  // namespace skew::placement
