// Counter-based RNG: Philox4x32-10 (Salmon et al., SC'11). A draw is a pure function of
// (seed, stream, index), so every rank, thread and backend (this header compiles under nvcc
// too) produces the same numbers for the same triple, with no state to ship or checkpoint
// beyond the counter.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace skew {

struct Philox4 {
  std::uint32_t v[4];
};

// One Philox4x32 round on counter words c0..c3 with key words k0, k1 (the key is bumped after).
SKEW_HD inline void philox4x32_round(std::uint32_t& c0, std::uint32_t& c1, std::uint32_t& c2, std::uint32_t& c3,
                                     std::uint32_t k0, std::uint32_t k1) {
  const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
  const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
  const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
  const std::uint32_t n1 = static_cast<std::uint32_t>(p1);
  const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
  const std::uint32_t n3 = static_cast<std::uint32_t>(p0);
  c0 = n0;
  c1 = n1;
  c2 = n2;
  c3 = n3;
}
constexpr std::uint32_t kPhiloxBump0 = 0x9E3779B9u, kPhiloxBump1 = 0xBB67AE85u;

SKEW_HD inline Philox4 philox4x32_10(std::uint64_t counter_hi, std::uint64_t counter_lo, std::uint64_t key) {
  std::uint32_t c0 = static_cast<std::uint32_t>(counter_lo), c1 = static_cast<std::uint32_t>(counter_lo >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(counter_hi), c3 = static_cast<std::uint32_t>(counter_hi >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    philox4x32_round(c0, c1, c2, c3, k0, k1);
    k0 += kPhiloxBump0;
    k1 += kPhiloxBump1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// philox4x32_10(counter_hi, lo_first + i, key) for i < n <= kPhiloxLanes, word j of call i in
// words[j][i]: each round over all n calls at once, which the compiler vectorises (host code: a
// run of 39 calls took a third of the time of 39 single calls).
constexpr int kPhiloxLanes = 256;
inline void philox4x32_10_run(std::uint64_t counter_hi, std::uint64_t lo_first, int n, std::uint64_t key,
                              std::uint32_t (&words)[4][kPhiloxLanes]) {
  std::uint32_t* const c0 = words[0];
  std::uint32_t* const c1 = words[1];
  std::uint32_t* const c2 = words[2];
  std::uint32_t* const c3 = words[3];
  for (int i = 0; i < n; ++i) {
    const std::uint64_t lo = lo_first + static_cast<std::uint64_t>(i);
    c0[i] = static_cast<std::uint32_t>(lo);
    c1[i] = static_cast<std::uint32_t>(lo >> 32);
    c2[i] = static_cast<std::uint32_t>(counter_hi);
    c3[i] = static_cast<std::uint32_t>(counter_hi >> 32);
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < n; ++i) philox4x32_round(c0[i], c1[i], c2[i], c3[i], k0, k1);
    k0 += kPhiloxBump0;
    k1 += kPhiloxBump1;
  }
}

// Uniform in [0, 1) with 24 bits, from one 32-bit word.
SKEW_HD inline float u32_to_unit_float(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// A sequential view over the counter space of one (seed, stream): draw i is always the same.
class Rng {
 public:
  SKEW_HD Rng(std::uint64_t seed, std::uint64_t stream, std::uint64_t offset = 0)
      : seed_(seed), stream_(stream), index_(offset) {}
  SKEW_HD std::uint32_t next_u32() {
    const Philox4 r = philox4x32_10(stream_, index_ >> 2, seed_);
    return r.v[index_++ & 3];
  }
  SKEW_HD std::uint64_t next_u64() {
    const std::uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  SKEW_HD float uniform() { return u32_to_unit_float(next_u32()); }
  // Uniform in [0, n) (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
  SKEW_HD std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }
  SKEW_HD float normal() {
    // Box-Muller on (0, 1] x [0, 1).
    const float u1 = 1.0f - uniform();
    const float u2 = uniform();
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
  }
  SKEW_HD std::uint64_t offset() const { return index_; }
  SKEW_HD std::uint64_t seed() const { return seed_; }
  SKEW_HD std::uint64_t stream() const { return stream_; }

 private:
  std::uint64_t seed_, stream_, index_;
};

}  // namespace skew
