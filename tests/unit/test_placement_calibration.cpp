// Calibration of the cost constants: recovering known constants from constructed measured runs
// (closed form), refusing runs that cannot determine them, the constants file, and scoring a
// simulation with constants other than the planners'.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "lib/placement/calibration.hpp"
#include "lib/placement/simulator.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew::placement;

namespace {

constexpr double kSecondsPerRow = 3e-6, kBandwidth = 2e9, kLatency = 5e-5;

// A run of `ranks` ranks and 2 layers whose measurements follow the cost model exactly: expert
// CPU seconds = rows x kSecondsPerRow, and per iteration the all-to-all takes 4 rounds per layer
// of kLatency plus the busiest rank's bytes of the layer at kBandwidth.
MeasuredRun exact_run(int ranks, int iterations, std::uint64_t salt) {
  MeasuredRun run;
  const int layers = 2;
  for (int it = 0; it < iterations; ++it) {
    run.trace.push_back(RoutingCounts(layers, std::vector<std::int64_t>(4, 1)));
    RankLayerValues rows(ranks), cpu(ranks), bytes(ranks), sync(ranks);
    double seconds = 0;
    for (int l = 0; l < layers; ++l) {
      double busiest = 0;
      for (int r = 0; r < ranks; ++r) {
        const double n = 100.0 + double((it * 37 + r * 11 + l * 5 + salt) % 90);
        rows[r].push_back(n), cpu[r].push_back(n * kSecondsPerRow);
        const double b = ranks > 1 ? n * 256.0 * (1 + (it + r) % 3) : 0.0;
        bytes[r].push_back(b), sync[r].push_back(0);
        busiest = std::max(busiest, b);
      }
      seconds += 4 * kLatency + busiest / kBandwidth;
    }
    run.rows.push_back(rows), run.expert_cpu.push_back(cpu), run.alltoall_bytes.push_back(bytes);
    run.sync_bytes.push_back(sync), run.alltoall_seconds.push_back(ranks > 1 ? seconds : 0.0);
    run.placements.push_back(std::vector<std::string>(layers, ""));
  }
  return run;
}

ExpertShape shape() {
  ExpertShape s;
  s.params = 1000;
  s.hidden_dim = 8;
  return s;
}

}  // namespace

TEST_CASE("calibration recovers the constants its measured runs follow", "[placement][calibration]") {
  CostConstants base;
  base.allreduce_bandwidth = 7e9, base.gpus_per_node = 4;
  const CalibrationFit fit =
      fit_constants({exact_run(1, 12, 0), exact_run(2, 12, 3), exact_run(4, 9, 7)}, shape(), base);
  CHECK(fit.seconds_per_row == Approx(kSecondsPerRow).epsilon(1e-12));
  CHECK(fit.constants.gemm_flops == Approx(6.0 * 1000 / kSecondsPerRow).epsilon(1e-12));  // 6 FLOPs per parameter
  CHECK(fit.constants.nvlink_bandwidth == Approx(kBandwidth).epsilon(1e-9));
  CHECK(fit.constants.alltoall_bandwidth == Approx(kBandwidth).epsilon(1e-9));
  CHECK(fit.constants.alltoall_latency == Approx(kLatency).epsilon(1e-7));
  // Not fitted: kept from the base.
  CHECK(fit.constants.allreduce_bandwidth == 7e9);
  CHECK(fit.constants.gpus_per_node == 4);
  // The warm-up iteration is skipped: (12 - 1) x 1 x 2 + (12 - 1) x 2 x 2 + (9 - 1) x 4 x 2 records.
  CHECK(fit.compute_samples == 22 + 44 + 64);
  CHECK(fit.alltoall_samples == 11 + 8);
}

TEST_CASE("calibration refuses runs that cannot determine a constant", "[placement][calibration]") {
  const auto error = [](const std::vector<MeasuredRun>& runs) {
    return skew::test::error_of([&] { fit_constants(runs, shape(), CostConstants{}); });
  };
  CHECK_THAT(error({exact_run(1, 10, 0)}), Catch::Contains("2 or more ranks"));
  MeasuredRun flat = exact_run(2, 10, 0);
  for (auto& it : flat.alltoall_bytes)
    for (auto& rank : it)
      for (double& b : rank) b = 1000;
  CHECK_THAT(error({flat}), Catch::Contains("same bytes"));
  MeasuredRun waiting = exact_run(2, 10, 0);
  for (std::size_t it = 0; it < waiting.alltoall_seconds.size(); ++it)
    waiting.alltoall_seconds[it] = 1.0 / double(it + 1);
  for (std::size_t it = 0; it < waiting.alltoall_bytes.size(); ++it)
    for (auto& rank : waiting.alltoall_bytes[it])
      for (double& b : rank) b = 1000.0 * double(it + 1);
  CHECK_THAT(error({waiting}), Catch::Contains("does not grow with the bytes"));
}

TEST_CASE("cost constants round-trip through their JSON file, and a bad file names its key",
          "[placement][calibration]") {
  CostConstants c;
  c.gemm_flops = 1.5e10, c.nvlink_bandwidth = 3e9, c.alltoall_bandwidth = 2e9, c.allreduce_bandwidth = 1e9;
  c.gpus_per_node = 2, c.alltoall_latency = 4e-5;
  const std::string path = "calibration_roundtrip.json";
  std::ofstream(path) << constants_to_json(c).dump();
  const CostConstants back = read_constants_json(path);
  CHECK(back.gemm_flops == c.gemm_flops);
  CHECK(back.alltoall_bandwidth == c.alltoall_bandwidth);
  CHECK(back.alltoall_latency == c.alltoall_latency);
  CHECK(back.gpus_per_node == 2);
  skew::Json j = constants_to_json(c);
  j["inter_bandwidth"] = -1;
  std::ofstream(path) << j.dump();
  CHECK_THAT(skew::test::error_of([&] { read_constants_json(path); }),
             Catch::Contains("calibration_roundtrip.json") && Catch::Contains("inter_bandwidth"));
  std::remove(path.c_str());
}

TEST_CASE("a simulation scores every policy with the scoring constants, not the planners' model",
          "[placement][calibration]") {
  SimSetup s;
  s.constants.gemm_flops = 6e6, s.constants.nvlink_bandwidth = 4000, s.constants.alltoall_bandwidth = 1000;
  s.constants.allreduce_bandwidth = 2000, s.constants.gpus_per_node = 2;
  s.shape.params = 1000, s.shape.hidden_dim = 10;
  s.gpus = 2;
  const RoutingTrace trace(5, RoutingCounts{{300, 100}});
  const auto planner_scored = simulate(trace, s);
  CostConstants truth = s.constants;
  truth.gemm_flops /= 3, truth.nvlink_bandwidth *= 2;  // the machine differs from what the planner believes
  s.scoring = truth;
  const auto scored = simulate(trace, s);
  const CostModel truth_model(truth, s.shape), planner_model(s.constants, s.shape);
  const std::vector<std::int64_t> counts{300, 100};
  REQUIRE(scored[0].policy == "static");
  CHECK(scored[0].mean_step() == Approx(static_step(truth_model, counts, 2)));
  CHECK(planner_scored[0].mean_step() == Approx(static_step(planner_model, counts, 2)));
  CHECK(scored[1].mean_step() == Approx(deepspeed_step(truth_model, counts, 2, 0.0, 4, nullptr)));
  CHECK(scored[4].mean_step() == Approx(ideal_step(truth_model, counts, 2)));
  // FasterMoE decides its shadows with the planner's model and is scored with the truth.
  CHECK(scored[2].mean_step() == Approx(fastermoe_step(planner_model, truth_model, counts, 2, nullptr)));
  CHECK(scored[2].mean_step() != Approx(planner_scored[2].mean_step()));
  // Scoring with the planners' own constants is the unscored simulation exactly.
  s.scoring = s.constants;
  const auto same = simulate(trace, s);
  for (std::size_t p = 0; p < same.size(); ++p) CHECK(same[p].mean_step() == planner_scored[p].mean_step());
}
