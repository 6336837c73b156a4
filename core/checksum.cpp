#include "core/checksum.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace skew {

namespace {
// Reflected CRC-32C polynomial 0x1EDC6F41: the byte-at-a-time table, built once.
std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

template <typename Bits>
Bits load_bits(const void* base, std::int64_t i) {
  Bits b;
  std::memcpy(&b, static_cast<const char*>(base) + i * static_cast<std::int64_t>(sizeof(Bits)), sizeof b);
  return b;
}
}  // namespace

std::uint32_t crc32c_table_driven(const void* data, std::size_t bytes, std::uint32_t crc) {
  static const std::array<std::uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
namespace {
// SSE4.2's crc32 instruction computes CRC-32C itself, 8 bytes a step: the table-driven loop ran
// at ~450 MB/s, too slow to verify a large data cache on every load. The instruction's latency
// is three times its issue interval, so a long buffer is summed as three interleaved streams of
// kStreamBytes each, joined by shifting a stream's register over the bytes after it.
constexpr std::size_t kStreamBytes = 4096;

__attribute__((target("sse4.2"))) std::uint64_t crc_register_zeros(std::uint64_t c, std::size_t words) {
  for (std::size_t i = 0; i < words; ++i) c = __builtin_ia32_crc32di(c, 0);
  return c;
}

// The register after kStreamBytes zero bytes, as a function of the register before: linear over
// GF(2), so one table lookup a byte of the register (built from the 32 single-bit registers).
struct StreamShift {
  std::array<std::array<std::uint32_t, 256>, 4> table{};
  StreamShift() {
    std::array<std::uint32_t, 32> bit{};
    for (int b = 0; b < 32; ++b)
      bit[std::size_t(b)] = static_cast<std::uint32_t>(crc_register_zeros(std::uint64_t(1) << b, kStreamBytes / 8));
    for (std::size_t k = 0; k < 4; ++k)
      for (std::uint32_t v = 0; v < 256; ++v)
        for (int b = 0; b < 8; ++b)
          if (v >> b & 1u) table[k][v] ^= bit[k * 8 + std::size_t(b)];
  }
  std::uint32_t operator()(std::uint32_t c) const {
    return table[0][c & 0xffu] ^ table[1][c >> 8 & 0xffu] ^ table[2][c >> 16 & 0xffu] ^ table[3][c >> 24];
  }
};

__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(const void* data, std::size_t bytes, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t c = ~crc;
  std::size_t i = 0;
  if (bytes >= 3 * kStreamBytes) {
    static const StreamShift shift;
    for (; i + 3 * kStreamBytes <= bytes; i += 3 * kStreamBytes) {
      std::uint64_t b = 0, d = 0;
      for (std::size_t j = i; j < i + kStreamBytes; j += 8) {
        c = __builtin_ia32_crc32di(c, load_bits<std::uint64_t>(p + j, 0));
        b = __builtin_ia32_crc32di(b, load_bits<std::uint64_t>(p + j + kStreamBytes, 0));
        d = __builtin_ia32_crc32di(d, load_bits<std::uint64_t>(p + j + 2 * kStreamBytes, 0));
      }
      c = shift(shift(static_cast<std::uint32_t>(c)) ^ static_cast<std::uint32_t>(b)) ^ static_cast<std::uint32_t>(d);
    }
  }
  for (; i + 8 <= bytes; i += 8) c = __builtin_ia32_crc32di(c, load_bits<std::uint64_t>(p + i, 0));
  auto c32 = static_cast<std::uint32_t>(c);
  for (; i < bytes; ++i) c32 = __builtin_ia32_crc32qi(c32, p[i]);
  return ~c32;
}
}  // namespace
#endif

std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc) {
#if defined(__x86_64__)
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  if (sse42) return crc32c_sse42(data, bytes, crc);
#endif
  return crc32c_table_driven(data, bytes, crc);
}

namespace {
constexpr std::uint32_t kCastagnoliReflected = 0x82F63B78u;

// a * b modulo the CRC's polynomial, both in the CRC's reflected bit order (the top bit is x^0).
std::uint32_t multiply_mod_poly(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kCastagnoliReflected : b >> 1;  // b * x
  }
  return product;
}

// x^(8 * bytes) modulo the polynomial, by squaring: powers[k] is x^(2^k), k up to 3 + 63.
std::uint32_t x_to_8n(std::uint64_t bytes) {
  static const std::array<std::uint32_t, 67> powers = [] {
    std::array<std::uint32_t, 67> p{};
    p[0] = 1u << 30;  // x^1
    for (std::size_t k = 1; k < p.size(); ++k) p[k] = multiply_mod_poly(p[k - 1], p[k - 1]);
    return p;
  }();
  std::uint32_t result = 1u << 31;  // x^0
  for (std::size_t k = 3; bytes != 0; bytes >>= 1, ++k)
    if (bytes & 1u) result = multiply_mod_poly(powers[k], result);
  return result;
}
}  // namespace

// The register after A, run on through B's length of zeros, is A's contribution to crc(A B); B's
// own CRC adds the rest (the initial and final inversions cancel between the two).
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t bytes_b) {
  return multiply_mod_poly(x_to_8n(bytes_b), crc_a) ^ crc_b;
}

std::string crc32c_hex(const Tensor& host_tensor) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc32c(host_tensor.raw(), host_tensor.nbytes()));
  return text;
}

std::int64_t first_non_finite(const Tensor& t) {
  const std::int64_t n = static_cast<std::int64_t>(t.numel());
  const void* raw = t.raw();
  // The half formats are non-finite exactly when every exponent bit is set.
  const auto scan_half = [&](std::uint16_t exponent_mask) -> std::int64_t {
    for (std::int64_t i = 0; i < n; ++i)
      if ((load_bits<std::uint16_t>(raw, i) & exponent_mask) == exponent_mask) return i;
    return -1;
  };
  switch (t.dtype()) {
    case DType::F32:
      for (std::int64_t i = 0; i < n; ++i)
        if (!std::isfinite(load_bits<float>(raw, i))) return i;
      return -1;
    case DType::F64:
      for (std::int64_t i = 0; i < n; ++i)
        if (!std::isfinite(load_bits<double>(raw, i))) return i;
      return -1;
    case DType::F16: return scan_half(0x7c00);
    case DType::BF16: return scan_half(0x7f80);
    default: return -1;
  }
}

}  // namespace skew
