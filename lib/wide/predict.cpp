// wide_train's other modes (lib/wide/fit.hpp): --predict scores predict.data with a saved model;
// --export writes data.train out as a text file.
#include <algorithm>
#include <iomanip>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "lib/wide/fit.hpp"
#include "lib/wide/fit_data.hpp"
#include "lib/wide/trainer.hpp"

namespace skew::wide {

void predict(const WideOptions& o, const comm::ProcessGroup& world) {
  SKEW_CHECK(world.size() == 1, "--predict runs on one rank");
  const std::string &model_path = o.predict.model, &data_path = o.predict.data;
  std::string missing;
  if (model_path.empty()) missing = "--predict.model=FILE (a model.safetensors a training run saved)";
  if (data_path.empty())
    missing += std::string(missing.empty() ? "" : " and ") + "--predict.data=FILE (the rows to score)";
  const bool both = model_path.empty() && data_path.empty();
  SKEW_CHECK(missing.empty(), "--predict needs "
                                  << missing << ": add " << (both ? "them" : "it")
                                  << " to the command line or to the [predict] section of the config file");
  WideModel model = WideModel::load(model_path);
  // The data is hashed as the model's training data was; a different data.hash_bits is a mistake.
  ReadOptions ro = read_options(o.data, world, o.train.threads);
  SKEW_CHECK(ro.hash_bits == 0 || ro.hash_bits == model.hash_bits,
             "data.hash_bits = " << ro.hash_bits << " but " << model_path
                                 << " was trained with data.hash_bits = " << model.hash_bits
                                 << " (--predict hashes as the model records; leave data.hash_bits at 0)");
  ro.hash_bits = model.hash_bits;
  SparseDataset data = load_dataset(data_path, ro);
  if (model.normalized) normalize_instances(data);  // as the model's training data was
  for (auto i : data.index)
    SKEW_CHECK(i < model.shape.num_features,
               data_path << ": feature " << i << " is beyond the model's " << model.shape.num_features);
  TrainOptions scoring;
  scoring.schema = TrainSchema::Classical;
  WideTrainer t(std::move(model), scoring);
  const std::vector<float> p = t.predict(data);
  std::string text;
  for (float v : p) text += std::to_string(v) + "\n";
  const std::string& out = o.predict.output;
  if (out == "-")
    write_stdout(text, "the predictions");
  else
    write_file_atomic(out, text);
  // Against the data's own labels (on the log, so that stdout holds only the predictions).
  const Evaluation e = t.evaluate(data);
  SKEW_INFO("predict: " << e.samples << " rows of " << data_path << " scored with " << model_path << ": AUC "
                        << std::fixed << std::setprecision(4) << e.auc << ", logloss " << e.logloss << " -> "
                        << (out == "-" ? std::string("stdout") : out));
}

void export_data(const DataOptions& data, const std::string& path) {
  const std::string& spec = data.train;
  SKEW_CHECK(spec.rfind("synthetic:", 0) == 0, "--export writes synthetic data.train to a file; data.train = " << spec);
  const SyntheticSpec s = parse_synthetic_spec(spec);
  const TextFormat format = format_for(path, data.format);
  OutputFile out(path);
  // A block of rows at a time: the file may be larger than memory (the generator's rows are
  // pure functions of their number, so blocks join into the one dataset).
  constexpr std::int64_t kBlock = 100000;
  for (std::int64_t begin = 0; begin < s.rows; begin += kBlock)
    out.write(format_text(generate_synthetic(s, begin, std::min(s.rows, begin + kBlock)), format));
  out.close();
}

}  // namespace skew::wide
