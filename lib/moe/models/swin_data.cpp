#include "lib/moe/models/swin_data.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/labelled_csv.hpp"
#include "core/rng.hpp"

namespace skew::moe {

namespace {
ImageSet from_rows(const Dataset& rows, const std::string& path) {
  ImageSet set;
  set.side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(rows.dim))));
  SKEW_CHECK(set.side * set.side == rows.dim,
             path << ": rows of " << rows.dim << " pixels are not square one-channel images");
  set.classes = rows.classes;
  set.pixels = rows.x;
  set.labels.assign(rows.y.begin(), rows.y.end());
  set.source = path;
  return set;
}
}  // namespace

ImageSplits load_mnist(const std::string& dir) {
  const LabelledSplits mnist = load_mnist_csv(dir);
  return {from_rows(mnist.train, dir + "/train.csv"), from_rows(mnist.test, dir + "/test.csv")};
}

ImageSet generated_digits(int count, std::uint64_t seed, std::uint64_t stream) {
  constexpr int kClasses = 10, kCoarse = 7, kScale = 4, kSide = kCoarse * kScale, kMaxShift = 2;
  SKEW_CHECK(count > 0, "a generated image set needs at least one image, not " << count);
  std::vector<float> patterns(static_cast<std::size_t>(kClasses) * kCoarse * kCoarse);
  Rng pattern_rng(seed, 0x5e1f);
  for (auto& p : patterns) p = pattern_rng.uniform() < 0.4f ? 1.0f : 0.0f;
  ImageSet set;
  set.side = kSide, set.classes = kClasses;
  set.source = "the generated image set (data.generated_images)";
  set.pixels.resize(static_cast<std::size_t>(count) * kSide * kSide);
  for (int i = 0; i < count; ++i) {
    Rng rng(seed, (1ULL << 42) + stream, static_cast<std::uint64_t>(i) * 4096);
    const int label = static_cast<int>(rng.below(kClasses));
    const int dy = static_cast<int>(rng.below(2 * kMaxShift + 1)) - kMaxShift,
              dx = static_cast<int>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
    set.labels.push_back(label);
    float* img = set.pixels.data() + static_cast<std::size_t>(i) * kSide * kSide;
    for (int y = 0; y < kSide; ++y)
      for (int x = 0; x < kSide; ++x) {
        const int sy = y - dy, sx = x - dx;
        const bool inside = sy >= 0 && sy < kSide && sx >= 0 && sx < kSide;
        const float ink =
            inside ? patterns[(static_cast<std::size_t>(label) * kCoarse + sy / kScale) * kCoarse + sx / kScale] : 0.f;
        img[y * kSide + x] = ink + 0.3f * rng.normal();
      }
  }
  return set;
}

}  // namespace skew::moe
