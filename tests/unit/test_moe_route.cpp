// The MoE layer's row-movement kernels (kernels/moe_route.hpp) on the host, float against
// brute-force float64 loops written here from the definitions, on odd shapes with dropped
// assignments: routing keys through replicas, dispatch, gather, combine and its backward, and
// the backward's row add. (Their CUDA twins: tests/cuda/test_moe_layer_cuda.cpp.)
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_route.hpp"
#include "tests/unit/random_matrix.hpp"

using namespace skew;
namespace km = skew::kernels::moe;

namespace {

constexpr int kTokens = 37, kTopK = 2, kWidth = 13, kExperts = 5;
constexpr std::int64_t kAssignments = std::int64_t(kTokens) * kTopK;

std::vector<float> uniform(std::size_t n, std::uint64_t stream) {
  return random_matrix(n, 19, stream);
}

// Random choices (distinct per token), about one in five dropped, and the send rows of the
// kept ones: a random permutation of [0, kept) (the layer's are stable positions; any injective
// map exercises the kernels).
struct Routing {
  std::vector<std::int32_t> expert;
  std::vector<std::uint8_t> kept;
  std::vector<std::int64_t> pos;
  std::int64_t rows = 0;
};
Routing random_routing() {
  Rng rng(23, 1);
  Routing r;
  for (int t = 0; t < kTokens; ++t) {
    const auto first = static_cast<std::int32_t>(rng.below(kExperts));
    r.expert.push_back(first);
    r.expert.push_back((first + 1 + static_cast<std::int32_t>(rng.below(kExperts - 1))) % kExperts);
  }
  for (std::int64_t a = 0; a < kAssignments; ++a) r.kept.push_back(rng.below(5) != 0);
  std::vector<std::int64_t> rows_free;
  for (std::int64_t a = 0; a < kAssignments; ++a)
    if (r.kept[static_cast<std::size_t>(a)]) rows_free.push_back(r.rows++);
  for (std::size_t i = rows_free.size(); i > 1; --i) std::swap(rows_free[i - 1], rows_free[rng.below(i)]);
  std::size_t next = 0;
  for (std::int64_t a = 0; a < kAssignments; ++a)
    r.pos.push_back(r.kept[static_cast<std::size_t>(a)] ? rows_free[next++] : r.rows + a);  // dropped: past the end
  return r;
}

}  // namespace

TEST_CASE("routing keys send each expert's kept assignments to its replicas in order", "[moe][route]") {
  const Routing r = random_routing();
  // Expert e has replicas on ranks (e + i) % 3, i < 1 + e % 2; replica 0 takes the first 3 kept.
  const int ranks = 3, replicas = 2, blocks = ranks * kExperts;
  std::vector<std::int64_t> end(kExperts * replicas, INT64_MAX);
  std::vector<std::int32_t> rank(kExperts * replicas, 0);
  for (int e = 0; e < kExperts; ++e) {
    rank[e * replicas] = e % ranks, rank[e * replicas + 1] = (e + 1) % ranks;
    if (e % 2) end[e * replicas] = 3;
  }
  std::vector<std::int32_t> choice(kAssignments), key(kAssignments);
  km::choice_keys(Device::Host, kAssignments, kExperts, r.expert.data(), r.kept.data(), choice.data());
  std::vector<std::int64_t> zero(kExperts + 1, 0), order(kAssignments);
  km::stable_positions(Device::Host, choice.data(), kAssignments, kExperts + 1, zero.data(), order.data());
  km::dispatch_keys(Device::Host, kAssignments, kExperts, replicas, r.expert.data(), r.kept.data(), order.data(),
                    end.data(), rank.data(), blocks, key.data());
  std::vector<int> seen(kExperts, 0);
  for (std::int64_t a = 0; a < kAssignments; ++a) {
    const int e = r.expert[static_cast<std::size_t>(a)];
    if (!r.kept[static_cast<std::size_t>(a)]) {
      CHECK(choice[static_cast<std::size_t>(a)] == kExperts);
      CHECK(key[static_cast<std::size_t>(a)] == blocks);
      continue;
    }
    const int nth = seen[static_cast<std::size_t>(e)]++;
    const int want_rank = (e % 2 && nth >= 3) ? (e + 1) % ranks : e % ranks;
    CHECK(choice[static_cast<std::size_t>(a)] == e);
    CHECK(key[static_cast<std::size_t>(a)] == want_rank * kExperts + e);
  }
}

TEST_CASE("dispatch, gather, combine and their backward equal float64 loops", "[moe][route]") {
  const Routing r = random_routing();
  const auto x = uniform(std::size_t(kTokens) * kWidth, 2);
  const auto weight = uniform(kAssignments, 3);
  const auto back = uniform(static_cast<std::size_t>(r.rows) * kWidth, 4);
  const auto dy = uniform(std::size_t(kTokens) * kWidth, 5);
  const auto dx0 = uniform(std::size_t(kTokens) * kWidth, 6);

  std::vector<float> send(static_cast<std::size_t>(r.rows) * kWidth, 0.0f);
  km::dispatch_rows<float>(Device::Host, kAssignments, kTopK, kWidth, r.pos.data(), r.rows, x.data(), send.data());
  std::vector<float> gathered(send.size());
  std::vector<std::int64_t> kept_pos;
  for (std::int64_t a = 0; a < kAssignments; ++a)
    if (r.kept[static_cast<std::size_t>(a)]) kept_pos.push_back(r.pos[static_cast<std::size_t>(a)]);
  km::gather_rows<float>(Device::Host, static_cast<std::int64_t>(kept_pos.size()), kWidth, kept_pos.data(), send.data(),
                         gathered.data());
  std::vector<float> y(std::size_t(kTokens) * kWidth);
  km::combine<float>(Device::Host, kTokens, kTopK, kWidth, r.pos.data(), r.rows, weight.data(), back.data(), y.data());
  std::vector<float> dsend(back.size(), 0.0f), dweight(kAssignments, -1.0f);
  km::combine_backward<float>(Device::Host, kAssignments, kTopK, kWidth, r.pos.data(), r.rows, weight.data(), dy.data(),
                              back.data(), dsend.data(), dweight.data());
  std::vector<float> dx = dx0;
  km::add_rows<float>(Device::Host, kTokens, kTopK, kWidth, r.pos.data(), r.rows, back.data(), dx.data());

  std::size_t kept_index = 0;
  for (std::int64_t a = 0; a < kAssignments; ++a) {
    const auto t = static_cast<std::size_t>(a / kTopK);
    const auto at = static_cast<std::size_t>(a);
    if (!r.kept[at]) {
      CHECK(dweight[at] == 0.0f);
      continue;
    }
    const auto row = static_cast<std::size_t>(r.pos[at]);
    double dot = 0;
    for (int c = 0; c < kWidth; ++c) {
      CHECK(send[row * kWidth + c] == x[t * kWidth + c]);
      CHECK(gathered[kept_index * kWidth + c] == x[t * kWidth + c]);
      CHECK(dsend[row * kWidth + c] == Approx(double(weight[at]) * dy[t * kWidth + c]).epsilon(1e-6));
      dot += double(dy[t * kWidth + c]) * back[row * kWidth + c];
    }
    CHECK(dweight[at] == Approx(dot).epsilon(1e-5).margin(1e-6));
    ++kept_index;
  }
  for (int t = 0; t < kTokens; ++t)
    for (int c = 0; c < kWidth; ++c) {
      double want_y = 0, want_dx = dx0[std::size_t(t) * kWidth + c];
      for (int j = 0; j < kTopK; ++j) {
        const auto a = static_cast<std::size_t>(t * kTopK + j);
        if (!r.kept[a]) continue;
        want_y += double(weight[a]) * back[static_cast<std::size_t>(r.pos[a]) * kWidth + c];
        want_dx += back[static_cast<std::size_t>(r.pos[a]) * kWidth + c];
      }
      CHECK(y[std::size_t(t) * kWidth + c] == Approx(want_y).epsilon(1e-5).margin(1e-6));
      CHECK(dx[std::size_t(t) * kWidth + c] == Approx(want_dx).epsilon(1e-5).margin(1e-6));
    }
}

TEST_CASE("received rows regroup expert-contiguously, stable within an expert", "[moe][route]") {
  // 3 sources x 5 experts, some blocks empty (expert 2 receives nothing).
  const int sources = 3, blocks = sources * kExperts;
  Rng rng(29, 7);
  std::vector<std::int64_t> rows(blocks);
  for (int b = 0; b < blocks; ++b) rows[b] = b % kExperts == 2 ? 0 : static_cast<std::int64_t>(rng.below(4));
  std::vector<std::int64_t> per_expert(kExperts, 0), begin(blocks + 1, 0), target(blocks);
  for (int b = 0; b < blocks; ++b) per_expert[b % kExperts] += rows[b], begin[b + 1] = begin[b] + rows[b];
  std::vector<std::int64_t> next(kExperts, 0);  // the layer's table: expert offset + rows from lower sources
  for (int e = 1; e < kExperts; ++e) next[e] = next[e - 1] + per_expert[e - 1];
  for (int b = 0; b < blocks; ++b) target[b] = next[b % kExperts], next[b % kExperts] += rows[b];
  std::vector<std::int64_t> pos(static_cast<std::size_t>(begin[blocks]));
  km::local_positions(Device::Host, begin[blocks], blocks, begin.data(), target.data(), pos.data());
  // Brute force: row i of expert e lands after every row of lower experts and every earlier row of e.
  std::vector<int> expert_of;
  for (int b = 0; b < blocks; ++b) expert_of.insert(expert_of.end(), static_cast<std::size_t>(rows[b]), b % kExperts);
  for (std::size_t i = 0; i < expert_of.size(); ++i) {
    std::int64_t want = 0;
    for (std::size_t j = 0; j < expert_of.size(); ++j)
      want += expert_of[j] < expert_of[i] || (expert_of[j] == expert_of[i] && j < i);
    CHECK(pos[i] == want);
  }
}
