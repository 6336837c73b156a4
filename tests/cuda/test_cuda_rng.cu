// The Philox RNG draws the same numbers on the device as on the host for the same
// (seed, stream, index): raw words and uniforms bit for bit, normals to float rounding (the
// device's logf/cosf may differ from the host's in the last bits).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/rng.hpp"
#include "tests/cuda_skip.hpp"

namespace {

// Thread i starts at offset 4*i of stream `stream` and draws a word, a uniform and a normal
// (normal() takes two words): four consecutive draws per thread.
__global__ void draw_kernel(std::uint64_t seed, std::uint64_t stream, int n, std::uint32_t* words, float* uniforms,
                            float* normals) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  skew::Rng rng(seed, stream, 4ull * static_cast<std::uint64_t>(i));
  words[i] = rng.next_u32();
  uniforms[i] = rng.uniform();
  normals[i] = rng.normal();
}

}  // namespace

TEST_CASE("cuda rng: device draws equal host draws", "[cuda][rng]") {
  SKEW_REQUIRE_GPU();
  const int n = 4096;
  std::uint32_t* words = nullptr;
  float *uniforms = nullptr, *normals = nullptr;
  SKEW_CUDA_CHECK(cudaMalloc(&words, n * sizeof(std::uint32_t)));
  SKEW_CUDA_CHECK(cudaMalloc(&uniforms, n * sizeof(float)));
  SKEW_CUDA_CHECK(cudaMalloc(&normals, n * sizeof(float)));
  draw_kernel<<<(n + 255) / 256, 256>>>(2024, 9, n, words, uniforms, normals);
  SKEW_CUDA_CHECK(cudaGetLastError());
  std::vector<std::uint32_t> w(n);
  std::vector<float> u(n), g(n);
  SKEW_CUDA_CHECK(cudaMemcpy(w.data(), words, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  SKEW_CUDA_CHECK(cudaMemcpy(u.data(), uniforms, n * sizeof(float), cudaMemcpyDeviceToHost));
  SKEW_CUDA_CHECK(cudaMemcpy(g.data(), normals, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(words);
  cudaFree(uniforms);
  cudaFree(normals);
  for (int i = 0; i < n; ++i) {
    skew::Rng rng(2024, 9, 4ull * static_cast<std::uint64_t>(i));
    REQUIRE(w[i] == rng.next_u32());
    REQUIRE(u[i] == rng.uniform());
    const float want = rng.normal();
    REQUIRE(std::fabs(g[i] - want) <= 1e-5f * (1.0f + std::fabs(want)));
  }
}
