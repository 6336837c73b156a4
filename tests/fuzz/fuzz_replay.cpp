// moe_train's routing replay (moe.replay_trace): after its header line the trainer reads FILE.rank<r> as int32
// expert ids, tokens x top_k per MoE layer, and hands each layer's block to gate_forward, which
// must reject an id outside [0, experts) with a skew::Error. The first 3 bytes choose tokens
// (1-16), experts (1-16) and top_k (1-experts); the rest is the replayed file (short files are
// padded with id 0, as the trainer fails on them before the gate). An accepted block must count
// every assignment once and give each the chosen expert's gate probability.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "lib/moe/gate.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const int n = 1 + data[0] % 16, E = 1 + data[1] % 16, k = 1 + data[2] % E, d = 4;
  std::vector<std::int32_t> forced(static_cast<std::size_t>(n) * k, 0);
  std::memcpy(forced.data(), data + 3, std::min(size - 3, forced.size() * sizeof(std::int32_t)));
  std::vector<float> x(static_cast<std::size_t>(n) * d), wg(static_cast<std::size_t>(d) * E);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * float(i) + 0.1f);
  for (std::size_t i = 0; i < wg.size(); ++i) wg[i] = std::cos(1.3f * float(i));
  skew::moe::GateOptions opt;
  opt.num_experts = E, opt.top_k = k;
  skew::moe::GateState<float> s;
  try {
    skew::moe::gate_forward<float>(
        opt, n, d, x.data(), wg.data(), nullptr, forced.data(), [](std::vector<double>&) {}, s);
  } catch (const skew::Error& e) {
    bool bad = false;
    for (const auto id : forced) bad |= id < 0 || id >= E;
    FUZZ_ASSERT(bad && std::string(e.what()).find("replayed expert") != std::string::npos);
    return 0;
  }
  std::int64_t total = 0;
  for (const auto c : s.local_counts) total += c;
  FUZZ_ASSERT(total == std::int64_t(n) * k);
  for (std::size_t a = 0; a < forced.size(); ++a) {
    FUZZ_ASSERT(s.expert[a] == forced[a]);
    FUZZ_ASSERT(s.weight[a] == s.probs[a / std::size_t(k) * std::size_t(E) + std::size_t(forced[a])]);
  }
  FUZZ_ASSERT(std::isfinite(s.aux_loss));
  std::vector<float> dweight(forced.size(), 1.0f), dx(x.size()), dwg(wg.size(), 0.0f);
  skew::moe::gate_backward<float>(opt, s, wg.data(), dweight.data(), dx.data(), dwg.data());
  for (const float v : dx) FUZZ_ASSERT(std::isfinite(v));
  return 0;
}
