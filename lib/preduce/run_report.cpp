// What both drivers write and report: the summary's common fields, the curve file and the
// per-worker metrics path.
#include "core/error.hpp"
#include "lib/preduce/trainer.hpp"

namespace skew::preduce {

std::optional<CsvWriter> open_curve(const TrainOptions& opt) {
  if (opt.curve.empty()) return std::nullopt;
  return std::optional<CsvWriter>(std::in_place, opt.curve, std::vector<std::string>{"time_s", "mean_accuracy"});
}

void write_curve(std::optional<CsvWriter>& out, const Curve& curve) {
  if (!out) return;
  for (std::size_t k = 0; k < curve.mean_accuracy.size(); ++k)
    out->row({csv_number(static_cast<double>(k) * curve.interval), csv_number(curve.mean_accuracy[k])});
  out->close();
}

void check_metrics_path(const TrainOptions& opt, int workers) {
  if (workers > 1 && !opt.metrics.empty() && opt.metrics.find("%r") == std::string::npos)
    SKEW_THROW("output.metrics = '" << opt.metrics << "' has no '%r', but " << workers
                                    << " workers would all write that one file; put '%r' (the rank) in the name, "
                                       "e.g. output.metrics=metrics.%r.jsonl");
}

std::string metrics_path(std::string path, int rank) {
  const auto at = path.find("%r");
  if (at != std::string::npos) path.replace(at, 2, std::to_string(rank));
  return path;
}

Json run_summary(const TrainOptions& opt, bool simulated, int workers, double wall_s, const char* metric,
                 const Curve& curve, double final_accuracy_mean, double average_model_accuracy) {
  return Json{{"app", "preduce_train"},
              {"simulate", simulated},
              {"mode", opt.mode},
              {"workers", workers},
              {"steps", opt.steps},
              {"wall_s", wall_s},
              {"metric", metric},
              {"target_accuracy", opt.target_accuracy},
              {"time_to_target_s", curve.time_to(opt.target_accuracy)},
              {"final_accuracy_mean", final_accuracy_mean},
              {"average_model_accuracy", average_model_accuracy}};
}

}  // namespace skew::preduce
