// preduce_train's two drivers: real MPI workers (one per rank) and the discrete-event
// simulator (N virtual workers in one process, virtual clock, same group logic and model
// arithmetic). Both return the run summary (one JSON object) and the accuracy curve.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "lib/preduce/options.hpp"
#include "lib/preduce/worker.hpp"
#include "mpi/process_group.hpp"

namespace skew::preduce {

struct RunResult {
  Json summary;
  Curve curve;
  std::vector<float> average_model;  // mean of the workers' final models
};

// Collective over `world`. Returns the result on the first worker (world rank 0, or 1 with a
// dedicated controller rank), nothing elsewhere.
std::optional<RunResult> train_mpi(const std::shared_ptr<comm::ProcessGroup>& world, const TrainOptions& opt);

RunResult simulate(const TrainOptions& opt);

// The summary fields both drivers report; each adds its own after them.
Json run_summary(const TrainOptions& opt, bool simulated, int workers, double wall_s, const char* metric,
                 const Curve& curve, double final_accuracy_mean, double average_model_accuracy);

// The curve file (output.curve, "time_s,mean_accuracy" rows) on the one process that writes it:
// opened before the run, so an unwritable path fails at once; nothing when the path is empty.
// write_curve fills and closes it (every write checked) when the run ends.
std::optional<CsvWriter> open_curve(const TrainOptions& opt);
void write_curve(std::optional<CsvWriter>& out, const Curve& curve);

// Throws unless the per-worker metrics path names each writer's file apart: with more than one
// worker, output.metrics must contain '%r'.
void check_metrics_path(const TrainOptions& opt, int workers);
// The metrics file of `rank`: output.metrics with '%r' replaced by the rank.
std::string metrics_path(std::string path, int rank);

}  // namespace skew::preduce
