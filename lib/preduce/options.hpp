// preduce_train's configuration: the schema (every key with default, type and help) and the
// typed options the trainer and the simulator read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "lib/preduce/hetero.hpp"
#include "mpi/preduce_groups.hpp"

namespace skew::preduce {

enum class SyncMode { Allreduce, Preduce, Adpsgd, Eager, Local };
SyncMode parse_sync_mode(const std::string& name);
const char* sync_mode_name(SyncMode mode);

struct TrainOptions {
  // data
  std::string source = "clusters", mnist_dir = "data/mnist";
  int rows = 4000, test_rows = 1000, dim = 32, classes = 4;
  double separation = 4.0;
  std::int64_t ctr_features = 1 << 14;
  // model: mlp (hidden widths; empty = multinomial logistic regression) or a wide model
  std::string model_kind = "mlp";
  std::vector<int> hidden;
  int fm_k = 4;
  // train
  std::int64_t steps = 200;
  double max_seconds = 0.0;  // 0 = none; honoured by all modes but allreduce (see time_limited)
  int batch = 32;
  double lr = 0.1;
  std::uint64_t seed = 1;
  double eval_interval_s = 0.25, target_accuracy = 0.9;
  std::int64_t log_interval = 50;
  // sync
  SyncMode mode = SyncMode::Preduce;
  bool reduce_gradient = false;  // preduce.reduce = gradient
  bool dedicated_controller = false;
  bool overlap = false;                      // preduce.overlap: group averaging on a communication thread
  int refresh_staleness = 0;                 // preduce.refresh_staleness (overlap): 0 = off
  int group_size = 2, isolation_bound = 10;  // group_size 0 = auto (auto_group.hpp)
  int auto_warmup_steps = 20, auto_max_group = 8;
  double auto_slow_ratio = 1.5;
  double alpha = 0.9, preduce_deadline_ms = 0.0;
  comm::MemberRule member_rule = comm::MemberRule::KeepOwn;  // preduce.member_rule
  double eager_deadline_ms = 5.0;
  bool eager_majority = false;
  int eager_sync_every = 10;
  HeteroOptions hetero;
  // simulator
  bool simulate = false;
  int sim_workers = 4, sim_eval_workers = 8;
  double sim_compute_ms = 1.0, sim_latency_ms = 0.05, sim_bandwidth_gbs = 10.0, sim_controller_ms = 0.0,
         sim_overhead_ms = 0.0;
  // output
  std::string metrics, curve;
  std::string checkpoint_dir;            // empty = no checkpoints
  std::int64_t checkpoint_interval = 0;  // steps; 0 = only at the end
  int keep = 2;
  bool resume = false;
};

// Modes whose workers may stop independently: all but allreduce, whose rounds need every
// worker, so it stops by train.steps only.
bool time_limited(const TrainOptions& opt);

Schema make_schema();
TrainOptions read_options(const Config& config);

// preduce with preduce.overlap: the group averaging runs beside the next local steps.
bool overlapped(const TrainOptions& opt);
// preduce.refresh_staleness: after the group of a local step in which this worker's staleness
// s = max_version - ready_version + 1 reached the threshold, its communication thread reports
// ready again at once (with the model as it is now) up to s - 1 times before its next local
// step: it missed s - 1 of the freshest member's steps, each of which that member followed with
// a synchronisation, so a straggler is averaged about as often per second as the fast workers
// while it is still computing. A fresh worker (s below the threshold) gets 0: it waits for its
// next step as before. Returns the number of such refreshes.
std::int64_t refresh_budget(const TrainOptions& opt, std::int64_t max_version, std::int64_t ready_version);

// Group-formation options for the sync mode (preduce and eager use the controller); a
// preduce.group_size of 0 (auto) must have been resolved (auto_group.hpp) before.
comm::GroupOptions group_options(const TrainOptions& opt, int num_workers);

}  // namespace skew::preduce
