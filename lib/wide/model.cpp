#include "lib/wide/model.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>

#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/safetensors.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_pool.hpp"
#include "lib/wide/cache.hpp"

namespace skew::wide {

namespace {

constexpr std::int64_t kFeaturesPerTask = 4096;

// Feature f's latent factors, v[0, latent): value j takes draws 4q..4q+3 (q = j / 4) of the
// feature's Philox stream, numbered as Rng(seed, feature) numbers them, makes two Box-Muller
// pairs, and is the cosine (even j) or sine (odd j) half of pair (j % 4) / 2: one Philox call
// per four values. The Philox calls of a batch run together (philox4x32_10_run) and the
// transform uses log_of_unit and sincos_of_turn: the compiler vectorises both loops (one call and
// libm's logf and sincosf a value at a time took 3x and 5x as long: most of an FFM model's set-up).
void write_latent_row(float* v, int latent, std::int64_t f, std::uint64_t seed, float init_std) {
  constexpr int kMaxPairs = 2 * kPhiloxLanes;  // a row's values are made in batches of this many pairs
  std::uint32_t words[4][kPhiloxLanes];
  float u1[kMaxPairs], u2[kMaxPairs], cosine[kMaxPairs], sine[kMaxPairs];
  const int pairs = (latent + 1) / 2;
  for (int first = 0; first < pairs; first += kMaxPairs) {
    const int n = std::min(kMaxPairs, pairs - first);  // first is even: one Philox call per two pairs
    philox4x32_10_run(std::uint64_t(f), std::uint64_t(first / 2), (n + 1) / 2, seed, words);
    for (int p = 0; p < n; ++p) {
      u1[p] = 1.0f - u32_to_unit_float(words[2 * (p % 2)][p / 2]);
      u2[p] = u32_to_unit_float(words[2 * (p % 2) + 1][p / 2]);
    }
    for (int p = 0; p < n; ++p) {
      sincos_of_turn(u2[p], sine[p], cosine[p]);
      const float radius = init_std * std::sqrt(-2.0f * log_of_unit(u1[p]));
      cosine[p] *= radius;
      sine[p] *= radius;
    }
    for (int p = 0; p < n; ++p) {
      const int j = 2 * (first + p);
      v[j] = cosine[p];
      if (j + 1 < latent) v[j + 1] = sine[p];
    }
  }
}

// Writes the latent rows f with write(f) true, over `threads` threads in blocks of features.
template <typename Select>
void write_latent_rows(WideModel& m, std::uint64_t seed, float init_std, int threads, const Select& write) {
  const kernels::WideShape& shape = m.shape;
  const int row_len = shape.row_len(), latent = shape.latent_len();
  float* const params = m.params.data();
  kernels::WidePool pool(threads);
  pool.run((shape.num_features + kFeaturesPerTask - 1) / kFeaturesPerTask, [&](std::int64_t task, int) {
    const std::int64_t end = std::min(shape.num_features, (task + 1) * kFeaturesPerTask);
    for (std::int64_t f = task * kFeaturesPerTask; f < end; ++f)
      if (write(f)) write_latent_row(params + 2 + f * row_len, latent, f, seed, init_std);
  });
}

}  // namespace

WideModel WideModel::create(const kernels::WideShape& shape, std::uint64_t seed, float init_std, int threads,
                            const std::vector<std::uint8_t>* rows_read) {
  SKEW_CHECK(shape.num_features > 0, "a wide model needs at least one feature");
  SKEW_CHECK(shape.kind == kernels::WideKind::LR || shape.k > 0, "model.k must be positive for FM/FFM");
  SKEW_CHECK(!rows_read || std::int64_t(rows_read->size()) == shape.num_features,
             "create: " << rows_read->size() << " row flags for " << shape.num_features << " feature rows");
  WideModel m;
  m.shape = shape;
  // Zero pages: the bias and linear weights are already zero, and a page is faulted only when a
  // latent row on it is written (a Criteo-sized FFM is a few GB of latent factors).
  m.params.resize(shape.num_params());
  if (shape.latent_len() == 0) return m;
  if (!rows_read) {
    write_latent_rows(m, seed, init_std, threads, [](std::int64_t) { return true; });
    return m;
  }
  const std::vector<std::uint8_t>& read = *rows_read;
  write_latent_rows(m, seed, init_std, threads, [&](std::int64_t f) { return read[std::size_t(f)] != 0; });
  m.deferred.seed = seed;
  m.deferred.init_std = init_std;
  m.deferred.pending.resize(read.size());
  for (std::size_t f = 0; f < read.size(); ++f) m.deferred.pending[f] = read[f] == 0;
  m.deferred.count = std::int64_t(std::count(m.deferred.pending.begin(), m.deferred.pending.end(), std::uint8_t(1)));
  if (m.deferred.count == 0) m.deferred.pending.clear();
  return m;
}

void WideModel::write_rows_of(const SparseDataset& data, int threads) {
  if (deferred.count == 0) return;
  std::vector<std::uint8_t> write(deferred.pending.size(), 0);
  std::int64_t rows = 0;
  for (const std::uint32_t f : data.index) {
    SKEW_CHECK(f < write.size(), "feature " << f << " beyond the model's " << write.size() << " rows");
    if (deferred.pending[f] && !write[f]) {
      write[f] = 1;
      ++rows;
    }
  }
  if (rows == 0) return;
  write_latent_rows(*this, deferred.seed, deferred.init_std, threads,
                    [&](std::int64_t f) { return write[std::size_t(f)] != 0; });
  for (std::size_t f = 0; f < write.size(); ++f)
    if (write[f]) deferred.pending[f] = 0;
  deferred.count -= rows;
  if (deferred.count == 0) deferred = DeferredRows{};
}

void WideModel::materialise(int threads) {
  if (deferred.count == 0) return;
  const std::vector<std::uint8_t>& pending = deferred.pending;
  write_latent_rows(*this, deferred.seed, deferred.init_std, threads,
                    [&](std::int64_t f) { return pending[std::size_t(f)] != 0; });
  deferred = DeferredRows{};
}

void WideModel::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  SKEW_CHECK(deferred.count == 0, path << ": the model still has " << deferred.count
                                       << " deferred latent rows (materialise() before saving)");
  std::map<std::string, std::string> meta = metadata;
  meta["kind"] = kernels::wide_kind_name(shape.kind);
  meta["features"] = std::to_string(shape.num_features);
  meta["fields"] = std::to_string(shape.num_fields);
  meta["k"] = std::to_string(shape.k);
  meta["normalize"] = normalized ? "on" : "off";
  meta["hash_bits"] = std::to_string(hash_bits);
  const std::vector<std::pair<std::string, Tensor>> tensors{
      {"params", Tensor::from_vector(params, {std::int64_t(params.size())})}};
  // The same per-tensor CRC-32C a checkpoint shard records, so load() can refuse a damaged file.
  CheckpointDir::add_checksums(tensors, meta);
  save_safetensors(path, tensors, meta);
}

WideModel WideModel::load(const std::string& path) {
  const TensorFile file = load_safetensors(path);
  CheckpointDir::verify_shard(file, path);  // checksums and NaN/inf, naming the file and tensor
  const auto meta = [&](const char* key) {
    const auto it = file.metadata.find(key);
    SKEW_CHECK(it != file.metadata.end(), path << ": not a wide model (metadata '" << key << "' missing)");
    return it->second;
  };
  WideModel m;
  m.shape.kind = kernels::wide_kind_from_name(meta("kind"));
  m.shape.num_features = std::stoll(meta("features"));
  m.shape.num_fields = std::stoi(meta("fields"));
  m.shape.k = std::stoi(meta("k"));
  if (const auto it = file.metadata.find("normalize"); it != file.metadata.end()) {
    SKEW_CHECK(it->second == "on" || it->second == "off",
               path << ": metadata normalize is '" << it->second << "', expected on or off");
    m.normalized = it->second == "on";
  }
  if (const auto it = file.metadata.find("hash_bits"); it != file.metadata.end()) {
    int bits = -1;
    const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), bits);
    SKEW_CHECK(ec == std::errc() && end == it->second.data() + it->second.size() && bits >= 0 && bits <= kMaxHashBits &&
                   (bits == 0 || m.shape.num_features >= std::int64_t(1) << bits),
               path << ": metadata hash_bits is '" << it->second << "', expected 0.." << kMaxHashBits
                    << " with at least 2^hash_bits features (" << m.shape.num_features << ")");
    m.hash_bits = bits;
  }
  const Tensor& t = file.get("params");
  SKEW_CHECK(t.dtype() == DType::F32 && t.numel() == m.shape.num_params(),
             path << ": params has " << t.numel() << " " << dtype_name(t.dtype()) << " values, the shape needs "
                  << m.shape.num_params() << " F32");
  m.params.assign(t.data<float>(), t.data<float>() + t.numel());
  return m;
}

std::vector<std::int64_t> feature_counts(const SparseDataset& data, std::int64_t num_features) {
  std::vector<std::int64_t> counts(std::size_t(num_features), 0);
  add_feature_counts(data, counts);
  return counts;
}

void add_feature_counts(const SparseDataset& data, std::vector<std::int64_t>& counts) {
  for (std::uint32_t i : data.index) {
    if (i >= counts.size()) counts.resize(std::size_t(i) + 1, 0);
    ++counts[i];
  }
}

std::vector<std::uint32_t> occurring_by_frequency(const std::vector<std::int64_t>& counts) {
  std::vector<std::uint32_t> order;
  for (std::size_t f = 0; f < counts.size(); ++f)
    if (counts[f] > 0) order.push_back(std::uint32_t(f));
  // A stable radix sort on how far each count falls below the largest (ids ascending go in, so
  // ties stay by id) took a tenth of the comparison sort's time on Criteo-like data (200k ids,
  // each comparison looked up two counts far apart); counts beyond 32 bits take the latter.
  if (order.empty()) return order;
  const std::int64_t most = *std::max_element(counts.begin(), counts.end());
  if (most <= std::int64_t(std::numeric_limits<std::uint32_t>::max())) {
    std::vector<std::uint32_t> below(order.size()), below_tmp(order.size()), order_tmp(order.size());
    for (std::size_t r = 0; r < order.size(); ++r) below[r] = std::uint32_t(most - counts[order[r]]);
    std::vector<std::uint32_t> buckets(kernels::kWideRadixBuckets);
    kernels::wide_radix_sort_pairs(below.data(), order.data(), order.size(), std::bit_width(std::uint32_t(most)),
                                   below_tmp.data(), order_tmp.data(), buckets.data());
    return order;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return counts[a] > counts[b]; });
  return order;
}

FeatureOrder FeatureOrder::by_frequency(const std::vector<std::int64_t>& counts) {
  // Only the features that occur need sorting: the rest tie at zero and follow in id order, as a
  // stable sort of all would leave them (a Criteo-sized id space is mostly ids absent from the
  // training rows: sorting 1.9M ids took longer than a logistic regression's epoch).
  return from_occurring(occurring_by_frequency(counts), std::int64_t(counts.size()));
}

ListedIds listed_ids(const std::vector<std::uint32_t>& order, std::uint64_t num_features) {
  ListedIds listed{std::vector<std::uint64_t>(std::size_t((num_features + 63) / 64), 0), order.size()};
  for (std::size_t r = 0; r < order.size(); ++r) {
    const std::uint32_t f = order[r];
    if (f >= num_features || (listed.bits[f / 64] >> (f % 64) & 1) != 0) {
      listed.first_bad = r;
      break;
    }
    listed.bits[f / 64] |= std::uint64_t(1) << (f % 64);
  }
  return listed;
}

FeatureOrder FeatureOrder::from_occurring(const std::vector<std::uint32_t>& occurring, std::int64_t num_features) {
  const std::size_t n = std::size_t(num_features);
  // The ids that occur, as bits (Criteo's 1.9M ids: 240 KB, in L2): checked for range and
  // repeats here, skipped by the sweep below.
  const ListedIds listed = listed_ids(occurring, n);
  if (listed.first_bad < occurring.size()) {
    const std::uint32_t f = occurring[listed.first_bad];
    SKEW_THROW(
        "feature order: id " << f << " at place " << listed.first_bad << " is "
                             << (f < n ? "listed twice" : "beyond the " + std::to_string(num_features) + " features"));
  }
  // One sweep numbers the ids that do not occur, in id order after those that do (which it
  // numbers too, to be overwritten: no branch), then the ids that occur get their places. The
  // table's pages are faulted in by one call. (Filling the table with a marker, then sweeping for
  // the marked, wrote 7.6 MB twice and faulted its pages one by one: 8 ms of an LR set-up of 40.)
  FeatureOrder fo;
  fo.new_of_old.reserve(n);
  populate_pages(fo.new_of_old.data(), n * sizeof(std::uint32_t));
  fo.new_of_old.resize(n);
  std::uint32_t* const table = fo.new_of_old.data();
  std::uint32_t next = std::uint32_t(occurring.size());
  for (std::size_t id = 0; id < n; ++id) {
    table[id] = next;
    next += std::uint32_t(1 - (listed.bits[id / 64] >> (id % 64) & 1));
  }
  for (std::size_t r = 0; r < occurring.size(); ++r) table[occurring[r]] = std::uint32_t(r);
  return fo;
}

std::uint32_t FeatureOrder::renumber(std::uint32_t* ids, std::size_t n) const {
  std::uint32_t end = 0;
  for (std::size_t e = 0; e < n; ++e) {
    ids[e] = new_of_old[ids[e]];
    end = std::max(end, ids[e] + 1);
  }
  return end;
}

std::uint32_t FeatureOrder::apply(SparseDataset& data, int threads) const {
  // A renumbering's lookups are scattered over a table of 4 B per feature (7.6 MB for Criteo's
  // 1.9M), so a core waits on memory: a whole load's 7.8M nonzeros took 14 ms, a fifth of set-up.
  constexpr std::size_t kMinNonzerosPerThread = std::size_t(1) << 20;
  const std::size_t n = data.index.size(), none = std::numeric_limits<std::size_t>::max();
  const std::size_t parts =
      std::clamp<std::size_t>(std::size_t(std::max(threads, 1)), 1, n / kMinNonzerosPerThread + 1);
  std::vector<std::uint32_t> ends(parts, 0);
  std::vector<std::size_t> beyond(parts, none);  // each part's first id beyond the table, reported after all ran
  // Checked, then renumbered, a block at a time (the block stays in the core's cache between).
  constexpr std::size_t kBlock = std::size_t(1) << 14;
  const auto renumber_part = [&](std::size_t part) {
    std::uint32_t end = 0;
    for (std::size_t e = n * part / parts, last = n * (part + 1) / parts; e < last; e += kBlock) {
      std::uint32_t* const block = data.index.data() + e;
      const std::size_t count = std::min(kBlock, last - e);
      const std::uint32_t* beyond_at =
          std::find_if(block, block + count, [&](std::uint32_t i) { return i >= new_of_old.size(); });
      if (beyond_at != block + count) {
        beyond[part] = e + std::size_t(beyond_at - block);
        break;
      }
      end = std::max(end, renumber(block, count));
    }
    ends[part] = end;
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t part = 1; part < parts; ++part) helpers.emplace_back(renumber_part, part);
    renumber_part(0);
  }
  for (const std::size_t e : beyond)
    SKEW_CHECK(e == none, "feature " << data.index[e] << " beyond the renumbering table (" << new_of_old.size() << ")");
  return *std::max_element(ends.begin(), ends.end());
}

WideParams FeatureOrder::to_original(const kernels::WideShape& shape, const WideParams& params) const {
  WideParams out(params.size());
  const std::size_t row_len = std::size_t(shape.row_len());
  out[0] = params[0];
  for (std::size_t old = 0; old < new_of_old.size(); ++old)
    std::copy_n(params.begin() + 1 + std::ptrdiff_t(new_of_old[old] * row_len), row_len,
                out.begin() + 1 + std::ptrdiff_t(old * row_len));
  return out;
}

double logloss_sum(const float* logits, const float* labels, std::size_t n) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += kernels::wide_logloss_term(logits[i], labels[i]);
  return sum;
}

double roc_auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  // NaN compares unequal to itself and unordered to everything: sorting with it is undefined and
  // the tie loop below would never advance. A NaN score has no rank, so the AUC has none either.
  if (std::any_of(scores.begin(), scores.end(), [](float s) { return std::isnan(s); }))
    return std::numeric_limits<double>::quiet_NaN();
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  double positives = 0, rank_sum = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mid_rank = 0.5 * double(i + j + 1);  // 1-based average rank of the tie group
    for (std::size_t t = i; t < j; ++t)
      if (labels[order[t]] > 0.5f) {
        positives += 1;
        rank_sum += mid_rank;
      }
    i = j;
  }
  const double negatives = double(scores.size()) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

}  // namespace skew::wide
