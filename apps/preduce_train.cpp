// preduce_train: data-parallel training under skewed worker speed. Real workers under mpirun,
// or --simulate for N virtual workers on a virtual clock. See configs/preduce.ini.
#include <iostream>

#include "apps/preduce_train_options.hpp"
#include "apps/run_dir.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/runtime.hpp"

namespace {
// Every output path is tried before any work, so a bad one fails at once, naming its key. With
// --simulate rank 0 alone runs (and writes no metrics).
void check_outputs(const skew::preduce::TrainOptions& opt, int rank) {
  if (opt.simulate && rank != 0) return;
  if (!opt.simulate && !opt.metrics.empty())
    skew::require_writable_file("output.metrics", skew::preduce::metrics_path(opt.metrics, rank));
  if (rank == 0) skew::require_writable_file("output.curve", opt.curve);
  skew::require_writable_dir("output.checkpoint_dir", opt.checkpoint_dir);
}
}  // namespace

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::preduce::make_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    skew::preduce::read_options(config);  // every key's rules, before a run directory is made
    const skew::RunDir run(config, *rt.world);
    const skew::preduce::TrainOptions opt = skew::preduce::read_options(config, run.path());
    check_outputs(opt, rt.world_rank);
    // A rank whose path failed has thrown; the others wait here for its abort instead of starting
    // to train (and writing their own metrics) first.
    rt.world->barrier();
    std::optional<skew::preduce::RunResult> result;
    if (opt.simulate) {
      if (rt.world_rank == 0) result = skew::preduce::simulate(opt);
    } else {
      result = skew::preduce::train_mpi(rt.world, opt);
    }
    if (!result) return 0;  // the curve file is written by the run
    run.finish(result->summary);
    skew::print_summary(result->summary);
    return 0;
  });
}
