#include "lib/preduce/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace skew::preduce {

Dataset make_clusters(int rows, int dim, int classes, double separation, std::uint64_t seed, std::uint64_t stream) {
  SKEW_CHECK(rows > 0 && dim > 0 && classes >= 2, "generated data needs rows, dim > 0 and classes >= 2");
  Dataset d;
  d.dim = dim;
  d.classes = classes;
  Rng center_rng(seed, 0xc3);
  std::vector<float> centers(static_cast<std::size_t>(classes) * dim);
  const float scale = static_cast<float>(separation / std::sqrt(static_cast<double>(dim)));
  for (float& c : centers) c = scale * center_rng.normal();
  Rng rng(seed, 0xd0 + stream);
  d.x.resize(static_cast<std::size_t>(rows) * dim);
  d.y.resize(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const int label = static_cast<int>(rng.below(static_cast<std::uint64_t>(classes)));
    d.y[static_cast<std::size_t>(r)] = label;
    for (int j = 0; j < dim; ++j)
      d.x[static_cast<std::size_t>(r) * dim + j] = centers[static_cast<std::size_t>(label) * dim + j] + rng.normal();
  }
  return d;
}

Dataset shard(const Dataset& all, int worker, int num_workers) {
  SKEW_CHECK(worker >= 0 && worker < num_workers, "worker " << worker << " of " << num_workers);
  SKEW_CHECK(all.rows() >= num_workers, all.rows() << " rows cannot be shared by " << num_workers << " workers");
  Dataset s;
  s.dim = all.dim;
  s.classes = all.classes;
  for (int r = worker; r < all.rows(); r += num_workers) {
    s.y.push_back(all.y[static_cast<std::size_t>(r)]);
    s.x.insert(s.x.end(), all.row(r), all.row(r) + all.dim);
  }
  return s;
}

BatchSampler::BatchSampler(const Dataset& data, int batch, std::uint64_t seed, int worker)
    : data_(&data), batch_(batch), seed_(seed), worker_(worker) {
  SKEW_CHECK(batch >= 1, "train.batch must be >= 1, got " << batch);
}

void BatchSampler::fill(std::int64_t step, std::vector<float>& x, std::vector<int>& labels) const {
  Rng rng(seed_, 0xba7c400000ull + static_cast<std::uint64_t>(worker_), static_cast<std::uint64_t>(step) * 2 * batch_);
  const auto dim = static_cast<std::size_t>(data_->dim);
  x.resize(static_cast<std::size_t>(batch_) * dim);
  labels.resize(static_cast<std::size_t>(batch_));
  for (int i = 0; i < batch_; ++i) {
    const int r = static_cast<int>(rng.below(static_cast<std::uint64_t>(data_->rows())));
    labels[static_cast<std::size_t>(i)] = data_->y[static_cast<std::size_t>(r)];
    std::copy(data_->row(r), data_->row(r) + dim, x.data() + static_cast<std::size_t>(i) * dim);
  }
}

}  // namespace skew::preduce
