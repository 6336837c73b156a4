// Images for the Swin family: MNIST as scripts/fetch_data.sh mnist writes it (read by core's
// labelled CSV reader, as preduce_train reads it), or a generated digit-like set for runs and
// tests without the download.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace skew::moe {

struct ImageSet {
  int side = 0, channels = 1, classes = 0;
  std::vector<float> pixels;         // [count, side, side, channels]
  std::vector<std::int32_t> labels;  // [count]
  std::string source;                // for errors and the summary
  int count() const { return static_cast<int>(labels.size()); }
  std::size_t image_size() const { return static_cast<std::size_t>(side) * side * channels; }
  const float* image(int i) const { return pixels.data() + static_cast<std::size_t>(i) * image_size(); }
};

// DIR/train.csv and DIR/test.csv (the held-out split): square one-channel images, rows of
// "label,pixel...". Errors name the file.
struct ImageSplits {
  ImageSet train, held_out;
};
ImageSplits load_mnist(const std::string& dir);

// `count` 28 x 28 images of 10 classes: class c is a fixed random 7 x 7 binary pattern (from
// `seed`) scaled up 4x, each image that pattern moved by up to 2 pixels on each axis plus
// N(0, 0.3^2) pixel noise. Deterministic in (seed, stream); streams separate the splits.
ImageSet generated_digits(int count, std::uint64_t seed, std::uint64_t stream);

}  // namespace skew::moe
