#include "core/labelled_csv.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.hpp"

namespace skew {

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
    SKEW_CHECK(fields == d.dim && fields > 0, path << ":" << line_no << ": " << fields << " features, expected "
                                                   << d.dim << (like ? " (the width of the training data)" : ""));
  }
  SKEW_CHECK(!d.y.empty(), path << ": no rows");
  d.classes = like ? like->classes : max_label + 1;
  return d;
}
}  // namespace

Dataset load_csv(const std::string& path) {
  return read_csv(path, nullptr);
}

Dataset load_csv(const std::string& path, const Dataset& train) {
  return read_csv(path, &train);
}

}  // namespace skew
