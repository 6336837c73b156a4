// Where wide_train's best model goes (README, "Outputs"). With checkpoints
// (output.checkpoint_dir), at every epoch that improves it: a checkpoint holds the latest
// parameters, not the best, so a resumed run finds the best epoch only in that file. Without them
// a crash ends the run (there is nothing to resume), so the best epoch's parameters are kept in
// memory and written once, when training ends, stops early or fails: FFM's 1.2 GB model takes
// longer to write than an epoch takes to train.
#pragma once
#include <cstdint>
#include <string>

#include "lib/wide/fit_data.hpp"
#include "lib/wide/options.hpp"
#include "lib/wide/trainer.hpp"

namespace skew::wide {

class BestModel {
 public:
  // `path`: output.model, or OUTPUT_DIR/model.safetensors (empty: none is saved); only rank 0
  // (`writer`) saves. The saved model is numbered, normalised and hashed as `data` and
  // data.hash_bits say, its metadata naming the schema.
  BestModel(std::string path, bool writer, bool with_checkpoints, const Data& data, const WideOptions& options);
  const std::string& path() const { return path_; }
  // Whether keep() copies the parameters aside (no checkpoints, another epoch may follow).
  bool copies_parameters(std::int64_t epochs) const { return writes() && !with_checkpoints_ && epochs > 1; }

  // Epoch `epoch` just trained is the best so far. `another_epoch_follows`: its parameters are
  // then copied, since the next epoch changes the trainer's (and may be worse, or fail); after
  // the last epoch the trainer's own are written.
  void keep(WideTrainer& trainer, std::int64_t epoch, bool another_epoch_follows);
  // Writes the best epoch's parameters if they are held but not yet written: at the end, or when
  // the run fails (a run that diverges keeps its best epoch, as with checkpoints).
  void write_unwritten(WideTrainer& trainer);

  double save_seconds() const { return save_seconds_; }  // writing and copying the parameters
  std::int64_t writes_done() const { return writes_done_; }

 private:
  bool writes() const { return writer_ && !path_.empty(); }
  void write(const WideParams& params);

  std::string path_;
  bool writer_, with_checkpoints_;
  const Data& data_;
  const WideOptions& options_;
  std::int64_t epoch_ = 0;  // the best epoch's number, for the saved model's metadata
  WideParams copy_;         // the best epoch's parameters, held while another epoch trains
  bool unwritten_ = false, is_latest_ = false;
  double save_seconds_ = 0;
  std::int64_t writes_done_ = 0;
};

}  // namespace skew::wide
