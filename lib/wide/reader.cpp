// libsvm/libffm text parsing (parallel over newline-aligned chunks), use of the binary cache
// (lib/wide/cache.cpp) beside the text file, and rank slicing.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "core/thread_limits.hpp"
#include "core/timer.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"

namespace skew::wide {

kernels::WideBatch rows_batch(const std::int64_t* row_ptr, const std::uint32_t* index, const std::uint16_t* field,
                              const float* value, const float* label, std::int64_t begin, std::int64_t end) {
  kernels::WideBatch b;
  b.rows = end - begin;
  b.row_ptr = row_ptr + begin;
  b.index = index;
  b.field = field;
  b.value = value;
  b.label = label + begin;
  return b;
}

kernels::WideBatch SparseDataset::batch(std::int64_t begin, std::int64_t end) const {
  return rows_batch(row_ptr.data(), index.data(), field.data(), value.data(), label.data(), begin, end);
}

void SparseDataset::append_row(const std::uint32_t* idx, const std::uint16_t* fld, const float* val, std::size_t n,
                               float y) {
  index.insert(index.end(), idx, idx + n);
  field.insert(field.end(), fld, fld + n);
  value.insert(value.end(), val, val + n);
  row_ptr.push_back(static_cast<std::int64_t>(index.size()));
  label.push_back(y);
}

void normalize_rows(const std::int64_t* row_ptr, float* value, std::int64_t first, std::int64_t last) {
  for (std::int64_t r = first; r < last; ++r) {
    const std::int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    double sum_sq = 0;  // float64: a row of a thousand values keeps its last bits
    for (std::int64_t e = begin; e < end; ++e) sum_sq += double(value[e]) * double(value[e]);
    if (sum_sq == 0) continue;  // an empty or all-zero row has no direction to keep
    const float scale = float(1.0 / std::sqrt(sum_sq));
    for (std::int64_t e = begin; e < end; ++e) value[e] *= scale;
  }
}

void normalize_instances(SparseDataset& d) {
  normalize_rows(d.row_ptr.data(), d.value.data(), 0, d.rows());
}

SparseDataset slice_rows(const SparseDataset& d, std::int64_t begin, std::int64_t end) {
  SparseDataset out;
  out.num_features = d.num_features;
  out.num_fields = d.num_fields;
  out.first_row = d.first_row + begin;
  const std::int64_t a = d.row_ptr[std::size_t(begin)], z = d.row_ptr[std::size_t(end)];
  out.index.assign(d.index.begin() + a, d.index.begin() + z);
  out.field.assign(d.field.begin() + a, d.field.begin() + z);
  out.value.assign(d.value.begin() + a, d.value.begin() + z);
  out.label.assign(d.label.begin() + begin, d.label.begin() + end);
  out.row_ptr.resize(std::size_t(end - begin + 1));
  for (std::int64_t r = begin; r <= end; ++r) out.row_ptr[std::size_t(r - begin)] = d.row_ptr[std::size_t(r)] - a;
  return out;
}

namespace {

struct LineError {
  std::int64_t line = -1;  // local to the chunk, 1-based
  std::int64_t column = 0;
  std::string why;
};

struct ChunkResult {
  SparseDataset data;
  std::int64_t lines = 0, skipped = 0, max_index = -1;
  int max_field = 0;
  LineError first_error;
};

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

template <typename T>
bool parse_number(const char*& p, const char* end, T& out) {
  if (p < end && *p == '+') ++p;
  const auto [next, ec] = std::from_chars(p, end, out);
  if (ec != std::errc() || next == p) return false;
  p = next;
  return true;
}

// Parses one line (no newline, no '\r', comment cut off) into `row`. Returns false with `err`.
// Feature ids are unsigned 64-bit; `hash_bits` (ReadOptions) turns each into its model row.
bool parse_line(const char* begin, const char* end, TextFormat format, int hash_bits, std::vector<std::uint32_t>& idx,
                std::vector<std::uint16_t>& fld, std::vector<float>& val, float& y, LineError& err) {
  idx.clear();
  fld.clear();
  val.clear();
  const char* p = begin;
  while (p < end && is_space(*p)) ++p;
  const auto fail = [&](const char* at, std::string why) {
    err.column = (at - begin) + 1;
    err.why = std::move(why);
    return false;
  };
  // The token as the error quotes it: at most kQuoted bytes, so that a token of a gigabyte (a
  // line of NUL bytes) is not copied into the message.
  constexpr std::size_t kQuoted = 64;
  const auto token_text = [&](const char* at) {
    const char* e = at;
    while (e < end && !is_space(*e) && std::size_t(e - at) <= kQuoted) ++e;
    const std::size_t n = std::size_t(e - at);
    return n > kQuoted ? std::string(at, kQuoted) + "..." : std::string(at, n);
  };
  double label = 0;
  const char* label_at = p;
  if (!parse_number(p, end, label) || (p < end && !is_space(*p)))
    return fail(label_at, "bad label '" + token_text(label_at) + "' (expected a number: 0/1 or -1/+1)");
  if (label != 0 && label != 1 && label != -1)
    return fail(label_at, "label '" + token_text(label_at) + "' out of range (expected 0/1 or -1/+1)");
  y = label > 0 ? 1.0f : 0.0f;
  for (;;) {
    while (p < end && is_space(*p)) ++p;
    if (p == end) return true;
    const char* tok = p;
    std::uint64_t f = 0, i = 0;
    if (format == TextFormat::Libffm) {
      if (!parse_number(p, end, f) || p == end || *p != ':')
        return fail(tok, "bad token '" + token_text(tok) + "' (expected field:index:value)");
      if (f > 65535) return fail(tok, "field " + std::to_string(f) + " exceeds 65535");
      ++p;
    }
    const char* idx_at = p;
    const auto id_text = [&] { return token_text(idx_at).substr(0, token_text(idx_at).find(':')); };
    if (p < end && *p == '-')
      return fail(idx_at, "feature id " + id_text() + " is negative (ids are unsigned 64-bit integers)");
    if (p < end && *p == '+') ++p;
    const auto [id_end, id_error] = std::from_chars(p, end, i);
    if (id_error == std::errc::result_out_of_range)
      return fail(idx_at, "feature id " + id_text() + " does not fit 64 bits (the largest is 18446744073709551615)");
    if (id_error != std::errc() || id_end == p || id_end == end || *id_end != ':')
      return fail(tok, "bad token '" + token_text(tok) + "' (expected " +
                           (format == TextFormat::Libffm ? "field:index:value)" : "index:value)"));
    p = id_end;
    // Without hashing an id is its model row: 2^32 - 1 stays free as "no feature" for the kernels.
    if (hash_bits == 0 && i > 0xFFFFFFFEull)
      return fail(idx_at, "feature id " + id_text() +
                              " exceeds 4294967294; set data.hash_bits to hash 64-bit ids into 2^hash_bits model rows");
    ++p;
    float v = 0;
    const char* val_at = p;
    if (!parse_number(p, end, v) || (p < end && !is_space(*p)))
      return fail(val_at, "bad value in token '" + token_text(tok) + "'");
    if (!std::isfinite(v)) return fail(val_at, "value in token '" + token_text(tok) + "' is not finite");
    idx.push_back(hash_bits > 0 ? hashed_feature_row(i, hash_bits) : static_cast<std::uint32_t>(i));
    fld.push_back(static_cast<std::uint16_t>(f));
    val.push_back(v);
  }
}

void parse_chunk(const char* begin, const char* end, TextFormat format, const ReadOptions& options, ChunkResult& res) {
  // Page faults are dear: size the arrays once from the text ("i:v " is at least 4 bytes).
  const std::size_t nnz_guess = std::size_t(end - begin) / 8;
  res.data.index.reserve(nnz_guess);
  res.data.field.reserve(nnz_guess);
  res.data.value.reserve(nnz_guess);
  advise_huge_pages(res.data.index.data(), nnz_guess * sizeof(std::uint32_t));
  advise_huge_pages(res.data.field.data(), nnz_guess * sizeof(std::uint16_t));
  advise_huge_pages(res.data.value.data(), nnz_guess * sizeof(float));
  std::vector<std::uint32_t> idx;
  std::vector<std::uint16_t> fld;
  std::vector<float> val;
  for (const char* line = begin; line < end;) {
    const char* nl = static_cast<const char*>(std::memchr(line, '\n', std::size_t(end - line)));
    const char* line_end = nl ? nl : end;
    ++res.lines;
    if (line_end - line > options.max_line_bytes) {
      if (res.first_error.line < 0)
        res.first_error = {res.lines, 1,
                           "a line of " + std::to_string(line_end - line) +
                               " bytes, longer than data.max_line_bytes = " + std::to_string(options.max_line_bytes)};
      if (!options.skip_bad_lines) return;
      ++res.skipped;
      line = nl ? nl + 1 : end;
      continue;
    }
    const char* stop = line_end;
    if (stop > line && stop[-1] == '\r') --stop;
    stop = std::find(line, stop, '#');
    const char* first = line;
    while (first < stop && is_space(*first)) ++first;
    if (first < stop) {
      float y = 0;
      LineError err;
      if (parse_line(line, stop, format, options.hash_bits, idx, fld, val, y, err)) {
        for (std::size_t j = 0; j < idx.size(); ++j) {
          res.max_index = std::max<std::int64_t>(res.max_index, idx[j]);
          res.max_field = std::max<int>(res.max_field, fld[j]);
        }
        res.data.append_row(idx.data(), fld.data(), val.data(), idx.size(), y);
      } else {
        err.line = res.lines;
        if (res.first_error.line < 0) res.first_error = err;
        if (!options.skip_bad_lines) return;
        ++res.skipped;
      }
    }
    line = nl ? nl + 1 : end;
  }
}

void check_hash_bits(int bits) {
  SKEW_CHECK(bits >= 0 && bits <= kMaxHashBits,
             "data.hash_bits = " << bits << " is out of range (0 = off, or 1.." << kMaxHashBits << ")");
}

}  // namespace

TextFormat format_for(const std::string& path, const std::string& option) {
  if (option == "libsvm") return TextFormat::Libsvm;
  if (option == "libffm") return TextFormat::Libffm;
  SKEW_CHECK(option == "auto", "data.format must be auto, libsvm or libffm, got '" << option << "'");
  const auto ext = std::filesystem::path(path).extension().string();
  return ext == ".libffm" || ext == ".ffm" ? TextFormat::Libffm : TextFormat::Libsvm;
}

SparseDataset parse_text(std::string_view text, const std::string& origin, TextFormat format,
                         const ReadOptions& options, ReadReport* report) {
  check_hash_bits(options.hash_bits);
  const int threads = std::max(1, std::min<int>(options.threads, int(text.size() / (1 << 20)) + 1));
  std::vector<const char*> cuts{text.data()};
  for (int t = 1; t < threads; ++t) {
    const char* guess = std::max(cuts.back(), text.data() + text.size() * std::size_t(t) / std::size_t(threads));
    const char* text_end = text.data() + text.size();
    const char* nl = std::find(guess, text_end, '\n');
    cuts.push_back(nl == text_end ? text_end : nl + 1);
  }
  cuts.push_back(text.data() + text.size());
  std::vector<ChunkResult> parts(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  try {
    for (int t = 1; t < threads; ++t)
      pool.emplace_back([&, t] {
        parse_chunk(cuts[std::size_t(t)], cuts[std::size_t(t) + 1], format, options, parts[std::size_t(t)]);
      });
  } catch (const std::system_error& e) {
    for (auto& th : pool) th.join();  // joined before the vector goes, or std::terminate
    throw Error(thread_start_failure("train.threads", int(pool.size()) + 1, threads, e));
  }
  parse_chunk(cuts[0], cuts[1], format, options, parts[0]);
  for (auto& th : pool) th.join();

  // The first chunk's arrays become the dataset's; the others are appended to them.
  SparseDataset out = std::move(parts[0].data);
  parts[0].data = SparseDataset{};
  std::int64_t line_base = options.line_offset, max_index = -1;
  ReadReport local;
  for (auto& part : parts) {
    if (part.first_error.line >= 0) {
      const std::string where = origin + ":" + std::to_string(line_base + part.first_error.line) + ":" +
                                std::to_string(part.first_error.column) + ": " + part.first_error.why;
      if (!options.skip_bad_lines) SKEW_THROW(where << " (set data.skip_bad_lines = true to skip such lines)");
      if (local.first_bad_line.empty()) local.first_bad_line = where;
    }
    line_base += part.lines;
    local.skipped_lines += part.skipped;
    max_index = std::max(max_index, part.max_index);
    out.num_fields = std::max(out.num_fields, part.max_field + 1);
    const std::int64_t base = static_cast<std::int64_t>(out.index.size());
    if (part.data.label.empty()) continue;  // moved above, or no rows
    for (std::size_t r = 1; r < part.data.row_ptr.size(); ++r) out.row_ptr.push_back(base + part.data.row_ptr[r]);
    out.index.insert(out.index.end(), part.data.index.begin(), part.data.index.end());
    out.field.insert(out.field.end(), part.data.field.begin(), part.data.field.end());
    out.value.insert(out.value.end(), part.data.value.begin(), part.data.value.end());
    out.label.insert(out.label.end(), part.data.label.begin(), part.data.label.end());
  }
  // Hashed data spans the whole row space, so training and validation files agree on it.
  out.num_features = options.hash_bits > 0 ? std::int64_t(1) << options.hash_bits : max_index + 1;
  local.lines = line_base - options.line_offset;
  if (report) {
    report->lines = local.lines;
    report->skipped_lines = local.skipped_lines;
    report->first_bad_line = local.first_bad_line;
  }
  return out;
}

std::string format_text(const SparseDataset& d, TextFormat format) {
  std::string out;
  char number[32];
  const auto put = [&](auto x) {
    const auto r = std::to_chars(number, number + sizeof number, x);  // shortest: reads back exactly
    out.append(number, r.ptr);
  };
  for (std::int64_t r = 0; r < d.rows(); ++r) {
    out += d.label[std::size_t(r)] > 0 ? '1' : '0';
    for (std::int64_t e = d.row_ptr[std::size_t(r)]; e < d.row_ptr[std::size_t(r) + 1]; ++e) {
      out += ' ';
      if (format == TextFormat::Libffm) {
        put(d.field[std::size_t(e)]);
        out += ':';
      }
      put(d.index[std::size_t(e)]);
      out += ':';
      put(d.value[std::size_t(e)]);
    }
    out += '\n';
  }
  return out;
}

namespace {

// A data file that is not a regular file (a FIFO, <(zcat f.gz), /dev/stdin) has no size to map
// and can be read only once, by one process: it is read as it comes, into memory, never cached.
bool is_pipe(const std::string& spec) {
  std::error_code ec;
  return !std::filesystem::is_regular_file(spec, ec);
}

void check_pipe_readable(const std::string& spec, const ReadOptions& o) {
  SKEW_CHECK(!o.use_cache, spec << " is a pipe (a FIFO or <(...)), not a regular file: it can be read only once and "
                                   "has no size or mtime to key a binary cache on; set data.cache=false to read it "
                                   "as it comes");
  SKEW_CHECK(o.world == 1, spec << " is a pipe (a FIFO or <(...)): it can be read once, by one process, not by each of "
                                << o.world << " ranks; write it to a file first");
}

}  // namespace

SparseDataset load_dataset(const std::string& spec, const ReadOptions& o, ReadReport* report_out) {
  SKEW_CHECK(o.world >= 1 && o.rank >= 0 && o.rank < o.world, "bad rank " << o.rank << " of " << o.world);
  Timer timer;
  ReadReport report;
  SparseDataset d;
  if (spec.rfind("synthetic:", 0) == 0) {
    const SyntheticSpec s = parse_synthetic_spec(spec);
    d = generate_synthetic(s, s.rows * o.rank / o.world, s.rows * (o.rank + 1) / o.world);
    report.lines = report.total_rows = s.rows;
    check_hash_bits(o.hash_bits);
    if (o.hash_bits > 0) {  // the generator's ids hashed as a file's would be
      for (auto& i : d.index) i = hashed_feature_row(i, o.hash_bits);
      d.num_features = std::int64_t(1) << o.hash_bits;
    }
  } else {
    SKEW_CHECK(!spec.empty(), "no data file given (an empty path): give a libsvm/libffm file or synthetic:criteo?...");
    SKEW_CHECK(std::filesystem::exists(spec), "data file not found: " << spec);
    SKEW_CHECK(!std::filesystem::is_directory(spec),
               "data file " << spec << " is a directory; give a libsvm/libffm file inside it");
    const bool pipe = is_pipe(spec);
    if (pipe) check_pipe_readable(spec, o);
    const TextFormat format = format_for(spec, o.format);
    const CacheHeader want = cache_key(spec, format, o.skip_bad_lines, o.hash_bits);
    const std::string cache = spec + ".skewbin";
    if (!(o.use_cache && read_cache_slice(cache, want, o, d, report))) {
      std::optional<MappedFile> mapped;  // a file is mapped, a pipe read as it comes
      std::string piped;
      if (pipe)
        piped = read_file(spec);
      else
        mapped.emplace(spec);
      const std::string_view text = pipe ? std::string_view(piped) : mapped->view();
      report.megabytes = double(text.size()) / 1e6;
      SparseDataset all = parse_text(text, spec, format, o, &report);
      report.total_rows = all.rows();
      if (o.use_cache) {
        CacheHeader h = want;
        h.rows = all.rows();
        h.nnz = all.nnz();
        h.num_features = all.num_features;
        h.num_fields = all.num_fields;
        h.lines = report.lines;
        h.skipped = report.skipped_lines;
        report.frequency_order = occurring_by_frequency(feature_counts(all, all.num_features));
        write_cache(cache, h, all, report.frequency_order);
      }
      d = o.world == 1 ? std::move(all)
                       : slice_rows(all, all.rows() * o.rank / o.world, all.rows() * (o.rank + 1) / o.world);
    }
    // No rows at all is a wrong file, not a slice too small for the ranks: name it here.
    SKEW_CHECK(report.total_rows > 0, spec << " holds no rows (" << report.lines << " lines, " << report.skipped_lines
                                           << " of them malformed and skipped; the rest "
                                           << "empty or comments): nothing to read");
    if (report.skipped_lines > 0)
      SKEW_WARN(spec << ": skipped " << report.skipped_lines << " malformed line(s) of " << report.lines
                     << (report.first_bad_line.empty() ? "" : "; first: " + report.first_bad_line));
  }
  report.seconds = timer.seconds();
  if (report_out) *report_out = report;
  return d;
}

}  // namespace skew::wide
