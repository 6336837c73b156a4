// moe_train: trains a GPT-style MoE language model with experts spread over the MPI ranks.
//   mpirun -np 2 moe_train --config configs/moe.ini [--moe.policy=deepspeed ...]
#include <iostream>

#include "lib/core/log.hpp"
#include "lib/moe/trainer.hpp"
#include "mpi/runtime.hpp"

int main(int argc, char** argv) {
  return skew::comm::run_main(argc, argv, false, [&](skew::comm::Runtime& rt) {
    const skew::Schema schema = skew::moe::moe_train_schema();
    const skew::Config config = skew::Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    const skew::Json summary = skew::moe::train(config, *rt.world);
    if (rt.world_rank == 0) skew::print_summary(summary);
    return 0;
  });
}
