// BERT's masking rule (lib/moe/models/bert_mask.hpp): its proportions on a large sample against
// the rule within binomial tolerance, and its reproducibility (keyed by seed, draw, global
// sequence and position only).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "lib/moe/models/bert_mask.hpp"
#include "lib/moe/models/gpt_network.hpp"

using namespace skew::moe;

namespace {
// Sequences of bytes (i * 7 + position) % 256: every byte value occurs, none is the mask token.
struct Masked {
  std::vector<std::int32_t> original, tokens, targets;
};
Masked mask_many(const MaskRule& rule, std::uint64_t seed, std::int64_t draw, std::int64_t first, int sequences,
                 int seq_len) {
  Masked m;
  for (int s = 0; s < sequences; ++s)
    for (int i = 0; i < seq_len; ++i) m.original.push_back(static_cast<std::int32_t>(((first + s) * 7 + i) % 256));
  m.tokens = m.original;
  m.targets.assign(m.original.size(), 0);
  for (int s = 0; s < sequences; ++s)
    mask_sequence(rule, seed, draw, first + s, seq_len, m.tokens.data() + static_cast<std::size_t>(s) * seq_len,
                  m.targets.data() + static_cast<std::size_t>(s) * seq_len);
  return m;
}
// |count - n p| within 5 binomial standard deviations.
void require_binomial(double count, double n, double p) {
  INFO(count << " of " << n << " against p = " << p);
  REQUIRE(std::abs(count - n * p) < 5 * std::sqrt(n * p * (1 - p)));
}
}  // namespace

TEST_CASE("masking chooses 15% of positions, of them 80% mask token, 10% random byte, 10% kept", "[moe][bert]") {
  const MaskRule rule;  // 0.15, 0.8, 0.1
  const int sequences = 4000, seq_len = 64;
  const Masked m = mask_many(rule, 5, 3, 0, sequences, seq_len);
  double chosen = 0, masked = 0, random = 0, kept = 0;
  std::vector<double> random_bytes(256, 0);
  for (std::size_t i = 0; i < m.tokens.size(); ++i) {
    if (m.targets[i] == kNoTarget) {
      REQUIRE(m.tokens[i] == m.original[i]);  // a position out of the objective keeps its input
      continue;
    }
    ++chosen;
    REQUIRE(m.targets[i] == m.original[i]);  // the target is the original byte
    if (m.tokens[i] == kMaskToken) {
      ++masked;
    } else {
      REQUIRE(m.tokens[i] >= 0);
      REQUIRE(m.tokens[i] < 256);
      m.tokens[i] == m.original[i] ? ++kept : ++random;
      if (m.tokens[i] != m.original[i]) ++random_bytes[static_cast<std::size_t>(m.tokens[i])];
    }
  }
  const double positions = double(sequences) * seq_len;
  require_binomial(chosen, positions, 0.15);
  require_binomial(masked, chosen, 0.8);
  // A random byte equals the original one time in 256: it then looks kept.
  require_binomial(random, chosen, 0.1 * 255.0 / 256.0);
  require_binomial(kept, chosen, 0.1 + 0.1 / 256.0);
  // The random bytes spread over the byte range: each half gets its binomial share.
  double low = 0;
  for (int b = 0; b < 128; ++b) low += random_bytes[static_cast<std::size_t>(b)];
  require_binomial(low, random, 0.5);

  // Another rule's shares are followed too.
  const Masked other = mask_many({0.5, 0.2, 0.3}, 5, 3, 0, 500, seq_len);
  double other_chosen = 0, other_masked = 0;
  for (std::size_t i = 0; i < other.tokens.size(); ++i)
    if (other.targets[i] != kNoTarget) ++other_chosen, other_masked += other.tokens[i] == kMaskToken ? 1 : 0;
  require_binomial(other_chosen, 500.0 * seq_len, 0.5);
  require_binomial(other_masked, other_chosen, 0.2);
}

TEST_CASE("masks depend on (seed, draw, global sequence, position) alone", "[moe][bert]") {
  const MaskRule rule;
  const Masked all = mask_many(rule, 9, 12, 0, 40, 32);
  // The same sequences masked in two shares (as two ranks would): identical.
  const Masked first = mask_many(rule, 9, 12, 0, 25, 32), rest = mask_many(rule, 9, 12, 25, 15, 32);
  std::vector<std::int32_t> joined = first.tokens, joined_targets = first.targets;
  joined.insert(joined.end(), rest.tokens.begin(), rest.tokens.end());
  joined_targets.insert(joined_targets.end(), rest.targets.begin(), rest.targets.end());
  REQUIRE(joined == all.tokens);
  REQUIRE(joined_targets == all.targets);
  // Another iteration, the validation draw or another seed: other masks.
  REQUIRE(mask_many(rule, 9, 13, 0, 40, 32).targets != all.targets);
  REQUIRE(mask_many(rule, 9, kValidationDraw, 0, 40, 32).targets != all.targets);
  REQUIRE(mask_many(rule, 10, 12, 0, 40, 32).targets != all.targets);
  REQUIRE(mask_many(rule, 9, kValidationDraw, 0, 40, 32).targets ==
          mask_many(rule, 9, kValidationDraw, 0, 40, 32).targets);
}
