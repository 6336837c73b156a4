#include "lib/preduce/memory_estimate.hpp"

#include <sys/stat.h>

#include <string>

#include "core/labelled_csv.hpp"
#include "lib/wide/dataset.hpp"

namespace skew::preduce {

namespace {
constexpr std::int64_t kMnistPixels = 784;

double regular_file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? double(st.st_size) : 0.0;
}

// The synthetic CTR data's fields (nonzeros a row), from one generated row: lib/wide's layout.
int ctr_fields(const TrainOptions& opt) {
  wide::SyntheticSpec spec;
  spec.features = opt.ctr_features;
  spec.seed = opt.seed;
  return wide::generate_synthetic(spec, 0, 1).num_fields;
}

// The data set and the shards of its training rows (a copy: MlpTask's shards, WideTask's row
// ranges take none). MNIST's CSV holds at least two bytes a value ("0,"), so its floats take at
// most twice its file size; generated rows take dim floats and a label, or a CTR row its
// fields' index, field and value (10 bytes each), its offset and label.
MemoryPart data_part(const TrainOptions& opt) {
  if (opt.model_kind != "mlp") {
    const double row = 10.0 * ctr_fields(opt) + 12;
    return {"synthetic CTR rows (data.rows + data.test_rows)", row * (double(opt.rows) + opt.test_rows)};
  }
  if (opt.source == "mnist") {
    const double train = regular_file_bytes(opt.mnist_dir + "/train.csv");
    const double test = regular_file_bytes(opt.mnist_dir + "/test.csv");
    return {"MNIST from " + opt.mnist_dir + " (its CSV as floats, the training rows twice with the shards)",
            2 * (2 * train + test)};
  }
  const double row = 4.0 * (double(opt.dim) + 1);
  return {"generated rows (data.rows twice with the shards, data.test_rows)", row * (2.0 * opt.rows + opt.test_rows)};
}
}  // namespace

std::int64_t model_params(const TrainOptions& opt) {
  if (opt.model_kind != "mlp") {
    const std::int64_t row = opt.model_kind == "fm" ? 1 + opt.fm_k : 1;
    return 1 + opt.ctr_features * row;
  }
  std::vector<std::int64_t> widths{opt.source == "mnist" ? kMnistPixels : opt.dim};
  widths.insert(widths.end(), opt.hidden.begin(), opt.hidden.end());
  widths.push_back(opt.source == "mnist" ? kMnistClasses : opt.classes);
  std::int64_t params = 0;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) params += (widths[l] + 1) * widths[l + 1];
  return params;
}

std::vector<MemoryPart> memory_parts(const TrainOptions& opt, int workers) {
  const double model_bytes = double(model_params(opt)) * sizeof(float);
  // A worker keeps its parameters, gradient and accumulator; the task's initial model and the
  // simulator's sum are one more copy each.
  return {{std::to_string(workers) + " worker(s) x parameters, gradient and accumulator (" +
               std::to_string(model_params(opt)) + " floats each)",
           3 * double(workers) * model_bytes},
          {"initial model and group sum", 2 * model_bytes},
          data_part(opt)};
}

void check_task_memory(const TrainOptions& opt, int num_workers) {
  const int workers = opt.simulate ? num_workers : 1;
  const std::string remedy =
      std::string(opt.model_kind == "mlp" ? "lower model.hidden" : "lower data.ctr_features or model.k") +
      (opt.simulate ? ", sim.workers" : "") +
      (opt.model_kind == "mlp" && opt.source == "mnist" ? "" : ", data.rows or data.test_rows") +
      (opt.model_kind == "mlp" && opt.source != "mnist" ? " or data.dim" : "");
  require_memory("preduce_train", memory_parts(opt, workers), {0, "", remedy});
}

}  // namespace skew::preduce
