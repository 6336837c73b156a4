// BERT's masked-LM corruption (Devlin et al. 2019, section 3.1) of byte sequences: each position
// is chosen for the objective with probability `chosen`; a chosen position's input becomes the
// mask token (80%), a uniformly random byte (10%) or stays itself (10%), and its target is the
// original byte; the other positions have no target. Draws come from the counter RNG keyed by
// (seed, draw, global sequence index, position): no state, so a resumed run masks exactly as
// the straight one, and a sequence is masked the same whichever rank holds it.
#pragma once
#include <cstdint>

namespace skew::moe {

// The mask token is an id of its own after the 256 bytes, not a reserved byte: data.train may
// be any file, and every byte value can occur in it; the tied LM head simply has 257 rows.
inline constexpr std::int32_t kMaskToken = 256;
inline constexpr int kBertVocab = 257;
// The draw of validation masks: the same for every evaluation, so validation losses compare.
inline constexpr std::int64_t kValidationDraw = -1;

struct MaskRule {
  double chosen = 0.15;       // share of positions in the objective
  double mask_token = 0.8;    // of those: input replaced by kMaskToken
  double random_token = 0.1;  // of those: input replaced by a uniformly random byte
};

// Masks one sequence of seq_len bytes in place: tokens get the corruption; targets the original
// byte at chosen positions and kNoTarget elsewhere. `draw`: the training iteration, or
// kValidationDraw; `sequence`: its index in the global batch (or validation window).
void mask_sequence(const MaskRule& rule, std::uint64_t seed, std::int64_t draw, std::int64_t sequence, int seq_len,
                   std::int32_t* tokens, std::int32_t* targets);

}  // namespace skew::moe
