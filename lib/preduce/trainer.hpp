// preduce_train's two drivers: real MPI workers (one per rank) and the discrete-event
// simulator (N virtual workers in one process, virtual clock, same group logic and model
// arithmetic). Both return the run summary (one JSON object) and the accuracy curve.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/metrics.hpp"
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

// Writes "time_s,mean_accuracy" rows.
void write_curve(const std::string& path, const Curve& curve);

}  // namespace skew::preduce
