// Binary data cache (FILE.skewbin beside a libsvm file), read through load_dataset. The input is
// a whole cache file; its first 32 bytes (magic, source size and mtime, format, skip flag), the
// source's ctime and inode and its payload checksum are overwritten to match the source and the payload, so the reader
// trusts the rest, and two of the bytes choose the rank slice first. The header's hash_bits word is reduced to a valid
// data.hash_bits, which the read asks for, so hashed caches are read too. A rejection must be a skew::Error naming the
// cache (or, for a cache of no rows, its source); a loaded slice must be consistent (see wide_check.hpp). On one rank
// the same bytes also go through the load beside training (lib/wide/cache_load.hpp), which must decline them (null: the
// whole load decides), or refuse them as the whole load did (an error naming the cache, never a damaged checksum: it is
// sealed), or give the whole load's rows; and through the whole load with its second half on a thread of its own
// (train.threads > 1), which must give the same rows or the same error.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "lib/wide/cache_load.hpp"
#include "tests/fuzz/wide_check.hpp"

namespace {
constexpr std::size_t kHeaderBytes = 104;    // sizeof(CacheHeader) in lib/wide/cache.hpp
constexpr std::size_t kCrcOffset = 80;       // offsetof(CacheHeader, payload_crc)
constexpr std::size_t kHashBitsOffset = 84;  // offsetof(CacheHeader, hash_bits)
constexpr std::size_t kCtimeOffset = 88;     // offsetof(CacheHeader, source_ctime), then source_inode

struct Source {
  std::string path;
  skew::wide::CacheHeader key;  // its identity: size, mtime, ctime, inode
};

const Source& source() {
  static const Source s = [] {
    Source s;
    s.path = skew::fuzz::write_scratch("data.libsvm", "1 1:0.5 3:1\n0 2:1\n");
    s.key = skew::wide::cache_key(s.path, skew::wide::TextFormat::Libsvm, false, 0);
    return s;
  }();
  return s;
}
// The cache written for this input through OverlappedLoad, against the whole load's rows (null:
// the whole load refused it).
void check_overlapped_load(const Source& src, int hash_bits, const skew::wide::SparseDataset* whole) {
  using namespace skew::wide;
  const std::string cache = src.path + ".skewbin";
  SparseDataset d;
  std::vector<std::uint32_t> order;
  std::unique_ptr<OverlappedLoad> load;
  try {  // a header out of range is refused here, as by the whole load
    load = OverlappedLoad::open(cache, cache_key(src.path, TextFormat::Libsvm, false, hash_bits), d, order);
  } catch (const skew::Error& e) {
    FUZZ_ASSERT(whole == nullptr);
    FUZZ_ASSERT(std::string(e.what()).find(cache) != std::string::npos);
    return;
  }
  if (!load) return;
  load->start(nullptr, std::uint32_t(order.size()), false);
  try {
    load->finish();
  } catch (const DamagedCacheError&) {
    FUZZ_ASSERT(false);
  } catch (const skew::Error& e) {
    FUZZ_ASSERT(whole == nullptr);
    FUZZ_ASSERT(std::string(e.what()).find(cache) != std::string::npos);
    return;
  }
  FUZZ_ASSERT(whole != nullptr);
  load->hand_over(d);
  FUZZ_ASSERT(d.row_ptr == whole->row_ptr && d.label == whole->label && d.index == whole->index &&
              d.field == whole->field && d.value == whole->value && d.num_features == whole->num_features &&
              d.num_fields == whole->num_fields);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Source& src = source();
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() < kHeaderBytes) bytes.resize(kHeaderBytes, '\0');
  skew::wide::ReadOptions o;
  o.world = 1 + static_cast<unsigned char>(bytes[0]) % 4;
  o.rank = static_cast<unsigned char>(bytes[1]) % o.world;
  std::uint32_t hash_bits = 0;
  std::memcpy(&hash_bits, bytes.data() + kHashBitsOffset, 4);
  hash_bits %= skew::wide::kMaxHashBits + 1;
  o.hash_bits = int(hash_bits);
  std::memcpy(bytes.data() + kHashBitsOffset, &hash_bits, 4);
  const std::uint32_t format = 0, skip_bad = 0;  // TextFormat::Libsvm, skip_bad_lines = false
  std::memcpy(bytes.data(), &src.key, 24);       // magic, source size and mtime
  std::memcpy(bytes.data() + 24, &format, 4);
  std::memcpy(bytes.data() + 28, &skip_bad, 4);
  std::memcpy(bytes.data() + kCtimeOffset, &src.key.source_ctime, 16);
  const std::uint32_t crc = skew::crc32c(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes);
  std::memcpy(bytes.data() + kCrcOffset, &crc, 4);
  skew::fuzz::write_scratch("data.libsvm.skewbin", bytes);
  skew::wide::SparseDataset whole;
  bool loaded = false;
  std::string refused;
  try {
    skew::wide::ReadReport report;
    whole = skew::wide::load_dataset(src.path, o, &report);
    FUZZ_ASSERT(report.from_cache);
    skew::fuzz::check_dataset(whole);
    loaded = true;
  } catch (const skew::Error& e) {
    // A corrupt cache is named; a cache of no rows is the source's error ("holds no rows"), which
    // names the source (the cache's path begins with it).
    refused = e.what();
    FUZZ_ASSERT(refused.find(src.path) != std::string::npos);
  }
  // The load that reads the payload's second half on a thread of its own: the same rows, or the
  // same refusal.
  o.threads = 2;
  try {
    const skew::wide::SparseDataset halves = skew::wide::load_dataset(src.path, o);
    FUZZ_ASSERT(loaded && halves.row_ptr == whole.row_ptr && halves.label == whole.label &&
                halves.index == whole.index && halves.field == whole.field && halves.value == whole.value &&
                halves.num_features == whole.num_features && halves.num_fields == whole.num_fields);
  } catch (const skew::Error& e) {
    FUZZ_ASSERT(!loaded && refused == e.what());
  }
  if (o.world == 1) check_overlapped_load(src, o.hash_bits, loaded ? &whole : nullptr);
  return 0;
}
