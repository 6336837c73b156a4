// Labelled rows from CSV, "label,f1,...,fd" per line: MNIST as scripts/fetch_data.sh mnist writes
// it (a digit and 784 pixels in [0, 1]), read by preduce_train's classifiers and moe_train's Swin.
#pragma once
#include <string>
#include <vector>

namespace skew {

struct Dataset {
  int dim = 0, classes = 0;
  std::vector<float> x;  // rows x dim
  std::vector<int> y;    // rows
  int rows() const { return static_cast<int>(y.size()); }
  const float* row(int r) const { return x.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(dim); }
};

// MNIST's declared classes: the digits 0-9.
inline constexpr int kMnistClasses = 10;

// Reads "label,f1,...,fd" lines of finite numbers; every line must have the same d; labels in
// [0, classes), the data set's declared count (not the largest label seen: a stray 10 or 200
// would widen the output layer silently). Errors name the file and line.
Dataset load_csv(const std::string& path, int classes);
// Reads test data for a model trained on `train`: every line must have train.dim features and
// a label below train.classes; classes = train.classes. Errors name the file and line.
Dataset load_csv(const std::string& path, const Dataset& train);

struct LabelledSplits {
  Dataset train, test;
};
// MNIST as scripts/fetch_data.sh mnist writes it: DIR/train.csv and DIR/test.csv, kMnistClasses
// classes. A missing file is an error naming it and that command.
LabelledSplits load_mnist_csv(const std::string& dir);

}  // namespace skew
