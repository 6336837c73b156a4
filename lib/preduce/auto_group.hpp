// preduce.group_size = 0 (auto): the partial-reduce group size P chosen by a stated rule from the
// workers' step times measured in a warm-up window (preduce.auto_warmup_steps steps before
// training: the MPI run times each rank's compute plus injected delay; the simulator takes the
// same virtual step times its clock would) and the cost of a group's communication.
//
// 1. The largest P worth considering (fast_group_size): m_i = median step time of worker i over
//    the window, m = median of the m_i (the typical worker); worker i is persistently slow when
//    m_i > preduce.auto_slow_ratio * m. With F workers not slow, P <= clamp(F, 2,
//    preduce.auto_max_group) (and at most the workers): a group closes when its P-th member is
//    ready, so a P that needs a persistently slow worker waits for it every time. Medians, not
//    means: a heavy-tail spike is transient and must not mark a worker slow.
// 2. Among P = 2 .. that bound, the one that removes the most of a worker's deviation from the
//    mean model per second (ties: the smaller P). Averaging with P - 1 others leaves 1/P of the
//    deviation (independent deviations; the keep_own rule keeps 1/P of its own model), so a
//    group removes 1 - 1/P of it. A member's group round trip is R(P) = (P - 1) / (2 L) (the mean
//    wait for the P - 1 others, arrivals at L = sum_i 1/m_i per second) + C(P) (GroupCost: the
//    controller, latency hops and the transfer). A worker's cycle is m + R(P): a blocking worker
//    waits R(P) for its group; an overlapped one (preduce.overlap) computes meanwhile, but the
//    average it takes in is R(P) old, so its mixing lags by as much (with max(m, R) instead, the
//    development skews' overlapped runs chose P = 11-16, slower than P = 4 or 8: results/preduce/autop).
//    P = argmax (1 - 1/P) / (m + R(P)). A larger P removes more per group but waits longer for
//    its members and pays more hops: many workers (short waits) and cheap groups favour a larger P.
#pragma once
#include <vector>

#include "lib/preduce/hetero.hpp"
#include "lib/preduce/options.hpp"
#include "lib/preduce/worker.hpp"
#include "mpi/process_group.hpp"

namespace skew::preduce {

// The cost of one group's communication, beside the workers' step times.
struct GroupCost {
  double controller_s = 0.0;  // controller round trip per group
  double latency_s = 0.0;     // per hop
  double transfer_s = 0.0;    // the model's bytes over the link once
  bool linear_hops = false;   // k - 1 hops (a ring) rather than ceil(log2 k) (recursive doubling)
  // Seconds for a group of `members`: controller + hops * latency + 2 (k - 1) / k * transfer.
  double of(int members) const;
};

// step_times[w]: worker w's measured step times (seconds), at least one each. Rule step 1.
int fast_group_size(const std::vector<std::vector<double>>& step_times, double slow_ratio, int max_group);
// Rule steps 1 and 2.
int auto_group_size(const std::vector<std::vector<double>>& step_times, double slow_ratio, int max_group,
                    const GroupCost& cost);

// The simulator's virtual time of one step of a worker: sim.compute_ms plus its injected
// heterogeneity plus sim.overhead_ms (its clock and its warm-up both use this).
double simulated_step_s(const TrainOptions& opt, const Hetero& hetero, std::int64_t step);

// The simulator's warm-up, for a mode with auto_group_size(): opt with group_size set by the rule
// (its GroupCost from sim.* and the model's `model_floats`); `warmup_s` gets the window's virtual
// duration (its slowest worker's).
TrainOptions resolve_simulated_group_size(const TrainOptions& opt, std::size_t model_floats, double& warmup_s);

// The MPI run's warm-up, collective over `world`: every worker (`me`; null on a dedicated
// controller rank) times preduce.auto_warmup_steps steps (compute and injected delay, no update),
// then all ranks time one all-reduce of a model-sized buffer (its time t_N, taken as all transfer:
// GroupCost::transfer_s = t_N N / (2 (N - 1)), so C(N) = t_N and smaller groups cost less); the
// times are gathered and every rank applies the rule; `warmup_s` gets the window's time.
int measured_group_size(comm::ProcessGroup& world, Worker* me, const TrainOptions& opt, double& warmup_s);

}  // namespace skew::preduce
