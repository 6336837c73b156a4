// FlexMoE's cost model: the predicted time of one MoE layer's expert work under a placement,
// and the one-off cost of changing placement. All times in seconds, per training step (forward
// and backward). Tokens are assumed to come from every rank in equal parts (each rank runs the
// same micro-batch size) and are split among an expert's replicas as the dispatch does
// (locality first: a replica's target is its share of the expert's tokens, it takes its own
// rank's tokens first, and the rest cross ranks in source order).
#pragma once
#include <cstdint>
#include <vector>

#include "core/metrics.hpp"
#include "core/tensor.hpp"
#include "lib/placement/placement.hpp"

namespace skew::comm {
class ProcessGroup;
}

namespace skew::placement {

struct CostConstants {
  double gemm_flops = 1e12;           // one rank's expert rate, FLOP/s at flops_per_token() a token
  double nvlink_bandwidth = 100e9;    // bytes/s a rank sends (or receives) inside its node (NVLink)
  double alltoall_bandwidth = 10e9;   // bytes/s a rank sends (or receives) to other nodes (network)
  double allreduce_bandwidth = 10e9;  // bus bytes/s of a gradient all-reduce spanning nodes
  int gpus_per_node = 8;              // ranks r and q share a node when r / G == q / G
  double alltoall_latency = 0;        // fixed seconds per all-to-all round (start-up, synchronisation)
  // Seconds each further pipeline stage adds to an all-to-all round: split into S stages, a round
  // pays alltoall_latency + (S - 1) x stage_latency (every stage is an exchange of its own).
  double stage_latency = 0;
};

// How a step's all-to-all meets its expert compute, the same for every policy and the ideal:
//   None       one after the other: compute + all-to-all
//   Pipelined  both split in `stages` stages overlapping one another (Tutel's pipelined
//              all-to-all, FasterMoE's smart schedule): max(c, a) + min(c, a) / stages, where
//              every round of a pays (stages - 1) x stage_latency more
enum class Overlap { None, Pipelined };
struct ExchangeSchedule {
  Overlap overlap = Overlap::None;
  int stages = 1;
};
const char* overlap_name(Overlap overlap);

// The expert being placed: its size drives compute, activation traffic and state movement.
struct ExpertShape {
  std::int64_t params = 0;         // parameters of one expert
  int hidden_dim = 0;              // width of a token's activation
  int activation_bytes = 4;        // bytes per activation element on the wire
  int grad_bytes_per_param = 4;    // gradient element size in the replica all-reduce
  int state_bytes_per_param = 12;  // parameter + optimiser moments moved with a replica
  // Where the experts run: measure_constants times their GEMM there (not wherever a GPU is visible).
  Device device = Device::Host;
};

// Tokens one rank sends and receives in one all-to-all round, by link: inside its node or across.
struct RankTraffic {
  double send_intra = 0, send_inter = 0, recv_intra = 0, recv_inter = 0;
};

// A rank's replica all-reduces follow its own expert compute (they overlap other ranks'
// compute), so the critical path is the busiest rank's compute + sync, plus the all-to-all.
// Under a pipelined schedule the busiest compute overlaps the all-to-all; the sync the busiest
// rank adds on top of its compute (busiest - compute) stays exposed.
struct StepCost {
  double compute = 0;  // max over ranks of expert compute
  double sync = 0;     // max over ranks of replica gradient all-reduce
  double busiest = 0;  // max over ranks of compute + sync
  double alltoall = 0;
  double step = 0;  // the whole under the model's schedule; None: busiest + alltoall
  double total() const { return step; }
};

class CostModel {
 public:
  CostModel(CostConstants constants, ExpertShape shape, ExchangeSchedule schedule = {});
  const CostConstants& constants() const { return c_; }
  const ExpertShape& shape() const { return s_; }
  const ExchangeSchedule& schedule() const { return schedule_; }

  // Expert compute and all-to-all (alltoall_traffic_seconds: traffic and one latency a round)
  // of a step on `ranks` ranks under `schedule`.
  double scheduled_seconds(double compute, double alltoall, int ranks, const ExchangeSchedule& schedule) const;
  double scheduled_seconds(double compute, double alltoall, int ranks) const {
    return scheduled_seconds(compute, alltoall, ranks, schedule_);
  }

  // Forward + backward FLOPs of one token through one expert: 2 per parameter forward, 4 back.
  double flops_per_token() const { return 6.0 * static_cast<double>(s_.params); }
  double compute_seconds(double tokens) const;
  // Four all-to-all rounds per step (dispatch, combine, and both again in backward); each
  // round lasts alltoall_latency plus as long as the busiest rank's sends or receives on its
  // slower link (a rank's intra- and inter-node transfers proceed in parallel).
  double alltoall_traffic_seconds(const std::vector<RankTraffic>& traffic) const;
  // The same for recv_tokens[r] = tokens rank r computes, arriving in equal parts from every
  // rank (its own part stays local): one replica per expert.
  double alltoall_seconds(const std::vector<double>& recv_tokens) const;
  // The traffic of dispatching `load` under `p` with the runtime's locality-first replica split
  // (lib/moe/moe_layer.cpp locality_split), each source holding load / N of every expert.
  std::vector<RankTraffic> dispatch_traffic(const LayerPlacement& p, const std::vector<double>& load) const;
  // Ring all-reduce of `bytes` among `ranks`: 2 (n-1)/n bytes at the bus bandwidth, which is
  // nvlink_bandwidth when all ranks share a node and allreduce_bandwidth otherwise.
  double allreduce_seconds(double bytes, const std::vector<int>& ranks) const;
  double expert_grad_bytes() const;
  double expert_state_bytes() const;

  // Tokens each rank computes: sum over its replicas of share x expert load.
  std::vector<double> rank_loads(const LayerPlacement& p, const std::vector<double>& load) const;
  StepCost predict(const LayerPlacement& p, const std::vector<double>& load) const;
  // Moving state to every new replica (plan_transfers): each rank sends and receives its
  // transfers serially on each link kind (transfers from one sender share its bandwidth); ranks
  // and link kinds work in parallel.
  double change_seconds(const LayerPlacement& before, const LayerPlacement& after) const;

 private:
  CostConstants c_;
  ExpertShape s_;
  ExchangeSchedule schedule_;
};

// One state transfer of the executor: the replica of `expert` new on `dst` copies `src`'s.
struct Transfer {
  int expert = 0, src = 0, dst = 0;
};
// Every new replica of `after` (a rank not holding the expert in `before`) receives from the
// before-replica at index k mod |before| where k counts the expert's new ranks in order, so
// several new replicas of one hot expert draw from different sources.
std::vector<Transfer> plan_transfers(const LayerPlacement& before, const LayerPlacement& after);

// Max rank load / mean rank load (1 when there is no load).
double balance_ratio(const std::vector<double>& rank_loads);

// The constants a policy reports in the run's summary ("cost_constants": gemm_flops,
// alltoall_bandwidth, allreduce_bandwidth, alltoall_latency).
Json cost_constants_summary(const CostConstants& c);

// Measures gemm_flops as the rate compute_seconds charges: flops_per_token() x 256 over the seconds
// of one expert's whole forward and backward over 256 tokens (ExpertStep: the six GEMMs of
// hidden x params / (2 hidden), GELU and biases, as moe_train runs its experts) on shape.device:
// fp32 on the host, bf16 operands with fp32 accumulation on cuda; throws when shape.device is
// cuda and no GPU is visible. The same per-row rate as calibration.hpp fits from measured runs;
// one forward GEMM alone runs ~1.5x faster on the host than the whole step. Also the all-to-all latency (1 float per
// peer) and bandwidth (256 KiB per peer) over `world`, each the median of several runs, and broadcasts rank 0's values
// so every rank plans identically. Values in `overrides` that are > 0 (latency: >= 0) are kept.
CostConstants measure_constants(comm::ProcessGroup& world, const CostConstants& overrides, const ExpertShape& shape);

}  // namespace skew::placement
