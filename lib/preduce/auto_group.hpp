// preduce.group_size = 0 (auto): the partial-reduce group size P chosen by a stated rule from the
// workers' step times measured in a warm-up window (preduce.auto_warmup_steps steps before
// training: the MPI run times each rank's compute plus injected delay; the simulator takes the
// same virtual step times its clock would), instead of by hand.
//
// Rule: m_i = median step time of worker i over the window, m = median of the m_i (the typical
// worker). Worker i is persistently slow when m_i > preduce.auto_slow_ratio * m. With F workers
// not slow, P = clamp(F, 2, preduce.auto_max_group) (and at most the workers).
// Why: a group closes when its P-th member is ready, so a P that needs a persistently slow
// worker waits for it every time; P = F lets the fast workers group among themselves while the
// stragglers join whichever group is forming when they arrive. Medians, not means: a jitter or
// heavy-tail spike is transient and the group formation already absorbs it by taking whoever is
// ready, so it must not mark a worker slow. The cap: a group's wait grows with P (the P-th
// arrival among the fast) while the gain of averaging more models per group levels off; on the
// development runs (results/preduce/sim_scale: 32 and 256 workers, seeds 1-6) P = 8 was the best
// of 2, 3, 4, 8, so the default cap is 8.
#pragma once
#include <vector>

#include "lib/preduce/hetero.hpp"
#include "lib/preduce/options.hpp"
#include "lib/preduce/worker.hpp"
#include "mpi/process_group.hpp"

namespace skew::preduce {

// step_times[w]: worker w's measured step times (seconds), at least one each.
int auto_group_size(const std::vector<std::vector<double>>& step_times, double slow_ratio, int max_group);

// The simulator's virtual time of one step of a worker: sim.compute_ms plus its injected
// heterogeneity plus sim.overhead_ms (its clock and its warm-up both use this).
double simulated_step_s(const TrainOptions& opt, const Hetero& hetero, std::int64_t step);

// The simulator's warm-up, for a mode with auto_group_size(): opt with group_size set by the rule;
// `warmup_s` gets the window's virtual duration (its slowest worker's).
TrainOptions resolve_simulated_group_size(const TrainOptions& opt, double& warmup_s);

// The MPI run's warm-up, collective over `world`: every worker (`me`; null on a dedicated
// controller rank) times preduce.auto_warmup_steps steps (compute and injected delay, no update),
// the times are gathered and every rank applies the rule; `warmup_s` gets the window's time.
int measured_group_size(comm::ProcessGroup& world, Worker* me, const TrainOptions& opt, double& warmup_s);

}  // namespace skew::preduce
