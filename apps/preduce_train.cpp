// preduce_train: data-parallel training under skewed worker speed. Real workers under mpirun,
// or --simulate for N virtual workers on a virtual clock. See configs/preduce.ini.
#include <iostream>

#include "apps/preduce_train_options.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/runtime.hpp"

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::preduce::make_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    const skew::preduce::TrainOptions opt = skew::preduce::read_options(config);
    std::optional<skew::preduce::RunResult> result;
    if (opt.simulate) {
      if (rt.world_rank == 0) result = skew::preduce::simulate(opt);
    } else {
      result = skew::preduce::train_mpi(rt.world, opt);
    }
    if (result) skew::print_summary(result->summary);  // the curve file is written by the run
    return 0;
  });
}
