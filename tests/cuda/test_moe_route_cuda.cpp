// The CUDA twins of the MoE layer's routing and gate kernels (kernels/moe_route.hpp,
// kernels/moe_gate.hpp) against the CPU twins on the same random inputs, odd sizes, some
// assignments dropped (skipped without a GPU). The CPU twins are checked against float64 in
// tests/unit/test_moe_route.cpp and test_moe_gate_kernels.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_gate.hpp"
#include "kernels/moe_route.hpp"
#include "tests/cuda/tensor_transfer.hpp"
#include "tests/cuda_skip.hpp"
#include "tests/unit/random_matrix.hpp"

using namespace skew;
namespace km = skew::kernels::moe;
using skew::test::on_gpu;
using skew::test::on_host;

namespace {

// Past the lane count of moe_lane_sum.hpp in tokens and in width, so each lane adds several terms.
constexpr int kTokens = 301, kTopK = 2, kWidth = 167, kExperts = 9;
constexpr std::int64_t kAssignments = std::int64_t(kTokens) * kTopK;

std::vector<float> uniform(std::size_t n, std::uint64_t stream) {
  return random_matrix(n, 43, stream);
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    bad += !(std::fabs(double(got[i]) - want[i]) <= 1e-6 + rel * std::fabs(double(want[i])));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("CUDA routing keys and row moves equal the CPU ones", "[moe][cuda][route]") {
  SKEW_REQUIRE_GPU();
  Rng rng(47, 1);
  std::vector<std::int32_t> expert(kAssignments);
  std::vector<std::uint8_t> kept(kAssignments);
  for (std::int64_t a = 0; a < kAssignments; ++a)
    expert[a] = static_cast<std::int32_t>(rng.below(kExperts)), kept[a] = rng.below(6) != 0;
  // Two replicas per expert on ranks e % 3 and (e + 1) % 3, the first taking 20 assignments.
  const int replicas = 2, blocks = 3 * kExperts;
  std::vector<std::int64_t> end(kExperts * replicas, INT64_MAX);
  std::vector<std::int32_t> rank(kExperts * replicas);
  for (int e = 0; e < kExperts; ++e)
    end[e * replicas] = 20, rank[e * replicas] = e % 3, rank[e * replicas + 1] = (e + 1) % 3;
  std::vector<std::int32_t> choice(kAssignments), key(kAssignments);
  std::vector<std::int64_t> zero(kExperts + 1, 0), order(kAssignments);
  km::choice_keys(Device::Host, kAssignments, kExperts, expert.data(), kept.data(), choice.data());
  km::stable_positions(Device::Host, choice.data(), kAssignments, kExperts + 1, zero.data(), order.data());
  km::dispatch_keys(Device::Host, kAssignments, kExperts, replicas, expert.data(), kept.data(), order.data(),
                    end.data(), rank.data(), blocks, key.data());
  Tensor dexpert = on_gpu(expert), dkept = on_gpu(kept), dorder = on_gpu(order), dend = on_gpu(end),
         drank = on_gpu(rank);
  Tensor dchoice = on_gpu(std::vector<std::int32_t>(kAssignments)),
         dkey = on_gpu(std::vector<std::int32_t>(kAssignments));
  km::choice_keys(Device::Cuda, kAssignments, kExperts, dexpert.data<std::int32_t>(), dkept.data<std::uint8_t>(),
                  dchoice.data<std::int32_t>());
  km::dispatch_keys(Device::Cuda, kAssignments, kExperts, replicas, dexpert.data<std::int32_t>(),
                    dkept.data<std::uint8_t>(), dorder.data<std::int64_t>(), dend.data<std::int64_t>(),
                    drank.data<std::int32_t>(), blocks, dkey.data<std::int32_t>());
  CHECK(on_host<std::int32_t>(dchoice) == choice);
  CHECK(on_host<std::int32_t>(dkey) == key);

  // Rows: kept assignments to a permutation of [0, kept), dropped ones past the end.
  std::vector<std::int64_t> pos(kAssignments);
  std::int64_t rows = 0;
  for (std::int64_t a = 0; a < kAssignments; ++a) pos[a] = kept[a] ? rows++ : -1;
  for (std::int64_t a = 0; a < kAssignments; ++a)
    if (pos[a] < 0) pos[a] = rows + a;
  const auto x = uniform(std::size_t(kTokens) * kWidth, 2), weight = uniform(kAssignments, 3),
             back = uniform(std::size_t(rows) * kWidth, 4), dy = uniform(std::size_t(kTokens) * kWidth, 5);
  std::vector<float> send(back.size(), 0.0f), y(x.size()), dsend(back.size(), 0.0f), dweight(kAssignments), dx = dy;
  km::dispatch_rows<float>(Device::Host, kAssignments, kTopK, kWidth, pos.data(), rows, x.data(), send.data());
  km::combine<float>(Device::Host, kTokens, kTopK, kWidth, pos.data(), rows, weight.data(), back.data(), y.data());
  km::combine_backward<float>(Device::Host, kAssignments, kTopK, kWidth, pos.data(), rows, weight.data(), dy.data(),
                              back.data(), dsend.data(), dweight.data());
  km::add_rows<float>(Device::Host, kTokens, kTopK, kWidth, pos.data(), rows, back.data(), dx.data());
  Tensor dpos = on_gpu(pos), dxin = on_gpu(x), dw = on_gpu(weight), dback = on_gpu(back), ddy = on_gpu(dy);
  Tensor gsend = on_gpu(std::vector<float>(send.size(), 0.0f)), gy = on_gpu(y),
         gdsend = on_gpu(std::vector<float>(send.size(), 0.0f)), gdweight = on_gpu(dweight), gdx = on_gpu(dy);
  km::dispatch_rows<float>(Device::Cuda, kAssignments, kTopK, kWidth, dpos.data<std::int64_t>(), rows,
                           dxin.data<float>(), gsend.data<float>());
  km::combine<float>(Device::Cuda, kTokens, kTopK, kWidth, dpos.data<std::int64_t>(), rows, dw.data<float>(),
                     dback.data<float>(), gy.data<float>());
  km::combine_backward<float>(Device::Cuda, kAssignments, kTopK, kWidth, dpos.data<std::int64_t>(), rows,
                              dw.data<float>(), ddy.data<float>(), dback.data<float>(), gdsend.data<float>(),
                              gdweight.data<float>());
  km::add_rows<float>(Device::Cuda, kTokens, kTopK, kWidth, dpos.data<std::int64_t>(), rows, dback.data<float>(),
                      gdx.data<float>());
  CHECK(on_host<float>(gsend) == send);
  require_close(on_host<float>(gy), y, 1e-6);
  require_close(on_host<float>(gdsend), dsend, 1e-6);
  CHECK(on_host<float>(gdweight) == dweight);  // the same lane sums in the same order
  require_close(on_host<float>(gdx), dx, 1e-6);
  // Gather back the dispatched rows of the kept assignments, and regroup received rows.
  std::vector<std::int64_t> kept_pos;
  for (std::int64_t a = 0; a < kAssignments; ++a)
    if (kept[a]) kept_pos.push_back(pos[a]);
  Tensor dkept_pos = on_gpu(kept_pos), gout = on_gpu(std::vector<float>(send.size()));
  std::vector<float> out(send.size());
  km::gather_rows<float>(Device::Host, rows, kWidth, kept_pos.data(), send.data(), out.data());
  km::gather_rows<float>(Device::Cuda, rows, kWidth, dkept_pos.data<std::int64_t>(), gsend.data<float>(),
                         gout.data<float>());
  CHECK(on_host<float>(gout) == out);
  std::vector<std::int64_t> begin(blocks + 1, 0), target(blocks);
  for (int b = 0; b < blocks; ++b) begin[b + 1] = begin[b] + (b % 4 == 1 ? 0 : 1 + b % 5), target[b] = 3 * b;
  std::vector<std::int64_t> local(static_cast<std::size_t>(begin[blocks]));
  km::local_positions(Device::Host, begin[blocks], blocks, begin.data(), target.data(), local.data());
  Tensor dbegin = on_gpu(begin), dtarget = on_gpu(target), dlocal = on_gpu(local);
  km::local_positions(Device::Cuda, begin[blocks], blocks, dbegin.data<std::int64_t>(), dtarget.data<std::int64_t>(),
                      dlocal.data<std::int64_t>());
  CHECK(on_host<std::int64_t>(dlocal) == local);
}

TEST_CASE("CUDA gate kernels equal the CPU ones", "[moe][cuda][gate]") {
  SKEW_REQUIRE_GPU();
  // Softmax rows (positive, summing to 1) and their lse; k distinct experts per token.
  std::vector<float> probs = uniform(std::size_t(kTokens) * kExperts, 6), lse(kTokens),
                     dweight = uniform(kAssignments, 7);
  for (int t = 0; t < kTokens; ++t) {
    double z = 0;
    for (int e = 0; e < kExperts; ++e) z += std::exp(3.0 * probs[t * kExperts + e]);
    for (int e = 0; e < kExperts; ++e)
      probs[t * kExperts + e] = static_cast<float>(std::exp(3.0 * probs[t * kExperts + e]) / z);
    lse[t] = static_cast<float>(std::log(z));
  }
  std::vector<std::int32_t> forced(kAssignments);
  for (std::int64_t a = 0; a < kAssignments; ++a)
    forced[a] = static_cast<std::int32_t>((a / kTopK * 5 + a % kTopK) % kExperts);
  std::vector<double> aux_coef(kExperts), stats(kExperts + 1);
  for (int e = 0; e < kExperts; ++e) aux_coef[e] = 0.01 * (e + 1);
  std::vector<std::int32_t> expert(kAssignments);
  std::vector<float> weight(kAssignments), dlogits(probs.size()), scaled = probs;
  km::gate_statistics<float>(Device::Host, kTokens, kExperts, probs.data(), lse.data(), stats.data());
  km::force_choices<float>(Device::Host, kAssignments, kTopK, kExperts, forced.data(), probs.data(), expert.data(),
                           weight.data());
  km::gate_logit_grads<float>(Device::Host, kTokens, kExperts, kTopK, probs.data(), lse.data(), expert.data(),
                              dweight.data(), aux_coef.data(), 0.02, 301.0, dlogits.data());
  km::scale_inplace<float>(Device::Host, static_cast<std::int64_t>(scaled.size()), scaled.data(), dlogits.data());
  Tensor dprobs = on_gpu(probs), dlse = on_gpu(lse), ddw = on_gpu(dweight), dforced = on_gpu(forced),
         dcoef = on_gpu(aux_coef), dstats = on_gpu(stats), dexpert = on_gpu(expert), dweight_out = on_gpu(weight),
         ddl = on_gpu(dlogits), dscaled = on_gpu(probs);
  km::gate_statistics<float>(Device::Cuda, kTokens, kExperts, dprobs.data<float>(), dlse.data<float>(),
                             dstats.data<double>());
  km::force_choices<float>(Device::Cuda, kAssignments, kTopK, kExperts, dforced.data<std::int32_t>(),
                           dprobs.data<float>(), dexpert.data<std::int32_t>(), dweight_out.data<float>());
  km::gate_logit_grads<float>(Device::Cuda, kTokens, kExperts, kTopK, dprobs.data<float>(), dlse.data<float>(),
                              dexpert.data<std::int32_t>(), ddw.data<float>(), dcoef.data<double>(), 0.02, 301.0,
                              ddl.data<float>());
  km::scale_inplace<float>(Device::Cuda, static_cast<std::int64_t>(probs.size()), dscaled.data<float>(),
                           ddl.data<float>());
  const std::vector<double> got_stats = on_host<double>(dstats);
  CHECK(got_stats == stats);  // the same lane sums in the same order
  CHECK(on_host<std::int32_t>(dexpert) == expert);
  CHECK(on_host<float>(dweight_out) == weight);
  require_close(on_host<float>(ddl), dlogits, 1e-5);
  require_close(on_host<float>(dscaled), scaled, 1e-5);
}
