// wide_train: LR / FM / FFM on sparse CTR data with the classical or the flow (cuWide) schema,
// data parallel over MPI ranks (the epoch loop: lib/wide/fit.hpp; the keys and their options
// structs: apps/wide_train_options.hpp).
//   mpirun -np 2 wide_train --config configs/wide.ini [--model.type=ffm ...]
// `wide_train --predict --predict.model=M --predict.data=D` writes one probability per line
// instead of training; `wide_train --export=FILE --data.train=synthetic:criteo?...` writes the
// synthetic training data to FILE as libsvm/libffm text (the cost curve's large files).
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "apps/run_dir.hpp"
#include "apps/wide_train_options.hpp"
#include "core/config.hpp"
#include "core/metrics.hpp"
#include "lib/wide/fit.hpp"
#include "mpi/runtime.hpp"

namespace {
// Every output path is tried before any work, so a bad one fails at once, naming its key (the
// model and the run directory's files are rank 0's, checkpoints every rank's).
void check_outputs(const skew::wide::OutputOptions& output, int rank) {
  if (rank == 0) skew::require_writable_file("output.model", output.model);
  skew::require_writable_dir("output.checkpoint_dir", output.checkpoint_dir);
}
}  // namespace

int main(int argc, char** argv) {
  // --predict is a mode switch, not a schema key: take it out before parsing.
  std::vector<char*> args(argv, argv + argc);
  const auto it = std::find_if(args.begin(), args.end(), [](char* a) { return std::strcmp(a, "--predict") == 0; });
  const bool predict_mode = it != args.end();
  if (predict_mode) args.erase(it);
  // So is --export=FILE.
  std::string export_path;
  const auto ex = std::find_if(args.begin(), args.end(), [](char* a) { return std::strncmp(a, "--export=", 9) == 0; });
  if (ex != args.end()) {
    export_path = *ex + 9;
    args.erase(ex);
  }
  const int count = int(args.size());
  args.push_back(nullptr);  // MPI_Init expects argv[argc] == NULL
  const skew::Schema schema = skew::wide::wide_train_schema();
  // Each rank binds GPU local_rank % count when GPUs are visible (train.device = cuda on several
  // ranks: one GPU each).
  return skew::comm::run_main(count, args.data(), /*bind_gpu=*/true, [&](skew::comm::Runtime& rt) {
    const skew::Config config = skew::Config::parse(schema, count, args.data());
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    // --predict and --export train nothing: no run directory.
    const skew::wide::WideOptions options = skew::wide::wide_train_options(config);
    if (!export_path.empty()) {
      if (rt.world_rank == 0) skew::wide::export_data(options.data, export_path);
      return 0;
    }
    if (predict_mode) {
      skew::wide::predict(options, *rt.world);
      return 0;
    }
    const skew::RunDir run(config, *rt.world);
    const skew::wide::WideOptions train_options = skew::wide::wide_train_options(config, run.path());
    check_outputs(train_options.output, rt.world_rank);
    const skew::Json summary = skew::wide::fit(train_options, rt.world);
    run.announce_end();  // fit wrote summary.json there
    if (rt.world_rank == 0) skew::print_summary(summary);
    return 0;
  });
}
