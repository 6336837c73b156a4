// The synthetic Criteo-like generator: field layout, Zipf value frequencies, hidden-FM labels.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "lib/wide/dataset.hpp"

namespace skew::wide {

namespace {

// Criteo Kaggle's 26 categorical cardinalities (reference/cuwide.md).
constexpr std::int64_t kCriteoCardinality[26] = {1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
                                                 93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
                                                 2173,  4,    7046547,  18,      15,  286181, 105,     142572};
constexpr int kNumeric = 13, kCategorical = 26, kFields = kNumeric + kCategorical;

struct FieldLayout {
  std::int64_t offset[kFields], size[kFields], multiplier[kFields];
};

FieldLayout layout_for(std::int64_t features) {
  SKEW_CHECK(features >= 1000, "synthetic:criteo needs features >= 1000, got " << features);
  FieldLayout L{};
  const std::int64_t buckets = std::clamp<std::int64_t>(features / (kFields * 8), 2, 32);
  const std::int64_t categorical = features - kNumeric * buckets;
  const double total = std::accumulate(std::begin(kCriteoCardinality), std::end(kCriteoCardinality), 0.0);
  std::int64_t used = 0, largest = 0;
  for (int f = 0; f < kFields; ++f) {
    L.size[f] = f < kNumeric
                    ? buckets
                    : std::max<std::int64_t>(
                          2, std::llround(double(kCriteoCardinality[f - kNumeric]) * double(categorical) / total));
    used += L.size[f];
    if (L.size[f] > L.size[largest]) largest = f;
  }
  L.size[largest] += features - used;  // rounding slack goes to the largest field
  SKEW_CHECK(L.size[largest] >= 2, "synthetic:criteo cannot lay out " << features << " features");
  std::int64_t offset = 0;
  for (int f = 0; f < kFields; ++f) {
    L.offset[f] = offset;
    offset += L.size[f];
    // A multiplier coprime with the field size scatters Zipf ranks over the field's ids, so
    // hot values do not start out with small ids.
    std::int64_t m = (0x9E3779B97F4A7C15ull >> (f + 3)) % std::uint64_t(L.size[f]) + 1;
    while (std::gcd(m, L.size[f]) != 1) ++m;
    L.multiplier[f] = m;
  }
  return L;
}

// Rank in [0, n) with P(r) roughly proportional to 1/(r+1)^alpha (inverse CDF of the
// continuous power law on [1, n+1)).
std::int64_t zipf_rank(float u, std::int64_t n, double alpha) {
  double x;
  if (std::fabs(alpha - 1.0) < 1e-9) {
    x = std::pow(double(n) + 1.0, double(u));
  } else {
    const double a = 1.0 - alpha;
    x = std::pow((std::pow(double(n) + 1.0, a) - 1.0) * double(u) + 1.0, 1.0 / a);
  }
  return std::clamp<std::int64_t>(std::int64_t(x) - 1, 0, n - 1);
}

double parse_double(const std::string& key, const std::string& text, const std::string& spec) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  SKEW_CHECK(used == text.size() && !text.empty(), "bad value '" << text << "' for '" << key << "' in " << spec);
  return v;
}

}  // namespace

SyntheticSpec parse_synthetic_spec(const std::string& spec) {
  const std::string prefix = "synthetic:criteo";
  SKEW_CHECK(spec.rfind(prefix, 0) == 0, "unknown synthetic data set '"
                                             << spec
                                             << "' (expected synthetic:criteo?rows=N&features=F&alpha=A&seed=S)");
  SyntheticSpec s;
  std::string rest = spec.substr(prefix.size());
  if (rest.empty()) return s;
  SKEW_CHECK(rest[0] == '?', "expected '?' after synthetic:criteo in '" << spec << "'");
  std::stringstream ss(rest.substr(1));
  std::string item;
  while (std::getline(ss, item, '&')) {
    const auto eq = item.find('=');
    SKEW_CHECK(eq != std::string::npos, "expected key=value, got '" << item << "' in " << spec);
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    const double v = parse_double(key, val, spec);
    if (key == "rows")
      s.rows = std::int64_t(v);
    else if (key == "features")
      s.features = std::int64_t(v);
    else if (key == "alpha")
      s.alpha = v;
    else if (key == "seed")
      s.seed = std::uint64_t(v);
    else if (key == "first_row")
      s.first_row = std::int64_t(v);
    else if (key == "k")
      s.k = int(v);
    else
      SKEW_THROW("unknown key '" << key << "' in " << spec << " (known: rows, features, alpha, seed, first_row, k)");
  }
  SKEW_CHECK(s.rows >= 0 && s.alpha > 0 && s.k >= 1 && s.k <= 64, "bad synthetic spec " << spec);
  return s;
}

SparseDataset generate_synthetic(const SyntheticSpec& s, std::int64_t begin, std::int64_t end) {
  const FieldLayout L = layout_for(s.features);
  const std::uint64_t model_key = s.seed * 0x9E3779B97F4A7C15ull + 0x5EEDull;
  const float w_scale = 0.35f, v_scale = 0.9f / std::sqrt(std::sqrt(float(kFields * kFields / 2) * float(s.k)));
  const int threads =
      std::clamp<int>(int((end - begin) / 20000), 1, int(std::max(1u, std::thread::hardware_concurrency())));
  std::vector<SparseDataset> parts(static_cast<std::size_t>(threads));
  const auto work = [&](int t) {
    SparseDataset& d = parts[std::size_t(t)];
    const std::int64_t a = begin + (end - begin) * t / threads, z = begin + (end - begin) * (t + 1) / threads;
    d.index.reserve(std::size_t((z - a) * kFields));
    std::uint32_t idx[kFields];
    std::uint16_t fld[kFields];
    float val[kFields];
    std::vector<float> sums(std::size_t(s.k));
    for (std::int64_t r = a; r < z; ++r) {
      Rng rng(s.seed, std::uint64_t(s.first_row + r));
      std::fill(sums.begin(), sums.end(), 0.0f);
      float logit = -1.0f, squares = 0.0f;
      for (int f = 0; f < kFields; ++f) {
        const std::int64_t rank = zipf_rank(rng.uniform(), L.size[f], s.alpha);
        const std::int64_t id = L.offset[f] + (rank * L.multiplier[f]) % L.size[f];
        idx[f] = std::uint32_t(id);
        fld[f] = std::uint16_t(f);
        val[f] = 1.0f;
        Rng hidden(model_key, std::uint64_t(id));
        logit += w_scale * hidden.normal();
        for (int j = 0; j < s.k; ++j) {
          const float v = v_scale * hidden.normal();
          sums[std::size_t(j)] += v;
          squares += v * v;
        }
      }
      for (float x : sums) logit += 0.5f * x * x;
      logit -= 0.5f * squares;
      const float y = rng.uniform() < 1.0f / (1.0f + std::exp(-logit)) ? 1.0f : 0.0f;
      d.append_row(idx, fld, val, kFields, y);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  SparseDataset out = std::move(parts[0]);
  for (std::size_t t = 1; t < parts.size(); ++t) {
    const std::int64_t base = out.nnz();
    for (std::size_t r = 1; r < parts[t].row_ptr.size(); ++r) out.row_ptr.push_back(base + parts[t].row_ptr[r]);
    out.index.insert(out.index.end(), parts[t].index.begin(), parts[t].index.end());
    out.field.insert(out.field.end(), parts[t].field.begin(), parts[t].field.end());
    out.value.insert(out.value.end(), parts[t].value.begin(), parts[t].value.end());
    out.label.insert(out.label.end(), parts[t].label.begin(), parts[t].label.end());
  }
  out.num_features = s.features;
  out.num_fields = kFields;
  out.first_row = begin;
  return out;
}

}  // namespace skew::wide
