// Calibration of the cost model's machine constants from measured moe_train runs, so that
// placement_sim can score every policy's plan with a model fitted to what runs measured rather
// than with the model the planner optimises (which the planner cannot lose against).
//
// Two least-squares fits over the runs' per-iteration records (the first, warm-up iteration
// skipped), each matching one term of CostModel:
//   compute    expert thread CPU seconds = rows x seconds_per_row, over every rank and layer
//              (through the origin); gemm_flops = FLOPs per row / seconds_per_row.
//   all-to-all rank 0's all-to-all wall seconds of an iteration = bytes / bandwidth + rounds x
//              latency, where bytes is, per layer, the busiest rank's bytes sent (the model's
//              round is the busiest rank's transfer) summed over layers and rounds = 4 per layer
//              (dispatch and combine, forward and backward). Single-rank runs have no
//              all-to-all and only enter the compute fit.
// The fitted bandwidth is used for links inside and across nodes alike: the runs measured here
// share one node, so nothing in them separates the two.
#pragma once
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "lib/placement/cost_model.hpp"
#include "lib/placement/validate.hpp"

namespace skew::placement {

struct CalibrationFit {
  CostConstants constants;  // `base` with gemm_flops, both bandwidths and alltoall_latency fitted
  double seconds_per_row = 0;
  int compute_samples = 0;   // (iteration, rank, layer) records in the compute fit
  int alltoall_samples = 0;  // iterations of multi-rank runs in the all-to-all fit
};

// `shape` gives FLOPs per row; `base` the constants not fitted (all-reduce bandwidth, GPUs per
// node). Throws naming what is missing when the runs cannot determine a constant.
CalibrationFit fit_constants(const std::vector<MeasuredRun>& runs, const ExpertShape& shape, const CostConstants& base);

Json constants_to_json(const CostConstants& c);
// Reads constants written by constants_to_json; throws naming the file and key.
CostConstants read_constants_json(const std::string& path);

}  // namespace skew::placement
