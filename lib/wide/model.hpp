// A wide model's parameters (LR/FM/FFM, layout in kernels/wide_model.hpp), its initialisation,
// safetensors save/load, frequency renumbering of feature ids, and the validation metrics.
#pragma once
#include <bit>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/zero_pages.hpp"
#include "kernels/wide_model.hpp"
#include "lib/wide/dataset.hpp"

namespace skew::wide {

// A model's flat parameter vector: fresh pages read as zero, so a model's pages are faulted only
// where a value is written (a Criteo-sized FFM is over a gigabyte, mostly rows no data touches).
// 4 KiB pages: creation writes the rows the data reads, the training rows a dense prefix after
// renumbering but the validation-only rows scattered over the rest, and a 2 MiB page around
// each of those would fault almost the whole model (FFM on issue 16's file: 1.42 GB resident
// instead of 0.44 GB, set-up 1.3-3.2 s instead of 0.41 s, no faster epochs).
using WideParams = ZeroPageVector<float, /*HugePages=*/false>;
// A copy in an ordinary vector (for code that keeps parameters as std::vector<float>).
inline std::vector<float> copy_to_vector(const WideParams& params) {
  return {params.begin(), params.end()};
}

// The latent rows a model's creation left for later (WideModel::create with `rows_read`): zero
// until written with the values create() gives them. Empty `pending`: none.
struct DeferredRows {
  std::uint64_t seed = 0;
  float init_std = 0;
  std::vector<std::uint8_t> pending;  // per feature row: 1 = not yet written
  std::int64_t count = 0;             // rows still pending
};

struct WideModel {
  kernels::WideShape shape;
  WideParams params;  // the flat parameter vector
  // Trained on instances scaled to unit L2 norm (normalize_instances): whatever it scores must
  // be scaled the same way. Saved as metadata "normalize" (on/off; absent = off).
  bool normalized = false;
  // data.hash_bits of its training data (0 = raw ids are rows): what it scores is hashed the
  // same way. Saved as metadata "hash_bits" (absent = 0).
  int hash_bits = 0;

  DeferredRows deferred;

  // Bias and linear weights zero, latent factors N(0, init_std^2) from (seed, feature), filled
  // by `threads` threads; the values do not depend on the thread count. With `rows_read` (one
  // flag per feature row: the rows the run's data touches), only those latent rows are written
  // now and the rest are deferred: each value is a pure function of (seed, feature, index), so
  // writing a row later gives what writing it now would have (write_rows_of, materialise).
  static WideModel create(const kernels::WideShape& shape, std::uint64_t seed, float init_std = 0.01f, int threads = 1,
                          const std::vector<std::uint8_t>* rows_read = nullptr);
  // Writes the deferred rows among those `data` reads, with `threads` threads: after it,
  // scoring or training on `data` reads the values an eagerly created model holds.
  void write_rows_of(const SparseDataset& data, int threads);
  // Writes every deferred row: before the whole vector is read (saved, copied, uploaded).
  void materialise(int threads);
  // safetensors: tensor "params" (F32, flat) plus metadata kind/features/fields/k/normalize/hash_bits.
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  static WideModel load(const std::string& path);
};

// The ids a frequency order lists, as bits (one word per 64 ids of [0, num_features)), and the
// first place whose id is beyond num_features or listed at an earlier place (order.size() when
// none is; the bits then hold the ids before it).
struct ListedIds {
  std::vector<std::uint64_t> bits;
  std::size_t first_bad;
};
ListedIds listed_ids(const std::vector<std::uint32_t>& order, std::uint64_t num_features);

// Feature ids renumbered by descending frequency (ties by id), so the hottest get small ids.
struct FeatureOrder {
  std::vector<std::uint32_t> new_of_old;
  // Descending count, ties (zeros included) by id.
  static FeatureOrder by_frequency(const std::vector<std::int64_t>& counts);
  // `occurring` first, in its order, then every other id of [0, num_features) by id: equals
  // by_frequency(counts) for occurring = occurring_by_frequency(counts). Throws when an id is
  // out of range or listed twice.
  static FeatureOrder from_occurring(const std::vector<std::uint32_t>& occurring, std::int64_t num_features);
  // Rewrites data.index in place, split over `threads` (each a contiguous range of at least 1M
  // nonzeros); returns one past the largest new id (0 for no entries). Throws naming an id
  // beyond the table.
  std::uint32_t apply(SparseDataset& data, int threads = 1) const;
  // Rewrites ids[0, n), every one known to be below new_of_old.size(); returns one past the
  // largest new id (0 for none).
  std::uint32_t renumber(std::uint32_t* ids, std::size_t n) const;
  // Parameters of a model trained on renumbered ids, laid out for the original ids.
  WideParams to_original(const kernels::WideShape& shape, const WideParams& params) const;
};
// The latent rows' initial Box-Muller transform: log(x) for x in (0, 1], and sin and cos of 2 pi t
// for t in [0, 1), in float, within 1e-6 of libm (tests/unit/test_wide_init.cpp).
inline float log_of_unit(float x) {
  // x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172:
  // the series to s^9 leaves 4e-10. Branch-free, so that a row's loop vectorises.
  // Integer tests and selects only: a float compare kept GCC from vectorising the loop.
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x), fraction = bits & 0x7fffffu;
  const std::uint32_t high = fraction > 0x3504f3u ? 1u : 0u;  // mantissa above sqrt(2)'s
  const float m = std::bit_cast<float>(fraction | (0x3f800000u - (high << 23)));
  const float e = float(int(bits >> 23) - 127 + int(high));
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  const float series = s * (2.0f + s2 * (2.0f / 3 + s2 * (2.0f / 5 + s2 * (2.0f / 7 + s2 * (2.0f / 9)))));
  return series + e * 0.693147181f;
}

inline void sincos_of_turn(float t, float& sine, float& cosine) {
  // Quadrant q of 4t and the angle theta in [0, pi/2) within it; Taylor series to theta^11 and
  // theta^12 leave under 6e-8; the quadrant swaps and negates. Branch-free like log_of_unit.
  const float x = 4.0f * t;
  const int whole = int(x);  // x >= 0: truncation is floor
  const int q = whole & 3;
  const float theta = (x - float(whole)) * 1.57079633f, a = theta * theta;
  const float sin_theta =
      theta * (1.0f - a / 6 * (1.0f - a / 20 * (1.0f - a / 42 * (1.0f - a / 72 * (1.0f - a / 110)))));
  const float cos_theta =
      1.0f - a / 2 * (1.0f - a / 12 * (1.0f - a / 30 * (1.0f - a / 56 * (1.0f - a / 90 * (1.0f - a / 132)))));
  const float c = (q & 1) ? sin_theta : cos_theta, s = (q & 1) ? cos_theta : sin_theta;
  cosine = ((q + 1) & 2) ? -c : c;
  sine = (q & 2) ? -s : s;
}

std::vector<std::int64_t> feature_counts(const SparseDataset& data, std::int64_t num_features);
// The ids with count > 0, by descending count, ties by id.
std::vector<std::uint32_t> occurring_by_frequency(const std::vector<std::int64_t>& counts);
// Adds data's feature occurrences to `counts`, growing it to the largest index + 1 when short
// (a streamed file's chunks, counted one at a time).
void add_feature_counts(const SparseDataset& data, std::vector<std::int64_t>& counts);

// Mean logloss of sigmoid(logits) against 0/1 labels, and the ROC AUC (ties averaged; +-inf
// scores rank as the extremes; NaN when any score is NaN, as from a diverged model: callers
// that must stop on divergence check for it).
double logloss_sum(const float* logits, const float* labels, std::size_t n);
double roc_auc(const std::vector<float>& scores, const std::vector<float>& labels);

}  // namespace skew::wide
