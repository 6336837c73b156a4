// The data-parallel check shared by the CPU and the CUDA MPI tests of wide training: the ranks
// of MPI_COMM_WORLD with local batches B/N must end with the same model, loss and AUC as one
// rank stepping through the same global batches (each the concatenation of the ranks' shares).
#pragma once
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>

#include "lib/wide/trainer.hpp"
#include "mpi/mpi_process_group.hpp"

namespace skew::wide::testing {

// `tolerance`: relative, on parameters and AUC (a tenth of it on the loss); float atomics on a
// GPU sum in a different order than the CPU. `hash_bits` > 0: the generator's ids are hashed into
// a model of 2^hash_bits rows (hashed_feature_row), as data.hash_bits reads them.
inline void check_data_parallel_equals_one_rank(kernels::WideKind kind, const TrainOptions& parallel_options,
                                                const TrainOptions& single_options, double tolerance = 1e-4,
                                                int hash_bits = 0) {
  auto world = std::make_shared<comm::MpiProcessGroup>(MPI_COMM_WORLD);
  const int P = world->size(), r = world->rank();
  const std::int64_t rows = 768, global_batch = 128, local_batch = global_batch / P;
  const auto spec = parse_synthetic_spec("synthetic:criteo?features=5000&alpha=1.2&seed=4");
  const std::int64_t features = hash_bits > 0 ? std::int64_t(1) << hash_bits : 5000;
  const auto generate = [&](std::int64_t begin, std::int64_t end) {
    SparseDataset d = generate_synthetic(spec, begin, end);
    if (hash_bits > 0)
      for (auto& i : d.index) i = hashed_feature_row(i, hash_bits);
    d.num_features = features;
    return d;
  };
  const SparseDataset mine = generate(rows * r / P, rows * (r + 1) / P);
  // One rank's view: global batch s = rank 0's share s, rank 1's share s, ...
  SparseDataset serial;
  serial.num_features = features;
  serial.num_fields = 39;
  const std::int64_t steps = rows / global_batch;
  for (std::int64_t s = 0; s < steps; ++s)
    for (int q = 0; q < P; ++q) {
      const std::int64_t a = rows * q / P + s * local_batch;
      const SparseDataset part = generate(a, a + local_batch);
      for (std::int64_t i = 0; i < part.rows(); ++i)
        serial.append_row(&part.index[std::size_t(part.row_ptr[i])], &part.field[std::size_t(part.row_ptr[i])],
                          &part.value[std::size_t(part.row_ptr[i])], std::size_t(part.row_ptr[i + 1] - part.row_ptr[i]),
                          part.label[std::size_t(i)]);
    }
  const kernels::WideShape shape{kind, features, 39, kind == kernels::WideKind::LR ? 0 : 4};
  WideTrainer parallel(WideModel::create(shape, 3, 0.05f), parallel_options, world);
  WideTrainer single(WideModel::create(shape, 3, 0.05f), single_options);
  double loss_parallel = 0, loss_single = 0;
  for (std::int64_t s = 0; s < steps; ++s) {
    loss_parallel = parallel.step(mine, s * local_batch, (s + 1) * local_batch).loss;
    loss_single = single.step(serial, s * global_batch, (s + 1) * global_batch).loss;
  }
  CHECK(loss_parallel == Approx(loss_single).epsilon(tolerance / 10));
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < single.parameters().size(); ++i) {
    worst = std::max(worst, double(std::fabs(parallel.parameters()[i] - single.parameters()[i])));
    largest = std::max(largest, double(std::fabs(single.parameters()[i])));
  }
  CHECK(largest > 0.05);
  CHECK(worst < tolerance * largest);
  const Evaluation e_parallel = parallel.evaluate(mine), e_single = single.evaluate(serial);
  CHECK(e_parallel.samples == rows);
  CHECK(e_parallel.auc == Approx(e_single.auc).epsilon(tolerance));
}

}  // namespace skew::wide::testing
