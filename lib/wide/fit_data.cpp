#include "lib/wide/fit_data.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "kernels/wide_pool.hpp"
#include "lib/wide/holdout.hpp"
#include "lib/wide/memory_budget.hpp"

namespace skew::wide {

ReadOptions read_options(const DataOptions& data, const comm::ProcessGroup& world, int threads) {
  ReadOptions o;
  o.format = data.format;
  o.skip_bad_lines = data.skip_bad_lines;
  o.use_cache = data.cache;
  o.hash_bits = data.hash_bits;
  o.max_line_bytes = data.max_line_bytes;
  o.threads = threads;
  o.rank = world.rank();
  o.world = world.size();
  return o;
}

namespace {

// train.normalize for this model type: auto is on for the factorisation machines, whose pairwise
// terms grow with the square of an instance's scale, and off for LR.
bool normalize_for(Normalize normalize, kernels::WideKind kind) {
  return normalize == Normalize::Auto ? kind != kernels::WideKind::LR : normalize == Normalize::On;
}

// The ring's slots: one being filled, one being trained on, one ready between them.
constexpr int kStreamSlots = 3;
constexpr std::int64_t kMinRingBytes = kStreamSlots * std::int64_t(64 << 10);

// A slot's share of `ring` bytes. Parsing a text chunk needs up to one more slot's worth while
// the parser's arrays grow and are trimmed; a cache chunk's arrays are sized once.
std::int64_t slot_bytes(std::int64_t ring, bool from_cache) {
  return ring / (from_cache ? kStreamSlots : kStreamSlots + 1);
}

std::string max_memory_setting(const DataOptions& data) {
  return "data.max_memory_mb = " + std::to_string(data.max_memory_mb);
}

// Whether data.train names a file (not synthetic data, which is generated whole).
bool is_data_file(const std::string& spec) {
  std::error_code ec;
  return spec.rfind("synthetic:", 0) != 0 && std::filesystem::is_regular_file(spec, ec);
}

// Whether data.train streams: data.max_memory_mb is set and data.train is a file. A whole load
// (the text mapped, then arrays about as large built from it) has no bound short of the file's
// size, so a run that must stay within M streams whatever the file's size.
bool streams(const DataOptions& data) {
  return data.max_memory_mb > 0 && is_data_file(data.train);
}

std::string cache_of(const std::string& spec) {
  return spec + ".skewbin";
}

// Whether data.train may load while the first epoch trains (data.load_overlap): one rank (a rank
// starting over after a damaged cache would leave the others in a collective), the CPU trainer,
// renumbering by the cache's frequency order (counting ids, or listing the model rows they read,
// takes all of them first), a file with a cache, and a CPU for the loader beyond train.threads
// (a pinned pool's passes would wait on the loader's time slices).
bool overlaps_load(const WideOptions& o, const comm::ProcessGroup& world) {
  return o.data.load_overlap && !(o.data.valid == kValidAuto && o.data.valid_fraction > 0) && world.size() == 1 &&
         o.train.device == TrainDevice::Cpu && o.train.renumber && o.data.cache && is_data_file(o.data.train) &&
         o.train.threads < kernels::process_cpus();
}

// data.valid into d.valid: its file or spec, or (auto) the rows of this rank's loaded data.train
// that held_out() picks by model.seed, said in the log. A streamed data.train is not held in
// memory to split: with auto it trains unvalidated, and the log says so.
void load_validation(const WideOptions& o, const ReadOptions& ro, Data& d) {
  const DataOptions& data = o.data;
  if (data.valid != kValidAuto) {
    d.has_valid = !data.valid.empty();
    if (d.has_valid) d.valid = load_dataset(data.valid, ro);
    return;
  }
  if (data.valid_fraction == 0) {
    SKEW_INFO("validation: none (data.valid = auto with data.valid_fraction = 0)");
  } else if (d.streamed) {
    SKEW_WARN("validation: none: data.valid = auto holds out rows of a loaded data.train, and "
              << data.train << " streams (data.max_memory_mb); give data.valid to validate");
  } else {
    d.has_valid = true;
    d.valid = split_holdout(d.train, data.valid_fraction, o.model.seed);
    d.train_rows = d.train.rows();
    SKEW_INFO("validation: " << d.valid.rows() << " rows of data.train held out on rank 0 (data.valid = auto, "
                             << "data.valid_fraction = " << data.valid_fraction << ", drawn by model.seed = "
                             << o.model.seed << "), " << d.train_rows << " left to train on");
  }
}

// d.overlapped opened on data.train's cache, d.train sized and d.report filled from its header;
// false, with nothing changed, when the cache cannot be loaded so.
bool open_overlapped_load(const std::string& spec, const ReadOptions& ro, Data& d) {
  const CacheHeader want = cache_key(spec, format_for(spec, ro.format), ro.skip_bad_lines, ro.hash_bits);
  d.overlapped = OverlappedLoad::open(cache_of(spec), want, d.train, d.report.frequency_order);
  if (!d.overlapped) return false;
  d.load_overlapped = true;
  const CacheHeader& h = d.overlapped->header();
  d.report.lines = h.lines;
  d.report.total_rows = h.rows;
  d.report.from_cache = true;
  d.train_rows = d.train.rows();
  return true;
}

// The first pass over a streamed data.train: its rows, shape and (to renumber) feature counts.
// It reads the file's binary cache when data.cache is on and the cache matches the file and its
// checksum; else it parses the text and, with data.cache on, writes the cache as it goes, so
// that the epochs read binary rows either way. Its ring takes half of what data.max_memory_mb
// leaves beside the process's `resident` bytes; the other half is for the feature counts, which
// grow with the ids read, and the cache's writer. The ring is let go at the end of the pass.
StreamScan scan_training_stream(const WideOptions& o, const ReadOptions& ro, Data& d, std::int64_t resident) {
  const std::string& spec = o.data.train;
  RunMemory held;
  held.baseline = resident;
  const std::int64_t ring =
      ring_bytes_left(o.data.max_memory_mb << 20, held, 2 * kMinRingBytes, max_memory_setting(o.data)) / 2;
  const CacheHeader key = cache_key(spec, format_for(spec, ro.format), ro.skip_bad_lines, ro.hash_bits);
  Timer timer;
  std::unique_ptr<CacheFile> cache = ro.use_cache ? CacheFile::open(cache_of(spec), key, true) : nullptr;
  std::unique_ptr<CacheWriter> writer;
  const CacheStream* from_cache = nullptr;
  if (cache) {
    d.stream = std::make_unique<CacheStream>(std::move(cache), slot_bytes(ring, true), kStreamSlots,
                                             max_memory_setting(o.data));
    from_cache = static_cast<const CacheStream*>(d.stream.get());
  } else {
    d.stream = std::make_unique<TextStream>(spec, format_for(spec, ro.format), ro, slot_bytes(ring, false),
                                            kStreamSlots, max_memory_setting(o.data));
    if (ro.use_cache) writer = std::make_unique<CacheWriter>(cache_of(spec), key);
  }
  StreamScan scan = scan_stream(
      *d.stream, ro.hash_bits, o.train.renumber,
      writer ? std::function<void(const SparseDataset&)>([&](const SparseDataset& chunk) { writer->append(chunk); })
             : nullptr);
  if (from_cache) {
    scan.report.lines = from_cache->header().lines;
    scan.report.skipped_lines = from_cache->header().skipped;
    scan.report.from_cache = true;
  }
  scan.report.megabytes = double(std::filesystem::file_size(spec)) / 1e6;
  SKEW_CHECK(scan.rows > 0, spec << " holds no rows (" << scan.report.lines << " lines, " << scan.report.skipped_lines
                                 << " of them malformed and skipped): nothing to read");
  d.stream_cached = from_cache != nullptr || (writer && writer->finish(scan.num_features, scan.num_fields,
                                                                       scan.report.lines, scan.report.skipped_lines));
  scan.report.seconds = timer.seconds();
  if (scan.report.skipped_lines > 0)
    SKEW_WARN(spec << ": skipped " << scan.report.skipped_lines << " malformed line(s) of " << scan.report.lines
                   << (scan.report.first_bad_line.empty() ? "" : "; first: " + scan.report.first_bad_line));
  SKEW_INFO("data: streaming " << spec << " (" << scan.report.megabytes << " MB with " << max_memory_setting(o.data)
                               << " MiB; the process held " << (resident >> 20) << " MiB before it), first pass "
                               << scan.report.seconds << " s "
                               << (from_cache        ? "over its binary cache " + cache_of(spec)
                                   : d.stream_cached ? "parsing it and writing its binary cache " + cache_of(spec)
                                                     : std::string("parsing it"))
                               << "; the epochs read " << (d.stream_cached ? "the cache" : "the text")
                               << "; the process's peak so far " << (process_memory().peak >> 20) << " MiB");
  d.stream.reset();  // its ring goes before the model is made
  d.report = scan.report;
  return scan;
}

// Each rank's share of a streamed data.train: rows [N r / W, N (r + 1) / W) of its N, the whole
// load's split. Rank 0 alone makes the first pass, so the text is parsed and the cache written
// once; the other ranks wait for its figures in a broadcast, which it sends after the cache was
// renamed into place, so they find the whole cache or none (then they parse the text). Rank 0's
// feature counts are the whole file's; the others' stay empty (zeros in the sum over the ranks).
StreamScan share_training_stream(const WideOptions& o, comm::ProcessGroup& world, const ReadOptions& ro, Data& d) {
  SKEW_CHECK(o.output.checkpoint_interval == 0, max_memory_setting(o.data)
                                                    << " streams " << o.data.train
                                                    << " from its start every epoch, so it resumes from epoch-end "
                                                    << "checkpoints only: set output.checkpoint_interval = 0");
  release_freed_memory_promptly();
  StreamScan scan;
  if (world.rank() == 0) scan = scan_training_stream(o, ro, d, settled_resident_bytes());
  std::vector<std::int64_t> figures{
      scan.rows,         scan.num_features,         scan.num_fields,        scan.max_row_nonzeros,
      scan.report.lines, scan.report.skipped_lines, d.stream_cached ? 1 : 0};
  world.broadcast(comm::view(figures), 0);
  const std::int64_t rows = figures[0];
  d.streamed = true;
  d.train.num_features = figures[1];
  d.train.num_fields = int(figures[2]);
  d.max_row_nonzeros = figures[3];
  d.report.lines = figures[4];
  d.report.skipped_lines = figures[5];
  d.report.total_rows = rows;
  d.stream_cached = figures[6] != 0;
  d.stream_first_row = rows * world.rank() / world.size();
  d.stream_last_row = rows * (world.rank() + 1) / world.size();
  d.train_rows = d.stream_last_row - d.stream_first_row;
  return scan;
}

// Renumbers d's rows by the frequency order every rank read from data.train's binary cache (the
// whole file's, which the counts summed over the ranks would give): no counting, no sort, no
// allreduce of counts. False, with nothing done, unless every rank has it.
bool renumber_from_cache(const DataOptions& data, comm::ProcessGroup& world, Data& d) {
  std::vector<std::int64_t> everyone_has = {!d.streamed && !d.report.frequency_order.empty() ? 1 : 0};
  world.allreduce(comm::view(everyone_has), comm::ReduceOp::Min);
  if (everyone_has[0] == 0) return false;
  const std::vector<std::uint32_t>& occurring = d.report.frequency_order;
  d.order = FeatureOrder::from_occurring(occurring, d.shape.num_features);
  // The order lists the features that occur first: those are the model rows training reads.
  // An overlapped load renumbers its chunks as they come in.
  SKEW_CHECK(d.overlapped || d.order.apply(d.train, d.read.threads) <= occurring.size(),
             order_misses_features(cache_of(data.train)));
  if (d.has_valid) d.order.apply(d.valid, d.read.threads);
  d.rows_read = model_rows_read(d, world, std::int64_t(occurring.size()));
  return true;
}

}  // namespace

std::vector<std::uint8_t> model_rows_read(const Data& d, comm::ProcessGroup& world, std::int64_t occurring) {
  if (d.shape.latent_len() == 0 || (d.streamed && occurring < 0)) return {};
  std::vector<std::uint8_t> read(std::size_t(d.shape.num_features), 0);
  if (occurring >= 0) {  // renumbered by frequency: the first rows, nothing to pass over or sum
    std::fill_n(read.begin(), occurring, 1);
  } else {
    for (const std::uint32_t f : d.train.index) read[f] = 1;
    world.allreduce(comm::view(read), comm::ReduceOp::Max);
  }
  if (d.has_valid)
    for (const std::uint32_t f : d.valid.index) read[f] = 1;
  return read;
}

Data load_data(const WideOptions& o, comm::ProcessGroup& world, bool overlap_allowed) {
  Data d;
  const ReadOptions ro = d.read = read_options(o.data, world, o.train.threads);
  SKEW_CHECK(!o.data.train.empty(),
             "data.train is empty: give a libsvm/libffm file or synthetic:criteo?rows=N&features=F");
  StreamScan scan;
  const std::string& spec = o.data.train;
  std::error_code ec;
  const bool pipe = std::filesystem::exists(spec, ec) && !std::filesystem::is_directory(spec, ec) &&
                    !std::filesystem::is_regular_file(spec, ec);
  SKEW_CHECK(o.data.max_memory_mb == 0 || !pipe,
             "data.train = " << spec << " is a pipe (a FIFO or <(...)), but " << max_memory_setting(o.data)
                             << " streams the file once per epoch, which a pipe cannot give: write it to a file, or "
                                "leave data.max_memory_mb = 0 to read the pipe once, whole");
  if (streams(o.data)) {
    scan = share_training_stream(o, world, ro, d);
  } else if (!(overlap_allowed && overlaps_load(o, world) && open_overlapped_load(spec, ro, d))) {
    d.train = load_dataset(spec, ro, &d.report);
    d.train_rows = d.train.rows();
  }
  load_validation(o, ro, d);
  SKEW_INFO("data: " << d.train_rows << " training rows on rank 0 (" << d.report.lines << " lines"
                     << (d.report.from_cache ? ", from cache" : "") << ", " << d.report.skipped_lines << " skipped, "
                     << (d.overlapped ? "loading" : std::to_string(d.report.seconds) + " s") << ")"
                     << (d.has_valid ? ", validation " + std::to_string(d.valid.rows()) + " rows" : ""));

  kernels::WideShape& shape = d.shape;
  shape.kind = o.model.type;
  shape.k = shape.kind == kernels::WideKind::LR ? 0 : o.model.k;
  const std::int64_t data_features = std::max(d.train.num_features, d.valid.num_features);
  const std::int64_t model_features = o.model.features;
  shape.num_features = model_features > 0 ? model_features : data_features;
  SKEW_CHECK(data_features <= shape.num_features,
             (ro.hash_bits > 0 ? "data.hash_bits = " + std::to_string(ro.hash_bits) + " hashes the ids into rows up to "
                               : std::string("the data has feature ids up to "))
                 << data_features - 1 << " but model.features = " << shape.num_features);
  SKEW_CHECK(shape.num_features <= kMaxModelFeatures,
             (model_features > 0 ? "model.features = " + std::to_string(model_features)
                                 : "the data's feature ids reach " + std::to_string(data_features - 1) +
                                       ", a model of " + std::to_string(data_features) + " rows, which")
                 << " is too large (at most " << kMaxModelFeatures
                 << " rows); set data.hash_bits to hash the ids into fewer rows");
  shape.num_fields = std::max(d.train.num_fields, d.valid.num_fields);
  d.normalize = normalize_for(o.train.normalize, shape.kind);
  if (d.normalize) {
    if (!d.overlapped) normalize_instances(d.train);  // streamed or overlapped: chunks as they arrive
    if (d.has_valid) normalize_instances(d.valid);
  }

  d.renumber = o.train.renumber;
  if (d.renumber && renumber_from_cache(o.data, world, d)) {
    if (d.overlapped) SKEW_INFO("data: " << d.train_rows << " training rows load from the cache while training starts");
    SKEW_INFO("data: features renumbered by frequency, " << d.report.frequency_order.size() << " of "
                                                         << shape.num_features << " occur (order read from the cache)");
    return d;
  }
  std::int64_t occurring = -1;  // of the training rows' features over all ranks, when renumbering
  if (d.renumber) {
    std::vector<std::int64_t> counts =
        d.streamed ? std::move(scan.counts) : feature_counts(d.train, shape.num_features);
    counts.resize(std::size_t(shape.num_features), 0);  // model.features may exceed the data's
    world.allreduce(comm::view(counts), comm::ReduceOp::Sum);
    const std::vector<std::uint32_t> by_count = occurring_by_frequency(counts);
    occurring = std::int64_t(by_count.size());
    d.order = FeatureOrder::from_occurring(by_count, shape.num_features);
    d.order.apply(d.train, d.read.threads);
    if (d.has_valid) d.order.apply(d.valid, d.read.threads);
    SKEW_INFO("data: features renumbered by frequency, " << occurring << " of " << shape.num_features
                                                         << " occur (counted over " << world.size() << " rank(s))");
  }
  d.rows_read = model_rows_read(d, world, occurring);
  return d;
}

void start_overlapped_load(Data& d) {
  if (!d.overlapped) return;
  // open() refuses a cache without a frequency order, so renumber_from_cache took it (d.order).
  d.overlapped->start(&d.order, std::uint32_t(d.report.frequency_order.size()), d.normalize);
}

void settle_overlapped_load(Data& d) {
  if (!d.overlapped) return;
  d.overlapped->finish();
  d.overlapped->hand_over(d.train);
  d.report.seconds = d.overlapped->seconds();
  d.load_wait_seconds = d.overlapped->waited_seconds();
  SKEW_INFO("data: data.train's " << d.train_rows << " rows loaded from its cache in " << d.report.seconds
                                  << " s beside training, which waited " << d.load_wait_seconds
                                  << " s for rows (checksum holds)");
  d.overlapped.reset();
}

std::unique_ptr<StreamBatches> training_stream(const DataOptions& o, Data& data, WideTrainer& trainer,
                                               std::int64_t batch, std::int64_t baseline_bytes, bool keeps_best_copy) {
  const std::int64_t params = std::int64_t(sizeof(float)) * std::int64_t(trainer.parameter_count());
  const Optimizer& optimizer = trainer.optimizer();
  const kernels::WideShape& shape = data.shape;
  const kernels::WideFlow* flow = trainer.flow();
  RunMemory held;
  held.baseline = baseline_bytes;
  held.model = held.gradient = params;
  held.optimizer = std::int64_t(sizeof(float)) * std::int64_t(optimizer.n_state().size() + optimizer.z_state().size());
  held.flow = flow_buffer_bytes(shape.num_features, shape.row_len(), batch, data.max_row_nonzeros,
                                trainer.options().threads, flow ? flow->hot_features() : 0);
  held.best_copy = keeps_best_copy ? params : 0;
  // A batch spanning two chunks is copied (12 B a row, 10 a nonzero) and has its logits; the
  // validation's logits, scores and labels (and the AUC's sort) take up to 32 B a row.
  held.step = batch * (16 + 10 * data.max_row_nonzeros) + (data.has_valid ? 32 * data.valid.rows() : 0);
  held.allocator = (trainer.options().threads + 2) * kAllocatorSlackBytes;  // the pool's, the reader's, main's
  data.stream_held_bytes = held.total();
  const std::int64_t ring = ring_bytes_left(o.max_memory_mb << 20, held, kMinRingBytes, max_memory_setting(o));
  const std::string& spec = o.train;
  const TextFormat format = format_for(spec, data.read.format);
  // The first pass checked the cache's checksum, or wrote it.
  std::unique_ptr<CacheFile> cache =
      data.stream_cached
          ? CacheFile::open(cache_of(spec), cache_key(spec, format, data.read.skip_bad_lines, data.read.hash_bits),
                            false)
          : nullptr;
  const bool from_cache = cache != nullptr;
  if (from_cache)
    data.stream =
        std::make_unique<CacheStream>(std::move(cache), slot_bytes(ring, true), kStreamSlots, max_memory_setting(o));
  else
    data.stream = std::make_unique<TextStream>(spec, format, data.read, slot_bytes(ring, false), kStreamSlots,
                                               max_memory_setting(o));
  data.stream->restrict_rows(data.stream_first_row, data.stream_last_row);
  SKEW_INFO("stream: rows [" << data.stream_first_row << ", " << data.stream_last_row << ") of " << spec
                             << (from_cache ? " from its binary cache" : " parsed from the text") << "; "
                             << max_memory_setting(o) << " MiB holds " << held.describe() << " and a ring of "
                             << (ring >> 20) << " MiB");
  const bool normalize = data.normalize, renumber = data.renumber;
  const FeatureOrder* order = &data.order;
  return std::make_unique<StreamBatches>(
      *data.stream, batch,
      [normalize, renumber, order](SparseDataset& chunk) {
        if (normalize) normalize_instances(chunk);
        if (renumber) order->apply(chunk);
      },
      data.train_rows);
}

}  // namespace skew::wide
