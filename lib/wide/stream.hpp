// Training data larger than memory (data.max_memory_mb): a libsvm/libffm file, or its binary
// cache (lib/wide/cache.hpp), read in chunks by a reader thread into a small ring of buffers while
// the trainer consumes the chunk before, and the file's mini-batches cut from those chunks in file
// order, exactly as the in-memory epoch cuts them from the whole dataset (wide_train does not
// shuffle), so a streamed run trains the same model bit for bit. Lines are parsed by parse_text
// (lib/wide/reader.cpp): the same validation, and errors name the file's line.
//
// A text chunk is whole lines of the file: a block read from it, cut after its last newline (the
// rest starts the next block). A ring slot holds the chunk's text and its parsed arrays; the block
// is shortened until an upper bound on both (its bytes, plus 12 bytes per newline and 10 per ':'
// for the arrays) fits the slot, so the slots' held bytes never exceed the ring's budget.
// Parsing itself briefly needs up to the parser's growth headroom on top of one chunk's arrays.
// A cache chunk is rows read with pread into arrays sized once to fit the slot (nothing mapped).
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/timer.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"

namespace skew::wide {

struct StreamChunk {
  SparseDataset data;           // the chunk's rows (data.first_row: the first one's row in the file)
  std::int64_t end_offset = 0;  // bytes of the file read through this chunk
  std::int64_t lines = 0, skipped_lines = 0;
  std::string first_bad_line;  // "FILE:LINE:COL: why" with data.skip_bad_lines
};

// The ring and its reader thread; a subclass says how a pass starts and fills a chunk.
class ChunkStream {
 public:
  virtual ~ChunkStream();
  ChunkStream(const ChunkStream&) = delete;
  ChunkStream& operator=(const ChunkStream&) = delete;

  // Starts a pass over the source from its start (abandoning the one under way); there is none
  // before the first call.
  void rewind();
  // The pass's next chunk in file order (the one before it goes back to the ring), or nullptr
  // after the last. Rethrows the reader thread's error (a malformed line, a read failure) when
  // the chunks before it have been consumed.
  StreamChunk* next();

  // The bytes a pass reads (StreamChunk::end_offset counts towards them).
  std::int64_t file_bytes() const { return file_bytes_; }
  std::int64_t ring_budget() const { return slot_bytes_ * std::int64_t(slots_.size()); }
  // The most bytes the ring's slots have held at once (texts plus the arrays' capacity), and
  // the number of chunks read, over every pass so far.
  std::int64_t peak_ring_bytes() const;
  std::int64_t chunks_read() const;
  // From the next rewind() on, each chunk goes through `prepare` on the reader thread before the
  // consumer sees it, so that its normalisation and renumbering overlap training on the last one.
  void prepare_chunks(std::function<void(SparseDataset&)> prepare);
  // From the next rewind() on, a pass yields only the source's rows [first, last) (a rank's share:
  // StreamChunk::data.first_row stays the row's number in the source). A text is still parsed
  // from its start, so a malformed line before `first` is still an error.
  void restrict_rows(std::int64_t first, std::int64_t last);

 protected:
  // `slot_bytes` is what each of `slots` (2 or more) ring buffers may hold; `name_budget` names
  // the setting that sized them, for the error when one line or row cannot fit a slot.
  ChunkStream(std::string path, std::int64_t slot_bytes, int slots, std::string name_budget);
  // Ends the pass under way: a subclass's destructor calls it before its members go.
  void stop();
  // On the reader thread: a pass starts; then each call fills `chunk` (ring slot `slot`) with
  // the pass's next chunk and returns the bytes the slot holds, or -1 after the last chunk.
  virtual void start_pass() = 0;
  virtual std::int64_t fill(std::size_t slot, StreamChunk& chunk) = 0;

  const std::string path_, name_budget_;
  const std::int64_t slot_bytes_;
  std::int64_t file_bytes_ = 0;  // set by the subclass's constructor
  std::int64_t first_row_ = 0, last_row_ = std::numeric_limits<std::int64_t>::max();  // restrict_rows

 private:
  struct Slot {
    StreamChunk chunk;
    std::int64_t held = 0;  // text and arrays' capacity, once filled
    bool filled = false;
  };
  void read_pass();

  std::vector<Slot> slots_;
  std::function<void(SparseDataset&)> prepare_;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false, done_ = false;
  std::exception_ptr error_;
  std::size_t produced_ = 0, consumed_ = 0;  // chunks of this pass
  bool holding_ = false;                     // the consumer holds slot (consumed_ - 1)
  std::int64_t held_now_ = 0, peak_held_ = 0, chunks_ = 0;
};

// A libsvm/libffm file's chunks, parsed.
class TextStream : public ChunkStream {
 public:
  TextStream(std::string path, TextFormat format, const ReadOptions& options, std::int64_t slot_bytes, int slots,
             std::string name_budget);
  ~TextStream() override;

 private:
  void start_pass() override;
  std::int64_t fill(std::size_t slot, StreamChunk& chunk) override;
  std::int64_t fill_block(std::size_t slot, StreamChunk& chunk);

  TextFormat format_;
  ReadOptions options_;
  std::vector<std::string> texts_;  // per slot
  // The pass's place: the text after the last chunk's last newline, the file read to its end.
  std::string carry_;
  bool at_eof_ = false;
  std::int64_t file_offset_ = 0, line_offset_ = 0, row_offset_ = 0;
  int fd_ = -1;
};

// A binary cache's rows: each chunk the most whole rows whose arrays fit the rows and nonzeros
// a slot is sized for (at the file's average nonzeros per row). StreamChunk::lines counts rows.
class CacheStream : public ChunkStream {
 public:
  CacheStream(std::unique_ptr<CacheFile> cache, std::int64_t slot_bytes, int slots, std::string name_budget);
  ~CacheStream() override;
  const CacheHeader& header() const { return cache_->header(); }

 private:
  void start_pass() override { next_row_ = first_row_; }
  std::int64_t fill(std::size_t slot, StreamChunk& chunk) override;

  std::unique_ptr<CacheFile> cache_;
  std::int64_t slot_rows_ = 0, slot_nonzeros_ = 0, next_row_ = 0;
};

// The training file's shape from a first pass: what the in-memory reader learns by loading it.
struct StreamScan {
  std::int64_t rows = 0, num_features = 0;
  int num_fields = 1;
  std::int64_t max_row_nonzeros = 0;
  std::vector<std::int64_t> counts;  // occurrences per model row (when asked for)
  ReadReport report;
};
// A pass over `stream` (from its start) counting rows, feature occurrences (with
// `count_features`), the largest row and field; hash_bits fixes num_features at 2^bits. Each
// chunk, as read, goes to `each_chunk` too when given (the first pass writes the cache with it).
StreamScan scan_stream(ChunkStream& stream, int hash_bits, bool count_features,
                       const std::function<void(const SparseDataset&)>& each_chunk = {});

// Where a pass stands: the progress line's figures.
struct StreamProgress {
  std::int64_t rows = 0, pass_rows = 0, bytes_done = 0;
  double seconds = 0;
  double rows_per_second() const { return seconds > 0 ? double(rows) / seconds : 0.0; }
  // The rest of the pass at the rate so far, by rows (a rank's share of a file ends before the
  // file does, so its bytes would not tell).
  double eta_seconds() const { return rows > 0 ? seconds * double(pass_rows - rows) / double(rows) : 0.0; }
};

// Mini-batches of `batch_rows` rows in file order, each chunk first passed to `prepare`
// (normalisation, renumbering; on the stream's reader thread); a batch spanning two chunks is
// copied into one. A progress line (rows/s, ETA) every `progress_seconds`; a pass yields
// `pass_rows` rows (the first pass counted them).
class StreamBatches {
 public:
  StreamBatches(ChunkStream& stream, std::int64_t batch_rows, std::function<void(SparseDataset&)> prepare,
                std::int64_t pass_rows, double progress_seconds = 5.0);
  void rewind();
  // The next batch: rows [begin, end) of *data (valid until the next call); false at the end.
  bool next(const SparseDataset*& data, std::int64_t& begin, std::int64_t& end);
  StreamProgress progress() const;

 private:
  bool fetch();
  ChunkStream& stream_;
  std::int64_t batch_rows_, pass_rows_;
  double progress_seconds_;
  StreamChunk* chunk_ = nullptr;
  bool ended_ = false;  // the stream returned its end this pass
  std::int64_t pos_ = 0, rows_ = 0, bytes_done_ = 0;
  SparseDataset carry_;
  Timer timer_;
  double last_progress_ = 0;
};

}  // namespace skew::wide
