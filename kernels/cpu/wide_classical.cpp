// Classical schema on the CPU: threads over chunks of samples, each sample gathering its rows,
// predicting and producing its gradient rows. Two ways to share the model between threads:
//   atomic   (wide_classical_gradient) the batch gradient, scattered into one shared array with
//            atomic float adds when threads > 1, which the optimiser then applies once per batch;
//   hogwild  (wide_classical_hogwild) per-sample updates applied in place with plain loads and
//            stores and no synchronisation, as libFM, LIBFFM and xLearn train on the CPU.
// Both run the flow schema's vertex programs (LrProgram, FmProgram in kernels/wide_flow.hpp) for
// LR and FM and the shared FFM entry bodies (kernels/wide_ffm.hpp), prefetch the next sample's
// rows as flow prefetches the next columns', and update through the optimiser's own row loop
// (wide_update_row), so the schemas differ in their schedule only.
#include "kernels/wide_classical.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "kernels/wide_ffm.hpp"
#include "kernels/wide_flow.hpp"

namespace skew::kernels {

WideKind wide_kind_from_name(const std::string& name) {
  if (name == "lr") return WideKind::LR;
  if (name == "fm") return WideKind::FM;
  if (name == "ffm") return WideKind::FFM;
  throw std::invalid_argument("unknown wide model '" + name + "' (expected lr, fm or ffm)");
}

const char* wide_kind_name(WideKind kind) {
  return kind == WideKind::LR ? "lr" : kind == WideKind::FM ? "fm" : "ffm";
}

namespace {

constexpr std::int64_t kSamplesPerTask = 64;

// Per-thread scratch of one task: a sample's partial sums and gradient rows.
struct SampleScratch {
  std::vector<float> acc, rows;
};

// LR and FM: a sample's logit from its partial sums (acc, prog.acc_len() floats).
template <typename Program>
inline float program_logit(const Program& prog, int row_len, const WideBatch& b, const float* params, std::int64_t i,
                           float* acc) {
  std::fill(acc, acc + prog.acc_len(), 0.0f);
  for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e)
    prog.gather(params + 1 + std::int64_t(b.index[e]) * row_len, b.value[e], acc);
  return prog.apply(acc, params[0]);
}

inline float ffm_logit(int k, int row_len, const WideBatch& b, const float* params, std::int64_t i) {
  float z = params[0];
  for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e)
    z = wide_ffm_entry_logit(b, k, row_len, params, e, b.row_ptr[i + 1], z);
  return z;
}

// Calls emit(offset of the row in params, gradient row) for each entry of sample i, whose loss
// gradient is g. Every row is computed from parameters read before emit sees it, and for LR and
// FM a row's gradient reads only its own row and the sample's partial sums; FFM's rows read
// each other's, so they are all computed before the first is emitted (into rows: entries x
// row_len floats), which keeps a per-sample update equal to the mini-batch one at batch 1.
// emit must leave the row it is handed zero (wide_update_row does; the atomic path clears what
// it added): the scratch then never needs clearing, where FFM's is ~40 rows of ~150 floats per
// sample and clearing it cost as much as a third of the sample's arithmetic.
template <typename Emit>
inline void sample_rows(const WideShape& s, const WideBatch& b, const float* params, std::int64_t i, float g,
                        SampleScratch& t, Emit emit) {
  const int row_len = s.row_len();
  const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
  const auto off = [&](std::int64_t e) { return 1 + std::int64_t(b.index[e]) * row_len; };
  if (s.kind == WideKind::FFM) {
    const std::size_t needed = std::size_t(end - begin) * std::size_t(row_len);
    if (t.rows.size() < needed) t.rows.resize(needed, 0.0f);
    for (std::int64_t e = begin; e < end; ++e)
      wide_ffm_entry_scatter(b, s.k, row_len, params, e, begin, end, g, t.rows.data() + (e - begin) * row_len,
                             wide_add_to<false>);
    for (std::int64_t e = begin; e < end; ++e) emit(off(e), t.rows.data() + (e - begin) * row_len);
    return;
  }
  if (t.rows.size() < std::size_t(row_len)) t.rows.resize(std::size_t(row_len), 0.0f);
  for (std::int64_t e = begin; e < end; ++e) {
    const float* row = params + off(e);
    if (s.kind == WideKind::LR)
      LrProgram{0}.scatter(row, b.value[e], t.acc.data(), g, t.rows.data());
    else
      FmProgram{s.k}.scatter(row, b.value[e], t.acc.data(), g, t.rows.data());
    emit(off(e), t.rows.data());
  }
}

// Logit of sample i; t.acc holds its partial sums afterwards (LR, FM).
inline float sample_logit(const WideShape& s, const WideBatch& b, const float* params, std::int64_t i,
                          SampleScratch& t) {
  if (s.kind == WideKind::LR) return program_logit(LrProgram{0}, s.row_len(), b, params, i, t.acc.data());
  if (s.kind == WideKind::FM) return program_logit(FmProgram{s.k}, s.row_len(), b, params, i, t.acc.data());
  return ffm_logit(s.k, s.row_len(), b, params, i);
}

// One thread's state in over_samples, on cache lines of its own: a task's scratch stays with
// its thread (no allocation per task), and one thread's sum never shares a line with another's.
struct alignas(64) ThreadSlot {
  SampleScratch scratch;
  float sum = 0.0f;
};

// Runs fn(sample, end of its task, scratch, thread) over the batch in tasks of kSamplesPerTask
// samples, threads claiming tasks dynamically; returns the threads' sums of fn's results. Tasks
// of a thread run one after another, so end_task(thread) (called after each task's last
// sample) may flush what fn gathered for that thread.
template <typename Fn, typename EndTask>
float over_samples(const WideShape& s, const WideBatch& b, WidePool& pool, Fn fn, EndTask end_task) {
  const std::int64_t tasks = (b.rows + kSamplesPerTask - 1) / kSamplesPerTask;
  std::vector<ThreadSlot> slots(std::size_t(pool.threads()));
  for (ThreadSlot& slot : slots) slot.scratch.acc.resize(std::size_t(s.k) + 2);
  pool.run(tasks, [&](std::int64_t task, int thread) {
    ThreadSlot& slot = slots[std::size_t(thread)];
    float sum = 0.0f;
    const std::int64_t end = std::min(b.rows, (task + 1) * kSamplesPerTask);
    for (std::int64_t i = task * kSamplesPerTask; i < end; ++i) sum += fn(i, end, slot.scratch, thread);
    end_task(thread);
    slot.sum += sum;
  });
  float total = 0.0f;
  for (const ThreadSlot& slot : slots) total += slot.sum;
  return total;
}

template <typename Fn>
float over_samples(const WideShape& s, const WideBatch& b, WidePool& pool, Fn fn) {
  return over_samples(
      s, b, pool, [&](std::int64_t i, std::int64_t end, SampleScratch& t, int) { return fn(i, end, t); }, [](int) {});
}

// Hogwild's bias at several threads. Every sample updates the bias, so a bias shared by all
// threads is one cache line (with its optimiser state's) written by every core for every sample,
// which cost more than the second thread gained (classical FFM: 7.1k rows/s at one thread, 5.1k
// at two). Instead each thread updates a copy of its own (w and the rule's n, z) per sample, as
// the shared bias would be, and at the end of each task (kSamplesPerTask samples) adds what its
// copy moved to the shared bias and state, then starts the next task from the shared values.
// So the bias sees every sample's update, up to threads x kSamplesPerTask samples late, and is
// written once per task instead of once per sample. The adds are atomic (three per task), so
// no thread's move is lost; FTRL's w is a function of z and n, so it is recomputed from the
// merged z and n rather than summed (a racing thread may store its recomputation last: both
// are from states that include its own add). At one thread the shared bias is updated in place,
// exactly as before.
struct alignas(64) BiasCopy {
  float w = 0.0f, n = 0.0f, z = 0.0f;     // the thread's copy
  float w0 = 0.0f, n0 = 0.0f, z0 = 0.0f;  // the shared values it started from
};

class HogwildBias {
 public:
  HogwildBias(const WideUpdateRule& rule, float* params, WideOptimizerState state, int threads)
      : rule_(rule), params_(params), state_(state), copies_(threads > 1 ? std::size_t(threads) : 0) {
    for (int thread = 0; thread < int(copies_.size()); ++thread) load(thread);
  }
  // The sample's bias gradient g applied to thread's bias.
  void update(int thread, float g) {
    if (copies_.empty()) {
      wide_update_row(rule_, params_, &g, 0, 1, 1.0f, state_);
      return;
    }
    BiasCopy& c = copies_[std::size_t(thread)];
    wide_update_row(rule_, &c.w, &g, 0, 1, 1.0f, WideOptimizerState{&c.n, &c.z});
  }
  // Adds thread's moves to the shared bias and restarts its copy from the result.
  void flush(int thread) {
    if (copies_.empty()) return;
    BiasCopy& c = copies_[std::size_t(thread)];
    if (state_.n) std::atomic_ref<float>(state_.n[0]).fetch_add(c.n - c.n0, std::memory_order_relaxed);
    if (state_.z) std::atomic_ref<float>(state_.z[0]).fetch_add(c.z - c.z0, std::memory_order_relaxed);
    if (rule_.kind == WideOptimizerKind::Ftrl) {
      float w = 0.0f, n = load_relaxed(state_.n), z = load_relaxed(state_.z);
      wide_update_coordinate(rule_, w, 0.0f, &n, &z);  // a zero gradient leaves n, z: w from them
      std::atomic_ref<float>(params_[0]).store(w, std::memory_order_relaxed);
    } else {
      std::atomic_ref<float>(params_[0]).fetch_add(c.w - c.w0, std::memory_order_relaxed);
    }
    load(thread);
  }

 private:
  static float load_relaxed(float* p) { return p ? std::atomic_ref<float>(*p).load(std::memory_order_relaxed) : 0.0f; }
  void load(int thread) {
    BiasCopy& c = copies_[std::size_t(thread)];
    c.w = c.w0 = load_relaxed(params_);
    c.n = c.n0 = load_relaxed(state_.n);
    c.z = c.z0 = load_relaxed(state_.z);
  }
  const WideUpdateRule& rule_;
  float* params_;
  WideOptimizerState state_;
  std::vector<BiasCopy> copies_;
};

template <bool Atomic>
void classical(const WideShape& s, const WideBatch& b, const float* params, float* grad, float* logits,
               WidePool& pool) {
  const int row_len = s.row_len();
  const float bias_grad = over_samples(s, b, pool, [&](std::int64_t i, std::int64_t end, SampleScratch& t) {
    if (i + 1 < end) wide_prefetch_sample_rows(b, row_len, i + 1, params, grad, nullptr);
    const float z = sample_logit(s, b, params, i, t);
    logits[i] = z;
    const float g = wide_sigmoid(z) - b.label[i];
    sample_rows(s, b, params, i, g, t, [&](std::int64_t off, float* row) {
      for (int j = 0; j < row_len; ++j) {
        wide_add_to<Atomic>(grad + off + j, row[j]);
        row[j] = 0.0f;
      }
    });
    return g;
  });
  wide_add_to<false>(grad, bias_grad);  // after pool.run returned: no other thread writes
}

}  // namespace

void wide_forward(const WideShape& shape, const WideBatch& batch, const float* params, float* logits, WidePool& pool) {
  over_samples(shape, batch, pool, [&](std::int64_t i, std::int64_t end, SampleScratch& t) {
    if (i + 1 < end) wide_prefetch_sample_rows(batch, shape.row_len(), i + 1, params, nullptr, nullptr);
    logits[i] = sample_logit(shape, batch, params, i, t);
    return 0.0f;
  });
}

void wide_classical_gradient(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                             float* logits, WidePool& pool) {
  if (pool.threads() > 1)
    classical<true>(shape, batch, params, grad, logits, pool);
  else
    classical<false>(shape, batch, params, grad, logits, pool);
}

// Hogwild: threads read and write the shared parameters and optimiser state with plain,
// unsynchronised loads and stores. A racing update of a hot row may be lost or read half-done;
// Hogwild's analysis (Niu et al. 2011) bounds the harm when updates are sparse, and the tests
// bound it here (the loss after an epoch at 2 threads against 1 thread's).
void wide_classical_hogwild(const WideShape& shape, const WideBatch& batch, const WideUpdateRule& rule, float* params,
                            WideOptimizerState state, float* logits, WidePool& pool) {
  const int row_len = shape.row_len();
  HogwildBias bias(rule, params, state, pool.threads());
  over_samples(
      shape, batch, pool,
      [&](std::int64_t i, std::int64_t end, SampleScratch& t, int thread) {
        if (i + 1 < end) wide_prefetch_sample_rows(batch, row_len, i + 1, params, state.n, state.z);
        const float z = sample_logit(shape, batch, params, i, t);
        logits[i] = z;
        const float g = wide_sigmoid(z) - batch.label[i];
        bias.update(thread, g);
        sample_rows(shape, batch, params, i, g, t, [&](std::int64_t off, float* row) {
          wide_update_row(rule, params, row, std::size_t(off), std::size_t(row_len), 1.0f, state);
        });
        return 0.0f;
      },
      [&](int thread) { bias.flush(thread); });
}

}  // namespace skew::kernels
