// moe_train's training loop: data, model, policy, AdamW, evaluation, JSONL metrics with the
// routing trace, trace save/replay, checkpoint/resume. The app is a thin main around it so tests
// can run short trainings in-process.
#pragma once
#include <memory>

#include "core/metrics.hpp"
#include "lib/moe/options.hpp"
#include "mpi/process_group.hpp"

namespace skew::moe {

// Runs the training `options` describe on `world`; returns the summary (final loss, validation loss,
// throughput, balance, drops, the unigram entropy of the training text, ...).
Json train(const MoeTrainOptions& options, comm::ProcessGroup& world);

}  // namespace skew::moe
