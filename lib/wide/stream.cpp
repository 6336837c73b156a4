// The chunk ring of lib/wide/stream.hpp: one reader thread per pass fills the slots in file
// order (parsing text, or reading a binary cache's rows), the consumer takes them in the same
// order and hands each back when it asks for the next.
#include "lib/wide/stream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace skew::wide {

namespace {
template <typename T>
std::int64_t capacity_bytes(const std::vector<T>& v) {
  return std::int64_t(v.capacity() * sizeof(T));
}
std::int64_t arrays_bytes(const SparseDataset& d) {
  return capacity_bytes(d.row_ptr) + capacity_bytes(d.index) + capacity_bytes(d.field) + capacity_bytes(d.value) +
         capacity_bytes(d.label);
}
// What parse_text's arrays for text[0, n) can take at most, the text's capacity included: a row
// per newline (and one unterminated), 8 B of row_ptr + 4 B of label each; a nonzero per ':'
// (4 B index + 2 B field + 4 B value).
std::int64_t slot_bound(const std::string& text, std::size_t n) {
  const char* begin = text.data();
  const std::int64_t newlines = std::count(begin, begin + n, '\n'), colons = std::count(begin, begin + n, ':');
  return std::int64_t(text.capacity()) + 12 * (newlines + 2) + 10 * colons;
}
// Keeps rows [begin, end) of `d` in place (no second copy of a chunk's arrays).
void keep_rows(SparseDataset& d, std::int64_t begin, std::int64_t end) {
  if (begin == 0 && end == d.rows()) return;
  const auto nz_begin = std::ptrdiff_t(d.row_ptr[std::size_t(begin)]),
             nz_end = std::ptrdiff_t(d.row_ptr[std::size_t(end)]);
  const auto keep = [&](auto& v, std::ptrdiff_t b, std::ptrdiff_t e) {
    v.erase(v.begin() + e, v.end());
    v.erase(v.begin(), v.begin() + b);
  };
  keep(d.index, nz_begin, nz_end);
  keep(d.field, nz_begin, nz_end);
  keep(d.value, nz_begin, nz_end);
  keep(d.label, std::ptrdiff_t(begin), std::ptrdiff_t(end));
  keep(d.row_ptr, std::ptrdiff_t(begin), std::ptrdiff_t(end) + 1);
  for (std::int64_t& offset : d.row_ptr) offset -= nz_begin;
  d.first_row += begin;
}
}  // namespace

ChunkStream::ChunkStream(std::string path, std::int64_t slot_bytes, int slots, std::string name_budget)
    : path_(std::move(path)),
      name_budget_(std::move(name_budget)),
      slot_bytes_(slot_bytes),
      slots_(std::size_t(std::max(slots, 0))) {
  SKEW_CHECK(slots >= 2, "a stream ring needs at least 2 slots, got " << slots);
  SKEW_CHECK(slot_bytes >= 4096, name_budget_ << " leaves " << slot_bytes << " bytes per ring slot for " << path_
                                              << " (at least 4096 are needed)");
  done_ = true;  // no pass until rewind()
}

ChunkStream::~ChunkStream() {
  stop();
}

void ChunkStream::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (reader_.joinable()) reader_.join();
}

void ChunkStream::rewind() {
  stop();
  for (Slot& s : slots_) s.filled = false;
  stopping_ = done_ = holding_ = false;
  error_ = nullptr;
  produced_ = consumed_ = 0;
  reader_ = std::thread([this] { read_pass(); });
}

std::int64_t ChunkStream::peak_ring_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_held_;
}

void ChunkStream::prepare_chunks(std::function<void(SparseDataset&)> prepare) {
  stop();  // the reader thread reads prepare_
  prepare_ = std::move(prepare);
}

void ChunkStream::restrict_rows(std::int64_t first, std::int64_t last) {
  SKEW_CHECK(0 <= first && first <= last, "a stream's rows [" << first << ", " << last << ") are not a range");
  stop();  // the reader thread reads the range
  first_row_ = first;
  last_row_ = last;
}

std::int64_t ChunkStream::chunks_read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return chunks_;
}

StreamChunk* ChunkStream::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (holding_) {
    slots_[(consumed_ - 1) % slots_.size()].filled = false;
    holding_ = false;
    changed_.notify_all();
  }
  Slot& slot = slots_[consumed_ % slots_.size()];
  changed_.wait(lock, [&] { return slot.filled || done_; });
  if (!slot.filled) {
    if (error_) std::rethrow_exception(error_);
    return nullptr;
  }
  ++consumed_;
  holding_ = true;
  return &slot.chunk;
}

void ChunkStream::read_pass() {
  try {
    start_pass();
    for (;;) {
      std::size_t index = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        index = produced_ % slots_.size();
        changed_.wait(lock, [&] { return stopping_ || !slots_[index].filled; });
        if (stopping_) break;
      }
      Slot& slot = slots_[index];
      const std::int64_t held = fill(index, slot.chunk);
      if (held < 0) break;
      if (prepare_) prepare_(slot.chunk.data);
      std::lock_guard<std::mutex> lock(mutex_);
      slot.held = held;
      slot.filled = true;
      ++produced_;
      ++chunks_;
      held_now_ = 0;
      for (const Slot& s : slots_) held_now_ += s.held;
      peak_held_ = std::max(peak_held_, held_now_);
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  changed_.notify_all();
}

TextStream::TextStream(std::string path, TextFormat format, const ReadOptions& options, std::int64_t slot_bytes,
                       int slots, std::string name_budget)
    : ChunkStream(std::move(path), slot_bytes, slots, std::move(name_budget)),
      format_(format),
      options_(options),
      texts_(std::size_t(slots)) {
  std::error_code ec;
  file_bytes_ = std::int64_t(std::filesystem::file_size(path_, ec));
  SKEW_CHECK(!ec, "cannot read the size of " << path_ << ": " << ec.message());
}

TextStream::~TextStream() {
  stop();
  if (fd_ >= 0) ::close(fd_);
}

void TextStream::start_pass() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  SKEW_CHECK(fd_ >= 0, "cannot open " << path_ << ": " << std::strerror(errno));
  carry_.clear();
  at_eof_ = false;
  file_offset_ = line_offset_ = row_offset_ = 0;
}

// Reads the next block (the carried tail of the last one first), cuts it after its last newline
// (shorter while its bound exceeds the slot) and parses it into the slot, keeping the rows of
// restrict_rows' range (blocks before it are parsed and dropped). -1 at the end.
std::int64_t TextStream::fill(std::size_t slot, StreamChunk& chunk) {
  for (;;) {
    if (row_offset_ >= last_row_) return -1;
    const std::int64_t held = fill_block(slot, chunk);
    if (held < 0) return -1;
    const std::int64_t first = chunk.data.first_row, rows = chunk.data.rows();
    if (first + rows <= first_row_) continue;
    keep_rows(chunk.data, std::max<std::int64_t>(0, first_row_ - first), std::min(rows, last_row_ - first));
    return held;
  }
}

// The next block of the file, parsed into the slot: the bytes it holds, or -1 at the file's end.
std::int64_t TextStream::fill_block(std::size_t slot, StreamChunk& chunk) {
  // A third of the slot for text leaves two for its arrays: Criteo-like text parses to about
  // its own size, and the bound below shortens blocks of denser text.
  const std::size_t block = std::size_t(slot_bytes_ / 3);
  std::string& text = texts_[slot];
  text.reserve(block);
  text.assign(carry_);
  carry_.clear();
  while (!at_eof_ && text.size() < block) {
    const std::size_t have = text.size();
    text.resize(block);
    const ssize_t got = ::read(fd_, text.data() + have, block - have);
    SKEW_CHECK(got >= 0, "reading " << path_ << ": " << std::strerror(errno));
    text.resize(have + std::size_t(got));
    at_eof_ = got == 0;
  }
  if (text.empty()) return -1;
  const auto too_long = [&] {
    SKEW_THROW(path_ << ":" << line_offset_ + 1 << ": a line longer than a stream ring slot allows (" << slot_bytes_
                     << " bytes of text and parsed arrays; raise " << name_budget_ << ")");
  };
  std::size_t cut = text.size();
  if (!at_eof_) {
    const std::size_t nl = text.rfind('\n');
    if (nl == std::string::npos) too_long();
    cut = nl + 1;
  }
  while (slot_bound(text, cut) > slot_bytes_) {
    const std::size_t nl = cut / 2 > 0 ? text.rfind('\n', cut / 2 - 1) : std::string::npos;
    if (nl == std::string::npos) too_long();
    cut = nl + 1;
  }
  carry_.assign(text, cut, std::string::npos);
  text.resize(cut);

  ReadOptions o = options_;
  o.line_offset = line_offset_;
  ReadReport report;
  chunk.data = parse_text(text, path_, format_, o, &report);
  chunk.data.row_ptr.shrink_to_fit();
  chunk.data.index.shrink_to_fit();
  chunk.data.field.shrink_to_fit();
  chunk.data.value.shrink_to_fit();
  chunk.data.label.shrink_to_fit();
  chunk.data.first_row = row_offset_;
  chunk.lines = report.lines;
  chunk.skipped_lines = report.skipped_lines;
  chunk.first_bad_line = report.first_bad_line;
  line_offset_ += report.lines;
  row_offset_ += chunk.data.rows();
  file_offset_ += std::int64_t(cut);
  chunk.end_offset = file_offset_;
  return std::int64_t(text.capacity()) + arrays_bytes(chunk.data);
}

CacheStream::CacheStream(std::unique_ptr<CacheFile> cache, std::int64_t slot_bytes, int slots, std::string name_budget)
    : ChunkStream(cache->path(), slot_bytes, slots, std::move(name_budget)), cache_(std::move(cache)) {
  file_bytes_ = std::int64_t(cache_->file_bytes());
  // A slot's arrays: 8 B of row_ptr (and one more) + 4 B of label a row, 10 B a nonzero, split
  // at the file's average nonzeros per row.
  const CacheHeader& h = cache_->header();
  const double per_row = h.rows > 0 ? double(h.nnz) / double(h.rows) : 0.0;
  slot_rows_ = std::max<std::int64_t>(1, std::int64_t(double(slot_bytes_ - 8) / (12.0 + 10.0 * per_row)));
  slot_nonzeros_ = (slot_bytes_ - 8 - 12 * slot_rows_) / 10;
}

CacheStream::~CacheStream() {
  stop();
}

// The most rows from next_row_ (up to restrict_rows' last) that fit the slot's arrays, read into
// them; -1 at the end.
std::int64_t CacheStream::fill(std::size_t, StreamChunk& chunk) {
  const CacheHeader& h = cache_->header();
  const std::int64_t end_row = std::min(h.rows, last_row_);
  if (next_row_ >= end_row) return -1;
  SparseDataset& d = chunk.data;
  if (d.row_ptr.capacity() < std::size_t(slot_rows_ + 1)) {  // once per slot: the arrays never grow after
    d.row_ptr.reserve(std::size_t(slot_rows_ + 1));
    d.label.reserve(std::size_t(slot_rows_));
    d.index.reserve(std::size_t(slot_nonzeros_));
    d.field.reserve(std::size_t(slot_nonzeros_));
    d.value.reserve(std::size_t(slot_nonzeros_));
  }
  const std::int64_t r0 = next_row_;
  cache_->read_offsets(r0, std::min(end_row, r0 + slot_rows_), d.row_ptr);
  const auto fits = std::upper_bound(d.row_ptr.begin() + 1, d.row_ptr.end(), d.row_ptr.front() + slot_nonzeros_);
  const std::int64_t rows = std::int64_t(fits - d.row_ptr.begin()) - 1;
  SKEW_CHECK(rows > 0, path_ << ": row " << r0 << " has " << d.row_ptr[1] - d.row_ptr[0]
                             << " nonzeros, more than a stream ring slot holds (" << slot_nonzeros_ << " in "
                             << slot_bytes_ << " bytes; raise " << name_budget_ << ")");
  d.row_ptr.resize(std::size_t(rows + 1));
  const std::int64_t nonzeros_through = d.row_ptr.back();
  cache_->read_rows(r0, d);
  next_row_ = r0 + rows;
  chunk.lines = rows;
  chunk.skipped_lines = 0;
  // The cache's bytes of rows [0, next_row_): the last chunk's end is the file's size.
  chunk.end_offset = std::int64_t(sizeof(CacheHeader)) + 8 + 12 * next_row_ + 10 * nonzeros_through;
  return arrays_bytes(d);
}

}  // namespace skew::wide
