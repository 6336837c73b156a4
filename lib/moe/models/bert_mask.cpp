#include "lib/moe/models/bert_mask.hpp"

#include "core/rng.hpp"
#include "lib/moe/models/gpt_network.hpp"

namespace skew::moe {

namespace {
// Above the corpus' (1 << 40) + iteration batch streams; draw + 1 >= 0 for the validation draw.
constexpr std::uint64_t kMaskStream = 3ULL << 40;
// Philox words per position: two uniforms and the random byte (a 64-bit draw).
constexpr std::uint64_t kWordsPerPosition = 4;
}  // namespace

void mask_sequence(const MaskRule& rule, std::uint64_t seed, std::int64_t draw, std::int64_t sequence, int seq_len,
                   std::int32_t* tokens, std::int32_t* targets) {
  for (int i = 0; i < seq_len; ++i) {
    Rng rng(seed, kMaskStream + static_cast<std::uint64_t>(draw + 1),
            kWordsPerPosition * (static_cast<std::uint64_t>(sequence) * static_cast<std::uint64_t>(seq_len) +
                                 static_cast<std::uint64_t>(i)));
    const double choose = rng.uniform(), corrupt = rng.uniform();
    const auto random_byte = static_cast<std::int32_t>(rng.below(256));
    if (choose >= rule.chosen) {
      targets[i] = kNoTarget;
      continue;
    }
    targets[i] = tokens[i];
    if (corrupt < rule.mask_token)
      tokens[i] = kMaskToken;
    else if (corrupt < rule.mask_token + rule.random_token)
      tokens[i] = random_byte;
  }
}

}  // namespace skew::moe
