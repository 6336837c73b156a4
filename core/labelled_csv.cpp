#include "core/labelled_csv.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace skew {

namespace {
// Labels lie in [0, classes). Test data is read against the training data (`like`): a test row
// of another width cannot be fed to the model, and a test label at or past like->classes has no
// output to be scored on.
Dataset read_csv(const std::string& path, int classes, const Dataset* like) {
  errno = 0;
  std::ifstream in(path);
  SKEW_CHECK(in, "cannot open " << path << ": " << std::strerror(errno ? errno : ENOENT));
  Dataset d;
  if (like) d.dim = like->dim, classes = like->classes;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const char* p = line.c_str();
    char* end = nullptr;
    const long label = std::strtol(p, &end, 10);
    SKEW_CHECK(end != p && label >= 0, path << ":" << line_no << ": expected a non-negative integer label");
    if (label >= classes)
      SKEW_THROW(path << ":" << line_no << ": label " << std::string(p, static_cast<std::size_t>(end - p))
                      << " is not among the " << classes << " classes of "
                      << (like ? "the training data" : "the data set") << " (labels 0.." << classes - 1 << ")");
    d.y.push_back(static_cast<int>(label));
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
    SKEW_CHECK(fields == d.dim && fields > 0, path << ":" << line_no << ": " << fields << " features, expected "
                                                   << d.dim << (like ? " (the width of the training data)" : ""));
  }
  SKEW_CHECK(!d.y.empty(), path << ": no rows");
  d.classes = classes;
  return d;
}
}  // namespace

Dataset load_csv(const std::string& path, int classes) {
  SKEW_CHECK(classes >= 1, "program error: " << path << " read with " << classes << " classes");
  return read_csv(path, classes, nullptr);
}

Dataset load_csv(const std::string& path, const Dataset& train) {
  return read_csv(path, train.classes, &train);
}

LabelledSplits load_mnist_csv(const std::string& dir) {
  const std::string train = dir + "/train.csv", test = dir + "/test.csv";
  for (const std::string& path : {train, test}) {
    std::error_code ec;
    SKEW_CHECK(std::filesystem::exists(path, ec),
               path << " does not exist: fetch MNIST with scripts/fetch_data.sh mnist (it writes data/mnist/"
                       "train.csv and test.csv), or point data.mnist_dir at a directory holding both");
  }
  LabelledSplits out{load_csv(train, kMnistClasses), {}};
  out.test = load_csv(test, out.train);
  return out;
}

}  // namespace skew
