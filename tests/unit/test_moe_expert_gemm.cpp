// The grouped expert GEMMs of kernels/moe_expert.hpp (rows form, fp32 and bf16 operands, with the
// transposed weight of the backward and beta = 1 onto a bias; weight-gradient form) against
// float64 loops written here, on odd shapes with an expert that receives no rows.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "kernels/moe_expert.hpp"

using namespace skew;
namespace km = skew::kernels::moe;

namespace {

constexpr int kGroups = 4;
const std::vector<std::int64_t> kOffsets = {0, 5, 5, 12, 13};  // expert 1 receives no rows
constexpr std::int64_t kRows = 13;

std::vector<float> random_floats(std::size_t n, std::uint64_t stream) {
  Rng rng(71, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

double rounded(float x, bool bf16) {
  return bf16 ? static_cast<double>(round_to_bf16(x)) : static_cast<double>(x);
}

// c_g = a_g op(b[g]) + beta c_g in float64 (inputs rounded to bf16 first when asked).
std::vector<double> rows_reference(bool trans_b, int n, int k, const std::vector<float>& a,
                                   const std::vector<std::vector<float>>& b, float beta, const std::vector<float>& c0,
                                   bool bf16) {
  std::vector<double> c(c0.begin(), c0.end());
  for (int g = 0; g < kGroups; ++g)
    for (std::int64_t i = kOffsets[g]; i < kOffsets[g + 1]; ++i)
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int p = 0; p < k; ++p)
          acc += rounded(a[i * k + p], bf16) * rounded(trans_b ? b[g][j * k + p] : b[g][p * n + j], bf16);
        c[i * n + j] = acc + beta * c[i * n + j];
      }
  return c;
}

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tolerance) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(tolerance));
}

std::vector<std::vector<float>> random_weights(std::size_t each, std::uint64_t stream) {
  std::vector<std::vector<float>> w;
  for (int g = 0; g < kGroups; ++g) w.push_back(random_floats(each, stream + static_cast<std::uint64_t>(g)));
  return w;
}

}  // namespace

TEST_CASE("grouped expert GEMM (fp32 and bf16 operands) matches float64, plain and transposed weights", "[moe]") {
  for (bool trans_b : {false, true}) {
    for (float beta : {0.f, 1.f}) {
      const int n = 7, k = 9;
      const auto a = random_floats(kRows * k, 1), c0 = random_floats(kRows * n, 2);
      const auto b = random_weights(static_cast<std::size_t>(k) * n, 10);
      std::vector<const float*> bp;
      for (const auto& m : b) bp.push_back(m.data());
      std::vector<float> c = c0;
      km::grouped_gemm(Device::Host, kGroups, kOffsets.data(), trans_b, n, k, a.data(), bp.data(), beta, c.data());
      require_close(c, rows_reference(trans_b, n, k, a, b, beta, c0, false), 1e-4);

      std::vector<std::uint16_t> a16(a.size());
      km::to_bf16_bits(Device::Host, a.data(), static_cast<std::int64_t>(a.size()), a16.data());
      std::vector<std::vector<std::uint16_t>> b16;
      std::vector<const std::uint16_t*> b16p;
      for (const auto& m : b) {
        b16.emplace_back(m.size());
        km::to_bf16_bits(Device::Host, m.data(), static_cast<std::int64_t>(m.size()), b16.back().data());
      }
      for (const auto& m : b16) b16p.push_back(m.data());
      c = c0;
      km::grouped_gemm_bf16_operands(Device::Host, kGroups, kOffsets.data(), trans_b, n, k, a16.data(), b16p.data(),
                                     beta, c.data());
      require_close(c, rows_reference(trans_b, n, k, a, b, beta, c0, true), 1e-4);
    }
  }
}

TEST_CASE("grouped weight-gradient GEMM accumulates a_g^T b_g per expert, fp32 and bf16", "[moe]") {
  const int m = 5, n = 11;
  const auto a = random_floats(kRows * m, 3), b = random_floats(kRows * n, 4);
  for (bool bf16 : {false, true}) {
    auto c = random_weights(static_cast<std::size_t>(m) * n, 20);
    std::vector<std::vector<double>> want;
    for (int g = 0; g < kGroups; ++g) {
      want.emplace_back(c[g].begin(), c[g].end());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
          for (std::int64_t r = kOffsets[g]; r < kOffsets[g + 1]; ++r)
            want[g][i * n + j] += rounded(a[r * m + i], bf16) * rounded(b[r * n + j], bf16);
    }
    std::vector<float*> cp;
    for (auto& x : c) cp.push_back(x.data());
    km::grouped_gemm_weight_grads(Device::Host, bf16, kGroups, kOffsets.data(), m, n, a.data(), b.data(), cp.data());
    for (int g = 0; g < kGroups; ++g) require_close(c[g], want[g], 1e-4);
  }
}
