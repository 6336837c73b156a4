// data.train read from its binary cache on a thread of its own while the first epoch trains
// (data.load_overlap): the run's first step waits for the first rows only, not for the file.
//
// open() reads what must be known before the model exists (the header, the row offsets, the
// labels, the frequency order); start() then reads the ids, fields and values a chunk of rows at
// a time into arrays of its own, reserved whole and grown a chunk at a time (sizing a 73 MB
// cache's arrays whole, faulting in and zeroing them, took 30 ms here: most of an LR epoch),
// checks, renumbers and normalises the chunk and publishes it. wait_rows() and batch() are the
// trainer's side; hand_over() gives the arrays to the dataset once the load has settled.
//
// The checksum covers the payload in file order, which a chunked load does not follow: each
// section's pieces are summed in order and the sections combined (crc32c_combine) once the last
// chunk is in. So the verdict on a damaged cache comes at the end of the load (finish()), after
// rows of it may have been trained on: the caller then starts over from the text
// (DamagedCacheError), with the model a load that sums first would have trained.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"

namespace skew::wide {

// A cache whose checksum failed after training had begun on its rows.
class DamagedCacheError : public Error {
 public:
  using Error::Error;
};

class OverlappedLoad {
 public:
  // `cache` opened when its header matches `want` and its row offsets, labels and frequency
  // order pass their checks: `into` gets every row's offsets and label and the header's shape
  // (its nonzeros come with hand_over()), `frequency_order` the cache's. Null otherwise, with
  // nothing changed: the whole load (load_dataset) then decides between re-parsing and an error.
  static std::unique_ptr<OverlappedLoad> open(const std::string& cache, const CacheHeader& want, SparseDataset& into,
                                              std::vector<std::uint32_t>& frequency_order);
  ~OverlappedLoad();  // stops and joins the thread
  OverlappedLoad(const OverlappedLoad&) = delete;
  OverlappedLoad& operator=(const OverlappedLoad&) = delete;

  const CacheHeader& header() const { return file_->header(); }
  // Starts reading the nonzeros. Each chunk's ids are renumbered by `order` (null: kept as read;
  // it must outlive the load) and must then be below `occurring`; with `normalize` its rows are
  // scaled to unit norm (normalize_instances). The row offsets and labels of the `into` given to
  // open() are read through their data pointers: it may move, not be resized.
  void start(const FeatureOrder* order, std::uint32_t occurring, bool normalize);
  // Returns once rows [0, end) are in; throws as finish() does when the load failed first.
  void wait_rows(std::int64_t end);
  // Rows [begin, end) of the load, once wait_rows(end) returned.
  kernels::WideBatch batch(std::int64_t begin, std::int64_t end) const;
  // Waits for the whole load. Returns when the checksum holds and every check passed; throws
  // DamagedCacheError when the checksum fails (a warning names the cache), else the first failed
  // check's error, naming the cache and the row or nonzero. Again after returning: returns.
  void finish();
  // Once finish() returned: the nonzeros into `into`'s arrays (the dataset open() filled).
  void hand_over(SparseDataset& into);
  // From the end of open() to the last chunk's checksum.
  double seconds() const { return seconds_; }
  // How long wait_rows() waited for rows, in all.
  double waited_seconds() const { return waited_seconds_; }

 private:
  OverlappedLoad(std::unique_ptr<CacheFile> file, SparseDataset& into);
  void run();
  void load_chunks();
  DamagedCacheError damaged() const;  // the checksum's verdict, the cache named (its warning said why)

  std::unique_ptr<CacheFile> file_;
  Timer timer_;
  const std::int64_t* row_ptr_;
  const float* label_;
  // Reserved whole at open(), grown by the thread only: the trainer reads the rows it was told
  // are in through the base pointers, never the vectors themselves.
  std::vector<std::uint32_t> index_;
  std::vector<std::uint16_t> field_;
  std::vector<float> value_;
  std::uint32_t* const index_at_;
  std::uint16_t* const field_at_;
  float* const value_at_;
  std::uint32_t head_crc_ = 0, tail_crc_ = 0;  // the row offsets and labels; the frequency order and its length
  const FeatureOrder* order_ = nullptr;
  std::uint32_t occurring_ = 0;
  bool normalize_ = false;
  std::atomic<bool> stop_{false};
  // Rows published; -1 once the load failed (waiters wake on any change).
  std::atomic<std::int64_t> published_{0};
  std::exception_ptr error_;  // written by the thread before published_ says -1 or the thread ends
  double seconds_ = 0;
  double waited_seconds_ = 0;  // the waiting thread's own
  std::thread thread_;
};

}  // namespace skew::wide
