// Sparse CTR data in CSR form and how it is loaded: libsvm ("label idx:val ...") and libffm
// ("label field:idx:val ...") text, parsed in parallel, with a binary cache beside the text file
// (FILE.skewbin) so the next run skips parsing; the built-in synthetic Criteo-like generator
// ("synthetic:criteo?rows=..."); and rank sharding (each rank loads only its slice of rows).
//
// Feature ids are read as unsigned 64-bit integers. The model is dense over its rows, so an id
// becomes a row either directly (ids below 2^32 - 1; the model itself is capped at 2^28 rows)
// or, with ReadOptions::hash_bits = b > 0, by feature hashing: row = fmix64(id ^ kFeatureHashSeed)
// >> (64 - b). The dataset's `index` holds model rows, never raw ids.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/wide_model.hpp"

namespace skew::wide {

// MurmurHash3's 64-bit finaliser (fmix64, Appleby, public domain): a bijection of 64-bit words
// whose every output bit depends on every input bit, so the top bits of consecutive or otherwise
// structured ids are as good as random.
constexpr std::uint64_t fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
// Fixed (never per run or per rank): every process, run and --predict maps an id to the same row.
// XORed in so that id 0 does not map to row 0 (fmix64(0) = 0). The golden-ratio constant.
constexpr std::uint64_t kFeatureHashSeed = 0x9e3779b97f4a7c15ull;
// data.hash_bits' range: 2^28 rows is the largest model wide_train builds.
constexpr int kMaxHashBits = 28;
// The model row of raw feature id `id` under hash_bits = bits (1..kMaxHashBits). The field of a
// libffm token is not mixed in: libffm feature ids are global (as LIBFFM reads them), so one id
// is one feature in every field, and libsvm and libffm files of the same ids share rows.
constexpr std::uint32_t hashed_feature_row(std::uint64_t id, int bits) {
  return static_cast<std::uint32_t>(fmix64(id ^ kFeatureHashSeed) >> (64 - bits));
}

struct SparseDataset {
  std::vector<std::int64_t> row_ptr{0};
  std::vector<std::uint32_t> index;
  std::vector<std::uint16_t> field;  // one per nonzero (all zero for libsvm)
  std::vector<float> value;
  std::vector<float> label;       // 0 or 1
  std::int64_t num_features = 0;  // max index + 1 over the whole source (all ranks agree);
                                  // 2^hash_bits when hashed
  int num_fields = 1;             // max field + 1 over the whole source
  std::int64_t first_row = 0;     // global row number of this slice's first row

  std::int64_t rows() const { return static_cast<std::int64_t>(label.size()); }
  std::int64_t nnz() const { return static_cast<std::int64_t>(index.size()); }
  kernels::WideBatch batch(std::int64_t begin, std::int64_t end) const;
  void append_row(const std::uint32_t* idx, const std::uint16_t* fld, const float* val, std::size_t n, float y);
};

// Rows [begin, end) of arrays laid out as a SparseDataset's, as a kernel batch.
kernels::WideBatch rows_batch(const std::int64_t* row_ptr, const std::uint32_t* index, const std::uint16_t* field,
                              const float* value, const float* label, std::int64_t begin, std::int64_t end);

enum class TextFormat { Libsvm, Libffm };
// data.format's choice for `path`: libsvm | libffm, or auto (by extension: .libffm/.ffm, else libsvm).
TextFormat format_for(const std::string& path, const std::string& option);

// data.max_line_bytes' default: far above any real row (a Criteo row is ~0.5 KiB), far below
// what a runaway line (a binary file, a missing newline) would make the parser hold.
constexpr std::int64_t kDefaultMaxLineBytes = std::int64_t(16) << 20;

struct ReadOptions {
  std::string format = "auto";  // auto (by extension: .libffm/.ffm, else libsvm) | libsvm | libffm
  bool skip_bad_lines = false;  // count and report malformed lines instead of failing
  bool use_cache = true;        // read/write FILE.skewbin beside the text file
  int threads = 1;              // parser threads
  int hash_bits = 0;            // 0: ids are model rows; 1..kMaxHashBits: hashed into 2^bits rows
  std::int64_t max_line_bytes = kDefaultMaxLineBytes;  // a longer line is malformed (data.max_line_bytes)
  int rank = 0, world = 1;                             // this rank's slice: rows [rank*N/world, (rank+1)*N/world)
  std::int64_t line_offset = 0;                        // parse_text: lines of the file before this text (a streamed
                                                       // chunk's place in it), so errors name the file's line
};

struct ReadReport {
  std::int64_t lines = 0, skipped_lines = 0;  // over the whole file
  std::int64_t total_rows = 0;                // over the whole file, every rank's slice together
  std::string first_bad_line;                 // "FILE:LINE:COL: why" of the first skipped line
  bool from_cache = false;
  double seconds = 0.0, megabytes = 0.0;
  // The whole file's features that occur, by descending count, ties by id (renumbering's
  // order): from the binary cache, or counted when the cache was written; else empty.
  std::vector<std::uint32_t> frequency_order;
};

// Parses text (the whole file, or whole lines of it from line options.line_offset + 1 on) into one
// dataset; `origin` names it in errors (FILE:LINE:COL).
SparseDataset parse_text(std::string_view text, const std::string& origin, TextFormat format,
                         const ReadOptions& options, ReadReport* report);

// `d` as libsvm/libffm text that parse_text reads back to the same arrays (values written
// shortest-exact); labels 0/1.
std::string format_text(const SparseDataset& d, TextFormat format);

// Loads `spec`: a libsvm/libffm file path or "synthetic:criteo?...". Returns this rank's slice.
SparseDataset load_dataset(const std::string& spec, const ReadOptions& options, ReadReport* report = nullptr);

// Scales each row's values to unit L2 norm (LIBFFM's and xLearn's instance normalisation; rows
// whose values are all zero stay as they are). Training, validation and prediction data of a
// model trained this way all go through it (train.normalize, WideModel::normalized).
void normalize_instances(SparseDataset& data);
// The same for rows [first, last) of arrays laid out as a SparseDataset's.
void normalize_rows(const std::int64_t* row_ptr, float* value, std::int64_t first, std::int64_t last);

// Rows [begin, end) of `data` as a standalone dataset (num_features/num_fields kept).
SparseDataset slice_rows(const SparseDataset& data, std::int64_t begin, std::int64_t end);

// The synthetic generator, "synthetic:criteo?rows=N&features=F&alpha=A&seed=S&first_row=R&k=K":
// 13 bucketised numeric + 26 categorical fields (Criteo's cardinality profile scaled to F
// features), Zipf(alpha) value frequencies in each field, labels drawn from a hidden FM with
// latent dimension K so that the signal is learnable. Row r is a pure function of (seed, r):
// rank slices and train/validation splits (first_row) never overlap or disagree.
struct SyntheticSpec {
  std::int64_t rows = 10000, features = 1 << 20, first_row = 0;
  double alpha = 1.1;
  std::uint64_t seed = 1;
  int k = 4;
};
SyntheticSpec parse_synthetic_spec(const std::string& spec);
SparseDataset generate_synthetic(const SyntheticSpec& spec, std::int64_t begin, std::int64_t end);

}  // namespace skew::wide
