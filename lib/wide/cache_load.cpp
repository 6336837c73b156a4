#include "lib/wide/cache_load.hpp"

#include <algorithm>

#include "core/checksum.hpp"

namespace skew::wide {

namespace {
// Rows a chunk: ~160k Criteo nonzeros, whose ids, fields and values (1.6 MB) stay in L2 from
// their read through their checksum, checks and renumbering.
constexpr std::int64_t kChunkRows = 4096;

template <typename T>
std::vector<T> reserved(std::int64_t n) {
  std::vector<T> v;
  v.reserve(std::size_t(n));
  return v;
}

// `v` grown to `n` elements within its capacity, the new ones' pages faulted in by one call.
template <typename T>
void grow(std::vector<T>& v, std::size_t n) {
  populate_pages(v.data() + v.size(), (n - v.size()) * sizeof(T));
  v.resize(n);
}
}  // namespace

std::unique_ptr<OverlappedLoad> OverlappedLoad::open(const std::string& cache, const CacheHeader& want,
                                                     SparseDataset& into, std::vector<std::uint32_t>& frequency_order) {
  std::unique_ptr<CacheFile> file = CacheFile::open(cache, want, false);
  if (!file) return nullptr;
  const CacheHeader& h = file->header();
  // No rows, skipped lines to report: the whole load says so.
  if (h.rows == 0 || h.skipped > 0) return nullptr;
  const CacheLayout at = file->layout();
  SparseDataset d;
  std::vector<std::uint32_t> order;
  std::uint32_t head = 0, tail = 0;
  try {
    d.row_ptr.resize(std::size_t(h.rows + 1));
    d.label.resize(std::size_t(h.rows));
    head = file->read_summed(at.row_ptr, d.row_ptr.data(), d.row_ptr.size() * 8, 0);
    head = file->read_summed(at.label, d.label.data(), d.label.size() * 4, head);
    file->check_offsets(0, d.row_ptr);
    file->check_labels(0, d.label.data(), d.label.size());
    order.resize(std::size_t((at.end - 8 - at.order) / 4));
    tail = file->read_summed(at.order, order.data(), order.size() * 4, 0);
    std::int64_t listed = 0;
    tail = file->read_summed(at.end - 8, &listed, 8, tail);
    file->check_frequency_order(order);
    if (order.empty()) return nullptr;  // no feature occurs: the renumbering counts the rows instead
  } catch (const Error&) {
    return nullptr;  // the whole load sums the file first and says whether it is damaged or wrong
  }
  d.num_features = h.num_features;
  d.num_fields = int(h.num_fields);
  into = std::move(d);  // the arrays' storage moves with them: the pointers taken below stay valid
  frequency_order = std::move(order);
  std::unique_ptr<OverlappedLoad> load(new OverlappedLoad(std::move(file), into));
  load->head_crc_ = head;
  load->tail_crc_ = tail;
  return load;
}

OverlappedLoad::OverlappedLoad(std::unique_ptr<CacheFile> file, SparseDataset& into)
    : file_(std::move(file)),
      row_ptr_(into.row_ptr.data()),
      label_(into.label.data()),
      index_(reserved<std::uint32_t>(file_->header().nnz)),
      field_(reserved<std::uint16_t>(file_->header().nnz)),
      value_(reserved<float>(file_->header().nnz)),
      index_at_(index_.data()),
      field_at_(field_.data()),
      value_at_(value_.data()) {}

OverlappedLoad::~OverlappedLoad() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void OverlappedLoad::start(const FeatureOrder* order, std::uint32_t occurring, bool normalize) {
  order_ = order;
  occurring_ = occurring;
  normalize_ = normalize;
  thread_ = std::thread([this] { run(); });
}

void OverlappedLoad::run() {
  try {
    load_chunks();
  } catch (...) {
    error_ = std::current_exception();
    published_.store(-1, std::memory_order_release);
  }
  seconds_ = timer_.seconds();
  published_.notify_all();
}

void OverlappedLoad::load_chunks() {
  const CacheHeader& h = file_->header();
  const CacheLayout at = file_->layout();
  std::uint32_t index_crc = 0, field_crc = 0, value_crc = 0;
  for (std::int64_t first = 0, last; first < h.rows; first = last) {
    if (stop_.load(std::memory_order_relaxed)) return;
    last = std::min(h.rows, first + kChunkRows);
    const std::int64_t a = row_ptr_[first], n = row_ptr_[last] - a;
    grow(index_, std::size_t(a + n));
    grow(field_, std::size_t(a + n));
    grow(value_, std::size_t(a + n));
    std::uint32_t* const index = index_at_ + a;
    std::uint16_t* const field = field_at_ + a;
    float* const value = value_at_ + a;
    index_crc = file_->read_summed(at.index + std::uint64_t(a) * 4, index, std::size_t(n) * 4, index_crc);
    field_crc = file_->read_summed(at.field + std::uint64_t(a) * 2, field, std::size_t(n) * 2, field_crc);
    value_crc = file_->read_summed(at.value + std::uint64_t(a) * 4, value, std::size_t(n) * 4, value_crc);
    try {
      file_->check_nonzeros(a, index, field, value, std::size_t(n));
      if (order_) {
        const std::uint32_t end = order_->renumber(index, std::size_t(n));
        SKEW_CHECK(end <= occurring_, order_misses_features(file_->path()));
      }
    } catch (const Error&) {
      // A check's verdict waits for the checksum's, as in the whole load: a damaged cache is
      // re-parsed, an intact one that fails a check is an error.
      if (!file_->payload_intact()) throw damaged();
      throw;
    }
    if (normalize_) normalize_rows(row_ptr_, value_at_, first, last);
    published_.store(last, std::memory_order_release);
    published_.notify_all();
  }
  // The payload in file order: offsets and labels, ids, fields, values, the frequency order.
  const std::uint64_t nnz = std::uint64_t(h.nnz);
  std::uint32_t crc = crc32c_combine(head_crc_, index_crc, nnz * 4);
  crc = crc32c_combine(crc, field_crc, nnz * 2);
  crc = crc32c_combine(crc, value_crc, nnz * 4);
  crc = crc32c_combine(crc, tail_crc_, at.end - at.order);
  if (!file_->checksum_holds(crc)) throw damaged();
}

DamagedCacheError OverlappedLoad::damaged() const {
  return DamagedCacheError("data cache " + file_->path() + " fails its checksum");
}

void OverlappedLoad::wait_rows(std::int64_t end) {
  std::int64_t p = published_.load(std::memory_order_acquire);
  if (p >= end) return;
  Timer waited;
  for (; p < end; p = published_.load(std::memory_order_acquire)) {
    if (p < 0) break;
    published_.wait(p, std::memory_order_acquire);
  }
  waited_seconds_ += waited.seconds();
  if (p < 0) finish();  // throws
}

kernels::WideBatch OverlappedLoad::batch(std::int64_t begin, std::int64_t end) const {
  return rows_batch(row_ptr_, index_at_, field_at_, value_at_, label_, begin, end);
}

void OverlappedLoad::finish() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
}

void OverlappedLoad::hand_over(SparseDataset& into) {
  into.index = std::move(index_);
  into.field = std::move(field_);
  into.value = std::move(value_);
}

}  // namespace skew::wide
