#include "lib/wide/best_model.hpp"

#include <utility>

#include "core/timer.hpp"

namespace skew::wide {

BestModel::BestModel(std::string path, bool writer, bool with_checkpoints, const Data& data, const WideOptions& options)
    : path_(std::move(path)), writer_(writer), with_checkpoints_(with_checkpoints), data_(data), options_(options) {}

void BestModel::write(const WideParams& params) {
  Timer save_timer;
  WideModel saved;
  saved.shape = data_.shape;
  saved.params = data_.renumber ? data_.order.to_original(data_.shape, params) : params;
  saved.normalized = data_.normalize;
  saved.hash_bits = options_.data.hash_bits;
  saved.save(path_, {{"schema", schema_name(options_.train.schema)}, {"epoch", std::to_string(epoch_)}});
  save_seconds_ += save_timer.seconds();
  ++writes_done_;
  unwritten_ = false;
}

void BestModel::keep(WideTrainer& trainer, std::int64_t epoch, bool another_epoch_follows) {
  epoch_ = epoch;
  if (!writes()) return;
  if (with_checkpoints_) return write(trainer.parameters());
  unwritten_ = true;
  is_latest_ = !another_epoch_follows;
  if (another_epoch_follows) {
    Timer copy_timer;
    copy_ = trainer.parameters();  // after the first, into the same pages: no faults
    save_seconds_ += copy_timer.seconds();
  }
}

void BestModel::write_unwritten(WideTrainer& trainer) {
  if (unwritten_) write(is_latest_ ? trainer.parameters() : copy_);
}

}  // namespace skew::wide
