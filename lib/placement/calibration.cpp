#include "lib/placement/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/error.hpp"

namespace skew::placement {

CalibrationFit fit_constants(const std::vector<MeasuredRun>& runs, const ExpertShape& shape,
                             const CostConstants& base) {
  CalibrationFit fit;
  fit.constants = base;
  double rows_cpu = 0, rows_rows = 0;
  // Sums of the all-to-all regression y = a + b x (x: bytes, y: seconds) over
  // fit.alltoall_samples points.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const MeasuredRun& run : runs) {
    for (std::size_t it = 1; it < run.trace.size(); ++it) {
      const std::size_t ranks = run.rows[it].size();
      double busiest_bytes = 0;
      std::size_t layers = 0;
      for (std::size_t r = 0; r < ranks; ++r) {
        layers = std::max(layers, run.rows[it][r].size());
        for (std::size_t l = 0; l < run.rows[it][r].size(); ++l) {
          const double rows = run.rows[it][r][l], cpu = run.expert_cpu[it][r][l];
          rows_cpu += rows * cpu, rows_rows += rows * rows;
          ++fit.compute_samples;
        }
      }
      if (ranks < 2) continue;
      for (std::size_t l = 0; l < layers; ++l) {
        double layer_max = 0;
        for (std::size_t r = 0; r < ranks; ++r) layer_max = std::max(layer_max, run.alltoall_bytes[it][r][l]);
        busiest_bytes += layer_max;
      }
      // Per round: y = latency + x / bandwidth, with x the busiest bytes of one round.
      const double rounds = 4.0 * static_cast<double>(layers);
      const double x = busiest_bytes / rounds, y = run.alltoall_seconds[it] / rounds;
      sx += x, sy += y, sxx += x * x, sxy += x * y;
      ++fit.alltoall_samples;
    }
  }
  SKEW_CHECK(rows_rows > 0, "calibration: no expert rows in the measured runs (every rank computed nothing)");
  fit.seconds_per_row = rows_cpu / rows_rows;
  SKEW_CHECK(fit.seconds_per_row > 0, "calibration: measured expert CPU time is zero");
  const double flops_per_row = CostModel(base, shape).flops_per_token();
  fit.constants.gemm_flops = flops_per_row / fit.seconds_per_row;
  SKEW_CHECK(fit.alltoall_samples >= 2,
             "calibration: the all-to-all fit needs 2 or more iterations of runs with 2 or "
             "more ranks; the runs given have "
                 << fit.alltoall_samples);
  const double n = fit.alltoall_samples;
  const double var = n * sxx - sx * sx;
  SKEW_CHECK(var > 0,
             "calibration: every all-to-all moved the same bytes, so bandwidth and latency cannot be told "
             "apart; add runs with other routings or rank counts");
  const double slope = (n * sxy - sx * sy) / var, intercept = (sy - slope * sx) / n;
  SKEW_CHECK(slope > 0, "calibration: all-to-all time does not grow with the bytes moved (slope "
                            << slope << " s/byte): the measured runs are dominated by waiting, not transfer");
  fit.constants.nvlink_bandwidth = fit.constants.alltoall_bandwidth = 1.0 / slope;
  fit.constants.alltoall_latency = std::max(0.0, intercept);
  return fit;
}

// The file keeps the names it was first written with (intra_/inter_bandwidth: nvlink_ and
// alltoall_bandwidth), so older calibration files still read.
Json constants_to_json(const CostConstants& c) {
  return Json{{"gemm_flops", c.gemm_flops},
              {"intra_bandwidth", c.nvlink_bandwidth},
              {"inter_bandwidth", c.alltoall_bandwidth},
              {"allreduce_bandwidth", c.allreduce_bandwidth},
              {"gpus_per_node", c.gpus_per_node},
              {"alltoall_latency", c.alltoall_latency}};
}

CostConstants read_constants_json(const std::string& path) {
  std::ifstream in(path);
  SKEW_CHECK(in, "cannot open cost constants '" << path << "'");
  Json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    SKEW_THROW(path << ": not JSON: " << e.what());
  }
  CostConstants c;
  const auto number = [&](const char* key, double& out, double min) {
    SKEW_CHECK(j.contains(key) && j.at(key).is_number(), path << ": key '" << key << "' missing or not a number");
    out = j.at(key).get<double>();
    SKEW_CHECK(out >= min && std::isfinite(out),
               path << ": key '" << key << "' = " << out << " is below " << min << " or not finite");
  };
  number("gemm_flops", c.gemm_flops, 1e-300);
  number("intra_bandwidth", c.nvlink_bandwidth, 1e-300);
  number("inter_bandwidth", c.alltoall_bandwidth, 1e-300);
  number("allreduce_bandwidth", c.allreduce_bandwidth, 1e-300);
  number("alltoall_latency", c.alltoall_latency, 0);
  double per_node = 0;
  number("gpus_per_node", per_node, 1);
  SKEW_CHECK(per_node == static_cast<int>(per_node),
             path << ": key 'gpus_per_node' = " << per_node << " is not an integer");
  c.gpus_per_node = static_cast<int>(per_node);
  return c;
}

}  // namespace skew::placement
