// FasterMoE's smart schedule (lib/moe/smart_schedule.hpp) on 2 and 3 ranks: with 1, 2 and 3
// chunks per peer, the layer's output and every gradient equal the one-all-to-all run (0 chunks)
// bit for bit, on uneven token counts with a rank that sends no token to any peer; the GPT-MoE
// under the fastermoe policy (with shadows) likewise; and, through a recording process group,
// the exchange runs as separate non-blocking stages whose element counts add up to the
// all-to-all's, the next stage posted before the current one is waited for.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <type_traits>

#include "apps/moe_train_options.hpp"
#include "lib/moe/policies/fastermoe.hpp"
#include "lib/moe/session.hpp"
#include "lib/moe/smart_schedule.hpp"
#include "tests/mpi/moe_model_fixture.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew_moe_fixture;

namespace {

// Forwards everything to the world group; records the point-to-point batches (peer, elements,
// tag of every send), each blocking alltoallv's send counts, and the order in which batches are
// posted and waited for.
class RecordingGroup : public comm::ProcessGroup {
 public:
  struct Event {
    bool post;  // false: wait
    int batch;
  };
  struct SendLeg {
    int batch, peer, tag;
    std::size_t count;
  };

  explicit RecordingGroup(comm::ProcessGroup& inner) : inner_(inner) {
    rank_ = inner.rank(), size_ = inner.size(), world_ranks_ = inner.world_ranks();
  }
  std::string backend() const override { return "recording " + inner_.backend(); }
  void allreduce(comm::Buffer b, comm::ReduceOp op) override { inner_.allreduce(b, op); }
  void broadcast(comm::Buffer b, int root) override { inner_.broadcast(b, root); }
  void allgather(comm::Buffer s, comm::Buffer r) override { inner_.allgather(s, r); }
  void allgatherv(comm::Buffer s, comm::Buffer r, const std::vector<std::size_t>& c) override {
    inner_.allgatherv(s, r, c);
  }
  void alltoall(comm::Buffer s, comm::Buffer r) override { inner_.alltoall(s, r); }
  void alltoallv(comm::Buffer s, const std::vector<std::size_t>& sc, comm::Buffer r,
                 const std::vector<std::size_t>& rc) override {
    alltoallv_sends.push_back(sc);
    inner_.alltoallv(s, sc, r, rc);
  }
  void send(comm::Buffer b, int dst, int tag) override { inner_.send(b, dst, tag); }
  void recv(comm::Buffer b, int src, int tag) override { inner_.recv(b, src, tag); }
  void barrier() override { inner_.barrier(); }
  std::unique_ptr<comm::Work> iallreduce(comm::Buffer b, comm::ReduceOp op) override {
    return inner_.iallreduce(b, op);
  }
  std::unique_ptr<comm::Work> ialltoallv(comm::Buffer s, const std::vector<std::size_t>& sc, comm::Buffer r,
                                         const std::vector<std::size_t>& rc) override {
    return inner_.ialltoallv(s, sc, r, rc);
  }
  std::unique_ptr<comm::Work> isend(comm::Buffer b, int dst, int tag) override { return inner_.isend(b, dst, tag); }
  std::unique_ptr<comm::Work> irecv(comm::Buffer b, int src, int tag) override { return inner_.irecv(b, src, tag); }
  std::unique_ptr<comm::Work> batch_isend_irecv(const std::vector<comm::P2POp>& ops) override {
    const int batch = batches++;
    batch_tags.push_back(ops.empty() ? -1 : ops[0].tag);
    for (const auto& op : ops)
      if (op.kind == comm::P2POp::Kind::Send) sends.push_back({batch, op.peer, op.tag, op.buf.count});
    events.push_back({true, batch});
    return std::make_unique<RecordedWork>(inner_.batch_isend_irecv(ops), batch, events);
  }
  std::shared_ptr<comm::ProcessGroup> split(int color, int key) override { return inner_.split(color, key); }

  int batches = 0;
  std::vector<int> batch_tags;  // of each batch's first leg
  std::vector<Event> events;
  std::vector<SendLeg> sends;
  std::vector<std::vector<std::size_t>> alltoallv_sends;

 protected:
  std::shared_ptr<comm::ProcessGroup> create_subgroup(const std::vector<int>& ranks) override {
    return inner_.subgroup(ranks);
  }

 private:
  class RecordedWork : public comm::Work {
   public:
    RecordedWork(std::unique_ptr<comm::Work> inner, int batch, std::vector<Event>& events)
        : inner_(std::move(inner)), batch_(batch), events_(events) {}
    void wait() override {
      if (!waited_) events_.push_back({false, batch_});
      waited_ = true;
      inner_->wait();
    }
    bool test() override { return inner_->test(); }

   private:
    std::unique_ptr<comm::Work> inner_;
    int batch_;
    std::vector<Event>& events_;
    bool waited_ = false;
  };
  comm::ProcessGroup& inner_;
};

constexpr int kD = 6, kF = 10, kTopK = 2;

// Tokens and forced top-2 choices of rank q (every rank computes every rank's): rank q holds
// 4 + 3q tokens; rank 0 routes only to its own experts, so it sends no token to any peer.
struct Routing {
  int n = 0;
  std::vector<std::int32_t> forced;
};
Routing routing_of(int q, int experts, int ranks) {
  Routing r;
  r.n = 4 + 3 * q;
  Rng rng(77, static_cast<std::uint64_t>(q));
  const int own = experts / ranks;
  for (int t = 0; t < r.n; ++t) {
    const int pool = q == 0 ? own : experts;
    const auto a = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(pool)));
    auto b = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(pool - 1)));
    if (b >= a) ++b;
    r.forced.push_back(a), r.forced.push_back(b);
  }
  return r;
}

template <class T>
struct LayerRun {
  std::vector<T> y, dx, dwg;
  std::map<int, std::vector<T>> expert_grads;
  LayerTimes times;
};

// One forward and backward of a 2N-expert layer on this rank's routing, `chunks` per peer.
template <class T>
LayerRun<T> run_layer(comm::ProcessGroup& group, int chunks) {
  const int N = group.size(), E = 2 * N;
  MoeOptions o;
  o.d_model = kD, o.d_ff = kF;
  o.gate.num_experts = E, o.gate.top_k = kTopK;
  o.schedule_chunks = chunks;
  MoeLayer<T> layer(o, group, LayerPlacement::block(E, N, 2));
  layer.init_experts(3, 0, 0.5);
  const Routing r = routing_of(group.rank(), E, N);
  Rng rng(5, static_cast<std::uint64_t>(group.rank()));
  std::vector<T> x(static_cast<std::size_t>(r.n) * kD), wg(static_cast<std::size_t>(kD) * E), dy(x.size());
  for (auto* v : {&x, &wg, &dy})
    for (auto& e : *v) e = static_cast<T>(rng.normal());
  LayerRun<T> out;
  out.y.resize(x.size()), out.dx.resize(x.size()), out.dwg.assign(wg.size(), T(0));
  StepContext ctx;
  ctx.forced = r.forced.data();
  layer.forward(r.n, x.data(), wg.data(), ctx, out.y.data());
  layer.backward(dy.data(), wg.data(), out.dx.data(), out.dwg.data());
  for (auto& [e, s] : layer.experts()) out.expert_grads[e] = s.g.host_copy();
  out.times = layer.times();
  return out;
}

}  // namespace

// Largest |a - b| / max(1, |b|) over two equally long vectors.
template <class T>
double max_relative_gap(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double gap = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    gap =
        std::max(gap, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i]))));
  return gap;
}

// float64 is bit for bit: its products are plain loops, one output row from its input row alone.
// float goes to OpenBLAS, whose sgemm picks its kernel by the matrix size, so a row computed in a
// chunk of a few rows can round differently from the same row in the expert's whole block (the
// rows are the same, the products' summation order inside the library is not): 1e-6 relative.
TEMPLATE_TEST_CASE("smart schedule: layer output and gradients equal the one-all-to-all run", "[moe][fastermoe]", float,
                   double) {
  const double tolerance = std::is_same_v<TestType, double> ? 0.0 : 1e-6;
  const LayerRun<TestType> plain = run_layer<TestType>(world(), 0);
  for (int chunks : {1, 2, 3}) {
    INFO("chunks " << chunks << ", rank " << world().rank());
    const LayerRun<TestType> piped = run_layer<TestType>(world(), chunks);
    double gap = std::max({max_relative_gap(piped.y, plain.y), max_relative_gap(piped.dx, plain.dx),
                           max_relative_gap(piped.dwg, plain.dwg)});
    REQUIRE(piped.expert_grads.size() == plain.expert_grads.size());
    for (const auto& [e, g] : plain.expert_grads) gap = std::max(gap, max_relative_gap(piped.expert_grads.at(e), g));
    UNSCOPED_INFO("largest relative gap " << gap);
    CHECK(gap <= tolerance);
    CHECK(piped.times.alltoall_bytes == plain.times.alltoall_bytes);
  }
}

TEST_CASE("smart schedule: the GPT-MoE under fastermoe (with shadows) equals the one-all-to-all run",
          "[moe][fastermoe]") {
  ModelOptions o = tiny(2 * world().size(), 2);
  o.moe.policy = Policy::FasterMoE;
  const placement::CostModel model = compute_bound_cost_model(o);
  auto train_step = [&](int chunks, std::vector<std::vector<int>>& shadows) {
    ModelOptions c = o;
    c.moe.schedule_chunks = chunks;
    const auto policy = std::make_shared<FasterMoePolicy<double>>(model);
    auto m = std::make_unique<GptMoe<double>>(c, world(), block_placements(c, world().size(), 2), policy);
    m->init(5);
    const double loss = run(*m, make_batch(c, 2 * world().size() + 1, world().rank(), world().size()), true);
    for (auto& layer : m->moe()) shadows.push_back(policy->shadowed(*layer));
    return std::make_pair(loss, std::move(m));
  };
  std::vector<std::vector<int>> plain_shadows;
  auto [plain_loss, plain] = train_step(0, plain_shadows);
  std::size_t shadowed = 0;
  for (const auto& s : plain_shadows) shadowed += s.size();
  CHECK(shadowed > 0);
  for (int chunks : {1, 2, 3}) {
    INFO("chunks " << chunks);
    std::vector<std::vector<int>> shadows;
    auto [loss, piped] = train_step(chunks, shadows);
    REQUIRE(shadows == plain_shadows);  // the same step: the schedule only changes when rows move
    CHECK(loss == plain_loss);
    CHECK(piped->dense_g() == plain->dense_g());
    for (std::size_t l = 0; l < piped->moe().size(); ++l)
      for (auto& [e, s] : piped->moe()[l]->experts()) CHECK(s.g == plain->moe()[l]->experts().at(e).g);
  }
}

TEST_CASE("smart schedule: separate non-blocking stages, posted ahead, adding up to the all-to-all",
          "[moe][fastermoe]") {
  const int N = world().size(), E = 2 * N, me = world().rank();
  // Rows this rank sends to and receives from each peer: forced choices, block placement.
  std::vector<std::size_t> to(static_cast<std::size_t>(N), 0), from(static_cast<std::size_t>(N), 0);
  for (int q = 0; q < N; ++q)
    for (std::int32_t e : routing_of(q, E, N).forced) {
      const int owner = e / (E / N);
      if (q == me) ++to[static_cast<std::size_t>(owner)];
      if (owner == me) ++from[static_cast<std::size_t>(q)];
    }
  RecordingGroup plain_group(world());
  run_layer<double>(plain_group, 0);
  // The one-all-to-all run: four alltoallv rounds, dispatch and return, forward and backward.
  REQUIRE(plain_group.alltoallv_sends.size() == 4);
  for (int chunks : {1, 2, 3}) {
    INFO("chunks " << chunks << ", rank " << me);
    RecordingGroup group(world());
    run_layer<double>(group, chunks);
    CHECK(group.alltoallv_sends.empty());
    const int dispatch_tag = 8700;  // smart_schedule.cpp
    // Per peer: the elements sent, and the send legs of each direction, against the all-to-all's
    // counts and the number of non-empty slices of the peer's rows.
    for (int p = 0; p < N; ++p) {
      if (p == me) continue;
      std::size_t sent = 0, plain_sent = 0;
      int legs_out = 0, legs_back = 0;
      for (const auto& s : group.sends)
        if (s.peer == p) {
          sent += s.count;
          (s.tag == dispatch_tag ? legs_out : legs_back) += 1;
        }
      for (const auto& counts : plain_group.alltoallv_sends) plain_sent += counts[static_cast<std::size_t>(p)];
      CHECK(sent == plain_sent);
      CHECK(sent == 2 * kD * (to[static_cast<std::size_t>(p)] + from[static_cast<std::size_t>(p)]));
      auto slices = [&](std::size_t rows) {
        int n = 0;
        for (int c = 0; c < chunks; ++c) n += (rows * (c + 1) / chunks) > (rows * c / chunks);
        return n;
      };
      CHECK(legs_out == 2 * slices(to[static_cast<std::size_t>(p)]));  // forward and backward
      CHECK(legs_back == 2 * slices(from[static_cast<std::size_t>(p)]));
    }
    // Overlap, per pass (forward, backward; a pass ends when its returns are waited for): each
    // dispatch batch is waited for only after the next one of its pass has been posted, and the
    // returns only after every dispatch of the pass (they overlap the later stages' compute).
    const int kDispatch = 8700;
    std::vector<std::vector<RecordingGroup::Event>> passes(1);
    for (std::size_t i = 0; i < group.events.size(); ++i) {
      const auto& ev = group.events[i];
      const bool dispatch_post = ev.post && group.batch_tags[static_cast<std::size_t>(ev.batch)] == kDispatch;
      if (dispatch_post && i > 0 && !group.events[i - 1].post &&
          group.batch_tags[static_cast<std::size_t>(group.events[i - 1].batch)] != kDispatch)
        passes.emplace_back();
      passes.back().push_back(ev);
    }
    CHECK(passes.size() == 2);
    std::size_t longest = 0;
    for (const auto& pass : passes) {
      std::vector<int> dispatches;  // in post order
      for (const auto& ev : pass)
        if (ev.post && group.batch_tags[static_cast<std::size_t>(ev.batch)] == kDispatch)
          dispatches.push_back(ev.batch);
      longest = std::max(longest, dispatches.size());
      std::vector<char> posted(static_cast<std::size_t>(group.batches), 0);
      std::size_t dispatch_waits = 0;
      for (const auto& ev : pass) {
        if (ev.post) {
          posted[static_cast<std::size_t>(ev.batch)] = 1;
          continue;
        }
        if (group.batch_tags[static_cast<std::size_t>(ev.batch)] != kDispatch) {
          CHECK(dispatch_waits == dispatches.size());
          continue;
        }
        const auto at =
            static_cast<std::size_t>(std::find(dispatches.begin(), dispatches.end(), ev.batch) - dispatches.begin());
        if (at + 1 < dispatches.size()) CHECK(posted[static_cast<std::size_t>(dispatches[at + 1])]);
        ++dispatch_waits;
      }
    }
    if (chunks >= 2) CHECK(longest >= 2);  // the ordering check above had pairs to look at
  }
}

TEST_CASE("moe.fastermoe_chunks: range checked, and set only under the fastermoe policy", "[moe][fastermoe]") {
  const Schema schema = moe_train_schema();
  auto options = [&](std::vector<std::string> overrides) {
    return moe_options(moe_train_options(Config::parse_ini_text(schema, "", "test", std::move(overrides))).moe);
  };
  CHECK(options({"--moe.policy=fastermoe"}).schedule_chunks == 1);  // the paper's pairwise schedule
  CHECK(options({"--moe.policy=fastermoe", "--moe.fastermoe_chunks=4"}).schedule_chunks == 4);
  CHECK(options({"--moe.policy=flexmoe", "--moe.fastermoe_chunks=4"}).schedule_chunks == 0);
  for (const char* bad : {"--moe.fastermoe_chunks=-1", "--moe.fastermoe_chunks=65"})
    CHECK_THAT(skew::test::error_of([&] {
                 options({"--moe.policy=fastermoe", bad});
               }),
               Catch::Contains("moe.fastermoe_chunks"));
}
