// The CUDA twins of Swin's data movement (kernels/moe_swin.hpp) against the CPU twins on the
// same random inputs, odd channels and several images (skipped without a GPU). Every op moves
// or adds values in the CPU twin's order, so the results are equal, not close. The CPU twins
// are checked against float64 references in tests/unit/test_moe_swin_ops.cpp.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_swin.hpp"
#include "tests/cuda/tensor_transfer.hpp"
#include "tests/cuda_skip.hpp"

using namespace skew;
namespace km = skew::kernels::moe;
using skew::test::on_gpu;
using skew::test::on_host;

namespace {

// Three 14 x 21 maps of 5 channels: windows of 7 (shifted by 3), patches of 7, merged once after
// cropping to an even 14 x 20.
constexpr int kImages = 3, kHeight = 14, kWidth = 21, kChannels = 5, kWindow = 7, kShift = 3, kHeads = 3;

std::vector<float> normal(std::size_t n, std::uint64_t stream) {
  Rng rng(53, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

std::size_t map_size(int width) {
  return std::size_t(kImages) * kHeight * width * kChannels;
}

}  // namespace

TEST_CASE("CUDA window partition and reverse with the cyclic shift equal the CPU ones", "[moe][cuda][swin]") {
  SKEW_REQUIRE_GPU();
  const std::vector<float> x = normal(map_size(kWidth), 1);
  for (int shift : {0, kShift}) {
    INFO("shift " << shift);
    std::vector<float> want(x.size()), back(x.size());
    km::window_partition<float>(Device::Host, kImages, kHeight, kWidth, kChannels, kWindow, shift, x.data(),
                                want.data());
    Tensor in = on_gpu(x), out = on_gpu(std::vector<float>(x.size())), rev = on_gpu(std::vector<float>(x.size()));
    km::window_partition<float>(Device::Cuda, kImages, kHeight, kWidth, kChannels, kWindow, shift, in.data<float>(),
                                out.data<float>());
    CHECK(on_host<float>(out) == want);
    km::window_reverse<float>(Device::Cuda, kImages, kHeight, kWidth, kChannels, kWindow, shift, out.data<float>(),
                              rev.data<float>());
    CHECK(on_host<float>(rev) == x);
  }
}

TEST_CASE("CUDA shifted-window mask and relative position bias equal the CPU ones", "[moe][cuda][swin]") {
  SKEW_REQUIRE_GPU();
  const int N = kWindow * kWindow, windows = (kHeight / kWindow) * (kWidth / kWindow);
  std::vector<float> mask(std::size_t(windows) * N * N);
  km::window_mask<float>(Device::Host, kHeight, kWidth, kWindow, kShift, mask.data());
  Tensor gpu_mask = on_gpu(std::vector<float>(mask.size()));
  km::window_mask<float>(Device::Cuda, kHeight, kWidth, kWindow, kShift, gpu_mask.data<float>());
  CHECK(on_host<float>(gpu_mask) == mask);

  const std::size_t rows = std::size_t(2 * kWindow - 1) * (2 * kWindow - 1);
  const std::vector<float> table = normal(rows * kHeads, 2);
  std::vector<float> bias(std::size_t(kHeads) * N * N);
  km::relative_bias<float>(Device::Host, kWindow, kHeads, table.data(), bias.data());
  Tensor gpu_table = on_gpu(table), gpu_bias = on_gpu(std::vector<float>(bias.size()));
  km::relative_bias<float>(Device::Cuda, kWindow, kHeads, gpu_table.data<float>(), gpu_bias.data<float>());
  CHECK(on_host<float>(gpu_bias) == bias);

  // The backward accumulates onto a non-zero gradient, in the CPU twin's order: equal sums.
  const int all_windows = kImages * windows;
  const std::vector<float> dlogits = normal(std::size_t(all_windows) * kHeads * N * N, 3);
  std::vector<float> dtable = normal(table.size(), 4);
  Tensor gpu_dlogits = on_gpu(dlogits), gpu_dtable = on_gpu(dtable);
  km::relative_bias_backward<float>(Device::Host, all_windows, kWindow, kHeads, dlogits.data(), dtable.data());
  km::relative_bias_backward<float>(Device::Cuda, all_windows, kWindow, kHeads, gpu_dlogits.data<float>(),
                                    gpu_dtable.data<float>());
  CHECK(on_host<float>(gpu_dtable) == dtable);
}

TEST_CASE("CUDA patch embedding and patch merging equal the CPU ones", "[moe][cuda][swin]") {
  SKEW_REQUIRE_GPU();
  const std::vector<float> images = normal(map_size(kWidth), 5);
  std::vector<float> patches(images.size());
  km::patchify<float>(Device::Host, kImages, kHeight, kWidth, kChannels, kWindow, images.data(), patches.data());
  Tensor gpu_images = on_gpu(images), gpu_patches = on_gpu(std::vector<float>(patches.size()));
  km::patchify<float>(Device::Cuda, kImages, kHeight, kWidth, kChannels, kWindow, gpu_images.data<float>(),
                      gpu_patches.data<float>());
  CHECK(on_host<float>(gpu_patches) == patches);

  const int even_width = kWidth - 1;
  const std::vector<float> x = normal(map_size(even_width), 6);
  std::vector<float> merged(x.size());
  km::merge_gather<float>(Device::Host, kImages, kHeight, even_width, kChannels, x.data(), merged.data());
  Tensor gpu_x = on_gpu(x), gpu_merged = on_gpu(std::vector<float>(x.size())),
         gpu_back = on_gpu(std::vector<float>(x.size()));
  km::merge_gather<float>(Device::Cuda, kImages, kHeight, even_width, kChannels, gpu_x.data<float>(),
                          gpu_merged.data<float>());
  CHECK(on_host<float>(gpu_merged) == merged);
  km::merge_scatter<float>(Device::Cuda, kImages, kHeight, even_width, kChannels, gpu_merged.data<float>(),
                           gpu_back.data<float>());
  CHECK(on_host<float>(gpu_back) == x);
}
