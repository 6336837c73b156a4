// The consumer side of lib/wide/stream.hpp's chunk ring: the first pass's scan over a stream
// (rows, shape, feature counts) and the training batches cut from its chunks (StreamBatches).
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/log.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/stream.hpp"

namespace skew::wide {

StreamScan scan_stream(ChunkStream& stream, int hash_bits, bool count_features,
                       const std::function<void(const SparseDataset&)>& each_chunk) {
  StreamScan scan;
  stream.rewind();
  std::int64_t max_features = 0;
  while (StreamChunk* chunk = stream.next()) {
    const SparseDataset& d = chunk->data;
    scan.rows += d.rows();
    max_features = std::max(max_features, d.num_features);
    scan.num_fields = std::max(scan.num_fields, d.num_fields);
    for (std::size_t r = 0; r + 1 < d.row_ptr.size(); ++r)
      scan.max_row_nonzeros = std::max(scan.max_row_nonzeros, d.row_ptr[r + 1] - d.row_ptr[r]);
    if (count_features) add_feature_counts(d, scan.counts);
    if (each_chunk) each_chunk(d);
    scan.report.lines += chunk->lines;
    scan.report.skipped_lines += chunk->skipped_lines;
    if (scan.report.first_bad_line.empty()) scan.report.first_bad_line = chunk->first_bad_line;
  }
  scan.num_features = hash_bits > 0 ? std::int64_t(1) << hash_bits : max_features;
  if (count_features) scan.counts.resize(std::size_t(scan.num_features), 0);
  scan.report.total_rows = scan.rows;
  scan.report.megabytes = double(stream.file_bytes()) / 1e6;
  return scan;
}

StreamBatches::StreamBatches(ChunkStream& stream, std::int64_t batch_rows, std::function<void(SparseDataset&)> prepare,
                             std::int64_t pass_rows, double progress_seconds)
    : stream_(stream), batch_rows_(batch_rows), pass_rows_(pass_rows), progress_seconds_(progress_seconds) {
  SKEW_CHECK(batch_rows > 0, "a stream's batches need at least one row, got " << batch_rows);
  stream_.prepare_chunks(std::move(prepare));
}

void StreamBatches::rewind() {
  stream_.rewind();
  chunk_ = nullptr;
  ended_ = false;
  pos_ = rows_ = bytes_done_ = 0;
  timer_.reset();
  last_progress_ = 0;
}

bool StreamBatches::fetch() {
  chunk_ = ended_ ? nullptr : stream_.next();
  pos_ = 0;
  if (!chunk_) {
    ended_ = true;
    bytes_done_ = stream_.file_bytes();
    return false;
  }
  bytes_done_ = chunk_->end_offset;
  return true;
}

bool StreamBatches::next(const SparseDataset*& data, std::int64_t& begin, std::int64_t& end) {
  carry_ = SparseDataset{};
  const auto give = [&](const SparseDataset& d, std::int64_t b, std::int64_t e) {
    data = &d;
    begin = b;
    end = e;
    rows_ += e - b;
    if (progress_seconds_ > 0 && timer_.seconds() - last_progress_ >= progress_seconds_) {
      last_progress_ = timer_.seconds();
      const StreamProgress p = progress();
      SKEW_INFO("stream: " << p.rows << " of " << p.pass_rows << " rows, " << std::llround(p.rows_per_second())
                           << " rows/s, " << p.bytes_done / 1000000 << " MB read, epoch ETA "
                           << std::llround(p.eta_seconds()) << " s");
    }
    return true;
  };
  for (;;) {
    if (chunk_) {
      const SparseDataset& d = chunk_->data;
      const std::int64_t avail = d.rows() - pos_;
      if (carry_.rows() == 0 && avail >= batch_rows_) {
        pos_ += batch_rows_;
        return give(d, pos_ - batch_rows_, pos_);
      }
      // The batch continues into the next chunk: its rows here are copied out before this
      // chunk goes back to the ring.
      const std::int64_t take = std::min(avail, batch_rows_ - carry_.rows());
      for (std::int64_t r = pos_; r < pos_ + take; ++r) {
        const std::size_t a = std::size_t(d.row_ptr[std::size_t(r)]);
        carry_.append_row(d.index.data() + a, d.field.data() + a, d.value.data() + a,
                          std::size_t(d.row_ptr[std::size_t(r) + 1]) - a, d.label[std::size_t(r)]);
      }
      pos_ += take;
      if (carry_.rows() == batch_rows_) return give(carry_, 0, batch_rows_);
    }
    if (!fetch()) return carry_.rows() > 0 ? give(carry_, 0, carry_.rows()) : false;
  }
}

StreamProgress StreamBatches::progress() const {
  return StreamProgress{rows_, pass_rows_, bytes_done_, timer_.seconds()};
}

}  // namespace skew::wide
