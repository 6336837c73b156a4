#include "apps/preduce_train_options.hpp"

#include <algorithm>

#include "apps/run_dir.hpp"
#include "core/error.hpp"

namespace skew::preduce {

namespace {

// simulate, data.*, model.*
void add_data_and_model_keys(Schema& s) {
  s.add_bool("simulate", false, "run N virtual workers in one process on a virtual clock (sim.*) instead of MPI ranks");
  s.add_choice(
      "data.source", "clusters", {"clusters", "mnist", "synthetic_ctr"},
      "generated Gaussian clusters, MNIST from data.mnist_dir, or lib/wide's synthetic CTR data (model.kind lr/fm)");
  s.add_string("data.mnist_dir", "data/mnist", "directory with train.csv and test.csv (scripts/fetch_data.sh mnist)");
  s.add_int("data.rows", 4000, {1, 1 << 24}, "generated training rows");
  s.add_int("data.test_rows", 1000, {1, 1 << 24}, "generated test rows");
  s.add_int("data.eval_rows", 0, {0, 1 << 24},
            "model.kind = mlp: test accuracy over the first this many test rows (a cheaper evaluation of a wide "
            "model); 0 = every test row");
  s.add_int("data.dim", 32, {1, 1 << 16}, "generated feature dimension");
  s.add_int("data.classes", 4, {2, 1 << 16}, "generated classes");
  s.add_float("data.separation", 4.0, FloatRange::at_least(0), "generated cluster-center spread (larger = easier)");
  s.add_int("data.ctr_features", 1 << 14, {1, 1 << 30}, "features of the synthetic CTR data");
  s.add_choice("model.kind", "mlp", {"mlp", "lr", "fm"},
               "MLP classifier (metric: accuracy) or wide LR/FM (metric: AUC)");
  s.add_int("model.k", 4, {1, 1024}, "FM latent dimension");
  s.add_int_list("model.hidden", "64", {1, 1 << 16},
                 "hidden layer widths of the MLP, comma-separated; empty = logistic regression");
}

// train.*, sync.mode
void add_train_keys(Schema& s) {
  s.add_int("train.steps", 200, IntRange::at_least(1), "local steps per worker");
  s.add_float("train.max_seconds", 0.0, FloatRange::at_least(0),
              "stop a worker after this many (wall or virtual) seconds; 0 = none; "
              "all modes but allreduce (which stops by steps)");
  s.add_int("train.batch", 32, {1, 1 << 20}, "minibatch per worker and step");
  s.add_float("train.lr", 0.1, FloatRange::above(0), "SGD learning rate");
  s.add_int("train.seed", 1, IntRange::at_least(0), "seed of the model, data and delays");
  s.add_float("train.eval_interval_s", 0.25, FloatRange::at_least(1e-3),
              "test accuracy every this many (wall or virtual) seconds");
  s.add_float("train.target_accuracy", 0.9, {0, 1}, "time to this mean worker test accuracy is reported");
  s.add_int("train.log_interval", 50, IntRange::at_least(0), "progress line every this many steps (rank 0)");
  s.add_choice("sync.mode", "preduce", {"allreduce", "preduce", "adpsgd", "eager", "local"},
               "allreduce: synchronous gradient average each step; preduce: partial reduce; adpsgd: asynchronous "
               "pairwise averaging (active/passive workers, a communication thread each); eager: partial collective "
               "with a deadline; local: none");
}

// preduce.*, eager.*: the sync modes' settings
void add_sync_keys(Schema& s) {
  s.add_int("preduce.group_size", 2, {0, 1 << 20},
            "P: workers per partial-reduce group; 0 = auto: the workers not persistently slow in a warm-up window "
            "(median step time <= auto_slow_ratio x the median worker's), clamped to [2, auto_max_group]");
  s.add_int("preduce.auto_warmup_steps", 20, {1, kMaxInt32},
            "group_size = 0: steps timed on every worker before training to choose P (their time is reported as "
            "auto_warmup_s)");
  s.add_float("preduce.auto_slow_ratio", 1.5, FloatRange::above(1),
              "group_size = 0: a worker whose median warm-up step time exceeds this times the median worker's is slow");
  s.add_int("preduce.auto_max_group", 8, {2, 1 << 20}, "group_size = 0: the largest P the rule picks");
  s.add_choice("preduce.reduce", "model", {"model", "gradient"}, "what a group averages");
  s.add_float("preduce.alpha", 0.9, {.min = 0, .max = 1, .min_open = true},
              "staleness decay: level i (s = max version - version + 1) gets (1-alpha) alpha^(i-1); 1 = equal weights");
  s.add_choice("preduce.member_rule", "keep_own", {"keep_own", "weighted_mean"},
               "model reduce: keep_own = each member keeps 1/P of its own model and takes (P-1)/P of the others' "
               "staleness-weighted mean (the reference; for P = 2 the weights cancel); weighted_mean = every member "
               "takes the group's staleness-weighted mean");
  s.add_int("preduce.isolation_bound", 10, {0, 1 << 20},
            "ssp bound b: after b*N/P groups (about b updates per worker) a group must "
            "connect every worker (union-find over recent groups); 0 = off");
  s.add_choice("preduce.controller", "thread", {"thread", "rank"},
               "controller as a thread on rank 0, or rank 0 dedicated to it");
  s.add_bool("preduce.overlap", false,
             "average in the group on a communication thread while the worker computes its next "
             "steps (a snapshot is averaged; the change is added to the model); model reduce only");
  s.add_int(
      "preduce.refresh_staleness", 0, {0, kMaxInt32},
      "overlap only: a worker whose staleness s (max version - its version + 1) in its local step's group reached "
      "this rejoins a group at once up to s - 1 times before its next step (brings a straggler up to date); "
      "0 = off, else >= 2");
  s.add_float("preduce.deadline_ms", 0.0, FloatRange::at_least(0),
              "close a group below P members this long after its first member; 0 = wait for P");
  s.add_float("eager.deadline_ms", 5.0, FloatRange::at_least(0),
              "a round closes this long after its first arrival; late workers join the next");
  s.add_choice("eager.quorum", "solo", {"solo", "majority"},
               "members needed at the deadline: one, or half the workers");
  s.add_int("eager.sync_every", 10, {0, kMaxInt32}, "every n-th round is a synchronous model average over all workers");
}

// hetero.*: the injected worker-speed heterogeneity
void add_hetero_keys(Schema& s) {
  s.add_float_list("hetero.slowdown", "", {1, preduce::kMaxSlowdown},
                   "per-worker step-time multipliers, repeated over workers (1,1,1,4)");
  s.add_float("hetero.base_ms", 0.0, FloatRange::at_least(0),
              "nominal device step time added before the slowdown (ms)");
  s.add_choice("hetero.jitter", "none", {"none", "exp", "uniform", "spike"}, "random extra delay per step");
  s.add_float("hetero.jitter_ms", 0.0, FloatRange::at_least(0),
              "jitter scale: exp mean, uniform half-range, spike size (ms)");
  s.add_float("hetero.jitter_prob", 0.1, {0, 1}, "spike probability per step");
  s.add_choice(
      "hetero.model", "fixed", {"fixed", "moving", "bursty", "pareto"},
      "time-varying slowdown on top of hetero.slowdown: fixed = none; moving = hetero.stragglers random "
      "workers hetero.factor x slower, redrawn every hetero.period steps; bursty = each worker hetero.factor x "
      "slower in a period with probability hetero.burst_prob; pareto = per-step factor from a Pareto "
      "distribution with tail index hetero.tail_index, capped at hetero.max_factor");
  s.add_float("hetero.factor", 4.0, FloatRange::at_least(1), "moving, bursty: a slow worker's step-time factor");
  s.add_int("hetero.stragglers", 1, {1, 1 << 20}, "moving: workers slow at once (at most the workers)");
  s.add_int("hetero.period", 50, {1, kMaxInt32}, "moving, bursty: steps between redraws of who is slow");
  s.add_float("hetero.burst_prob", 0.25, {0, 1}, "bursty: probability a worker is slow in a period");
  s.add_float("hetero.tail_index", 1.5, FloatRange::above(1),
              "pareto: tail index a (P(factor > x) = x^-a, mean a/(a-1))");
  s.add_float("hetero.max_factor", 100.0, FloatRange::at_least(1), "pareto: cap of the per-step factor");
  s.add_float_list(
      "hetero.link_ms", "", {0, preduce::kMaxDelayMs},
      "slow links: per-worker extra time (ms) of every communication it takes part in, repeated over workers "
      "(0,0,0,10); not in MPI runs of adpsgd, whose gossip thread lives in mpi/");
  s.add_string("hetero.trace", "", "file of per-step delays in ms: line s, one comma-separated value per worker");
}

// sim.*, output.*
void add_sim_and_output_keys(Schema& s) {
  s.add_int("sim.workers", 4, {1, 1 << 20}, "virtual workers (--simulate)");
  s.add_float("sim.compute_ms", 1.0, FloatRange::at_least(0), "virtual compute time of one step (ms), before hetero");
  s.add_float("sim.latency_ms", 0.05, FloatRange::at_least(0), "virtual latency of one reduction (ms)");
  s.add_float("sim.bandwidth_gbs", 10.0, FloatRange::above(0), "virtual reduction bandwidth (GB/s)");
  s.add_float("sim.overhead_ms", 0.0, FloatRange::at_least(0),
              "virtual per-step time that the slowdown does not scale (ms): loop overhead and "
              "sleep overshoot of a real run");
  s.add_float("sim.controller_ms", 0.54, FloatRange::at_least(0),
              "virtual controller and message latency of each preduce/eager group (ms): "
              "ready to controller, group back to the members (default: as measured in the real 4-rank runs)");
  s.add_int("sim.eval_workers", 8, {1, 1 << 20},
            "workers whose models are evaluated: all when >= sim.workers, else a seeded stratified random sample "
            "that holds the persistent stragglers in proportion (at least one), weighted to the mean over all");
  add_run_dir_key(s, "config.ini, summary.json, metrics, curve and checkpoints");
  s.add_string("output.metrics", "{run}/metrics.rank%r.jsonl",
               "per-step JSONL, one file per worker: '%r' is replaced by the rank, and a name without it is "
               "refused when more than one worker would write it (not written with --simulate); empty = none");
  s.add_string("output.curve", "{run}/curve.csv",
               "CSV of time and mean worker test accuracy (written by the first worker only); empty = none");
  s.add_string("output.checkpoint_dir", "{run}/checkpoints",
               "checkpoint directory (empty = none): every worker's model, step and version, the run's totals so "
               "far and the partial-reduce controller's state");
  s.add_int("output.checkpoint_interval", 0, IntRange::at_least(0),
            "steps between checkpoints (0 = only at the end when a dir is set); a checkpoint is a point every "
            "worker agrees on: all stop at the step, the controller drains, the state is saved, training goes on");
  s.add_int("output.keep", 2, {1, kMaxInt32}, "checkpoints kept");
  s.add_bool("output.resume", false,
             "resume from the newest complete checkpoint in output.checkpoint_dir; allreduce and --simulate "
             "resume bit-exact, the asynchronous modes (preduce, eager, adpsgd, local) from the saved state but "
             "with timing-dependent groups; metrics lines of the steps before the checkpoint are kept");
}

void read_data_and_model(const Config& c, TrainOptions& o) {
  o.simulate = c.get_bool("simulate");
  o.source = c.get_string("data.source");
  o.mnist_dir = c.get_string("data.mnist_dir");
  o.rows = c.get_int_as<int>("data.rows");
  o.test_rows = c.get_int_as<int>("data.test_rows");
  o.eval_rows = c.get_int_as<int>("data.eval_rows");
  o.dim = c.get_int_as<int>("data.dim");
  o.classes = c.get_int_as<int>("data.classes");
  o.separation = c.get_float("data.separation");
  o.ctr_features = c.get_int("data.ctr_features");
  o.model_kind = c.get_string("model.kind");
  o.fm_k = c.get_int_as<int>("model.k");
  for (const auto w : c.get_int_list("model.hidden")) o.hidden.push_back(static_cast<int>(w));
}

void read_sync(const Config& c, TrainOptions& o) {
  o.mode = c.get_string("sync.mode");
  o.group_size = c.get_int_as<int>("preduce.group_size");
  o.auto_warmup_steps = c.get_int_as<int>("preduce.auto_warmup_steps");
  o.auto_slow_ratio = c.get_float("preduce.auto_slow_ratio");
  o.auto_max_group = c.get_int_as<int>("preduce.auto_max_group");
  o.reduce_gradient = c.get_string("preduce.reduce") == "gradient";
  o.alpha = c.get_float("preduce.alpha");
  o.member_rule = c.get_string("preduce.member_rule") == "weighted_mean" ? comm::MemberRule::WeightedMean
                                                                         : comm::MemberRule::KeepOwn;
  o.isolation_bound = c.get_int_as<int>("preduce.isolation_bound");
  o.dedicated_controller = c.get_string("preduce.controller") == "rank";
  o.preduce_deadline_ms = c.get_float("preduce.deadline_ms");
  o.overlap = c.get_bool("preduce.overlap");
  o.refresh_staleness = c.get_int_as<int>("preduce.refresh_staleness");
  o.eager_deadline_ms = c.get_float("eager.deadline_ms");
  o.eager_majority = c.get_string("eager.quorum") == "majority";
  o.eager_sync_every = c.get_int_as<int>("eager.sync_every");
}

void read_hetero(const Config& c, TrainOptions& o) {
  o.hetero.slowdown = c.get_float_list("hetero.slowdown");
  o.hetero.base_ms = c.get_float("hetero.base_ms");
  o.hetero.jitter = c.get_string("hetero.jitter");
  o.hetero.jitter_ms = c.get_float("hetero.jitter_ms");
  o.hetero.jitter_prob = c.get_float("hetero.jitter_prob");
  o.hetero.trace = c.get_string("hetero.trace");
  o.hetero.model = c.get_string("hetero.model");
  o.hetero.factor = c.get_float("hetero.factor");
  o.hetero.stragglers = c.get_int_as<int>("hetero.stragglers");
  o.hetero.period = c.get_int("hetero.period");
  o.hetero.burst_prob = c.get_float("hetero.burst_prob");
  o.hetero.tail_index = c.get_float("hetero.tail_index");
  o.hetero.max_factor = c.get_float("hetero.max_factor");
  o.hetero.link_ms = c.get_float_list("hetero.link_ms");
  o.hetero.seed = o.seed;
}

// The isolation rule, the simulator's latency growth and where the stragglers sit.
void add_isolation_and_placement_keys(Schema& s) {
  s.add_choice("preduce.isolation_rule", "fresh_member", {"fresh_member", "wait_all"},
               "once preduce.isolation_bound is reached: fresh_member = a group whose queued workers all lie "
               "in one component other than the largest waits for a worker of another component, and every "
               "group joins all components with a worker queued (a stalled worker stalls no one); wait_all = "
               "no group closes until every component has a worker queued (the follow-up scheduler's rule)");
  s.add_choice("sim.latency_growth", "log2", {"log2", "linear"},
               "hops of sim.latency_ms a reduction of k members takes: log2 = ceil(log2 k) (recursive doubling), "
               "linear = k - 1 (a ring); a pair takes one either way");
  s.add_choice("hetero.placement", "list", {"list", "shuffled"},
               "which workers take the hetero.slowdown / hetero.link_ms entries: list = worker w the w-th "
               "(repeated); shuffled = a seeded random permutation of the workers (stragglers random with respect "
               "to AD-PSGD's even active / odd passive split)");
}

void read_isolation_and_placement(const Config& c, TrainOptions& o) {
  o.isolation_rule = c.get_string("preduce.isolation_rule") == "wait_all" ? comm::IsolationRule::WaitAll
                                                                          : comm::IsolationRule::FreshMember;
  o.sim_latency_linear = c.get_string("sim.latency_growth") == "linear";
  o.hetero.placement_shuffled = c.get_string("hetero.placement") == "shuffled";
}

// Single-key ranges are the schema's; these rules span keys.
void check_rules_across_keys(const TrainOptions& o) {
  SKEW_CHECK(o.group_size != 1, "preduce.group_size must be 0 (auto) or >= 2 (a group of one averages nothing)");
  SKEW_CHECK(o.refresh_staleness == 0 || o.refresh_staleness >= 2,
             "preduce.refresh_staleness must be 0 (off) or >= 2 (the freshest member has staleness 1), got "
                 << o.refresh_staleness);
  SKEW_CHECK(o.refresh_staleness == 0 || o.overlap, "preduce.refresh_staleness needs preduce.overlap = true");
  SKEW_CHECK(!(o.overlap && o.reduce_gradient), "preduce.overlap averages models: it needs preduce.reduce = model");
}

}  // namespace

Schema make_schema() {
  Schema s("preduce_train",
           "Data-parallel training that tolerates stragglers: partial-reduce (any P ready workers "
           "average with staleness-aware weights) against all-reduce, AD-PSGD, eager-SGD and local SGD.");
  add_data_and_model_keys(s);
  add_train_keys(s);
  add_sync_keys(s);
  add_hetero_keys(s);
  add_sim_and_output_keys(s);
  add_isolation_and_placement_keys(s);
  return s;
}

TrainOptions read_options(const Config& c, const std::string& run_dir) {
  TrainOptions o;
  read_data_and_model(c, o);
  o.steps = c.get_int("train.steps");
  o.max_seconds = c.get_float("train.max_seconds");
  o.batch = c.get_int_as<int>("train.batch");
  o.lr = c.get_float("train.lr");
  o.seed = c.get_int_as<std::uint64_t>("train.seed");
  o.eval_interval_s = c.get_float("train.eval_interval_s");
  o.target_accuracy = c.get_float("train.target_accuracy");
  o.log_interval = c.get_int("train.log_interval");
  read_sync(c, o);
  read_hetero(c, o);
  read_isolation_and_placement(c, o);
  o.sim_workers = c.get_int_as<int>("sim.workers");
  o.sim_compute_ms = c.get_float("sim.compute_ms");
  o.sim_latency_ms = c.get_float("sim.latency_ms");
  o.sim_bandwidth_gbs = c.get_float("sim.bandwidth_gbs");
  o.sim_controller_ms = c.get_float("sim.controller_ms");
  o.sim_overhead_ms = c.get_float("sim.overhead_ms");
  o.sim_eval_workers = c.get_int_as<int>("sim.eval_workers");
  check_resume_names_a_run(c);
  o.metrics = in_run_dir(c.get_string("output.metrics"), run_dir);
  o.curve = in_run_dir(c.get_string("output.curve"), run_dir);
  o.checkpoint_dir = in_run_dir(c.get_string("output.checkpoint_dir"), run_dir);
  o.checkpoint_interval = c.get_int("output.checkpoint_interval");
  o.keep = c.get_int_as<int>("output.keep");
  o.resume = c.get_bool("output.resume");
  check_rules_across_keys(o);
  return o;
}

}  // namespace skew::preduce
