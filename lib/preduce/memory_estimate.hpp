// preduce_train's memory, estimated from its keys before the data is read or generated (issue
// 38): the model every worker held in this process keeps (its parameters, gradient and
// accumulator: --simulate holds all sim.workers, an MPI rank one) and the data set with its
// per-worker shards, compared with MemAvailable by require_memory (core/memory_limits.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "core/memory_limits.hpp"
#include "lib/preduce/options.hpp"

namespace skew::preduce {

// The parameters of model.kind's model: the MLP's (in + 1) x out per layer, from data.dim (or
// MNIST's 784 pixels) through model.hidden to the classes; LR's and FM's 1 + features x (1 + k).
std::int64_t model_params(const TrainOptions& opt);

// What the run will hold in this process, holding `workers` workers' models.
std::vector<MemoryPart> memory_parts(const TrainOptions& opt, int workers);

// Refuses a run whose parts exceed MemAvailable, naming the keys that lower them; `num_workers`:
// the run's workers (each a shard of the data).
void check_task_memory(const TrainOptions& opt, int num_workers);

}  // namespace skew::preduce
