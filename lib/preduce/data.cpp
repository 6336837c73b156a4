#include "lib/preduce/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lib/core/error.hpp"
#include "lib/core/rng.hpp"

namespace skew::preduce {

namespace {
constexpr long kMaxLabel = 65535;
}  // namespace

namespace {
// Test data is read against the training data (`like`): a test row of another width cannot be
// fed to the model, and a test label at or past like->classes has no output to be scored on.
Dataset read_csv(const std::string& path, const Dataset* like) {
  std::ifstream in(path);
  SKEW_CHECK(in, "cannot open " << path << " (fetch MNIST with scripts/fetch/mnist.sh data/mnist)");
  Dataset d;
  if (like) d.dim = like->dim;
  std::string line;
  int line_no = 0, max_label = -1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const char* p = line.c_str();
    char* end = nullptr;
    const long label = std::strtol(p, &end, 10);
    SKEW_CHECK(end != p && label >= 0, path << ":" << line_no << ": expected a non-negative integer label");
    // classes = max label + 1 sizes the output layer: a label past this is a corrupt file.
    if (label > kMaxLabel)
      SKEW_THROW(path << ":" << line_no << ": label " << std::string(p, static_cast<std::size_t>(end - p))
                      << " is out of range [0, " << kMaxLabel << "]");
    if (like && label >= like->classes)
      SKEW_THROW(path << ":" << line_no << ": label " << label << " is not among the " << like->classes
                      << " classes of the training data (labels 0.." << like->classes - 1 << ")");
    d.y.push_back(static_cast<int>(label));
    max_label = std::max(max_label, static_cast<int>(label));
    int fields = 0;
    p = end;
    while (*p == ',') {
      ++p;
      const float v = std::strtof(p, &end);
      SKEW_CHECK(end != p, path << ":" << line_no << ": bad number in field " << fields + 2);
      // strtof reads "nan", "inf" and turns 1e400 into inf: such a pixel would only surface
      // later as a diverged loss, far from the line at fault.
      SKEW_CHECK(std::isfinite(v), path << ":" << line_no << ": field " << fields + 2 << " '"
                                        << std::string(p, static_cast<std::size_t>(end - p))
                                        << "' is not a finite float");
      d.x.push_back(v);
      ++fields;
      p = end;
    }
    SKEW_CHECK(*p == '\0' || *p == '\r', path << ":" << line_no << ": unexpected text after field " << fields + 1);
    if (d.dim == 0) d.dim = fields;
    SKEW_CHECK(fields == d.dim && fields > 0,
               path << ":" << line_no << ": " << fields << " features, expected " << d.dim
                    << (like ? " (the width of the training data)" : ""));
  }
  SKEW_CHECK(!d.y.empty(), path << ": no rows");
  d.classes = like ? like->classes : max_label + 1;
  return d;
}
}  // namespace

Dataset load_csv(const std::string& path) { return read_csv(path, nullptr); }

Dataset load_csv(const std::string& path, const Dataset& train) { return read_csv(path, &train); }

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
