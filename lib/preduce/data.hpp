// Classification data for preduce_train: MNIST as fetched by scripts/fetch_data.sh mnist (CSV:
// label,feature...) or a generated set of Gaussian clusters (the embedded default), split into
// per-worker shards (worker i takes rows i, i+N, ...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/labelled_csv.hpp"

namespace skew::preduce {

// Dataset and load_csv live in core/ (moe_train's Swin reads the same MNIST files).
using skew::Dataset;
using skew::load_csv;

// `classes` Gaussian clusters in `dim` dimensions: centers ~ N(0, separation^2 / dim) per
// coordinate, points = center + N(0, 1). Deterministic in seed; stream separates train/test.
Dataset make_clusters(int rows, int dim, int classes, double separation, std::uint64_t seed, std::uint64_t stream);

Dataset shard(const Dataset& all, int worker, int num_workers);

// A minibatch drawn with replacement: batch i of worker w is a pure function of (seed, w, i).
class BatchSampler {
 public:
  BatchSampler(const Dataset& data, int batch, std::uint64_t seed, int worker);
  // Fills x (batch x dim) and labels for step `step`.
  void fill(std::int64_t step, std::vector<float>& x, std::vector<int>& labels) const;
  int batch() const { return batch_; }

 private:
  const Dataset* data_;
  int batch_;
  std::uint64_t seed_;
  int worker_;
};

}  // namespace skew::preduce
