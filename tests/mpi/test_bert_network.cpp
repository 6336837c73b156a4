// The BERT network (GptMoe with causal attention off and untargeted positions) on 1, 2 and 4
// ranks: gradients against float64 central differences, and the masked-LM loss and accuracy
// against a float64 cross-entropy over the chosen positions computed here from the logits.
#include <algorithm>
#include <cmath>

#include "tests/mpi/moe_model_fixture.hpp"

using namespace skew_moe_fixture;

namespace {
ModelOptions tiny_bert() {
  ModelOptions o = tiny(4, 2);
  o.causal = false;
  return o;
}
// Every third global position (and the rest of the batch as make_batch draws it) is in the
// objective; the other targets are kNoTarget.
Batch with_untargeted(Batch b, int rank) {
  for (std::size_t t = 0; t < b.targets.size(); ++t)
    if ((t + static_cast<std::size_t>(rank) * b.targets.size()) % 3 != 0) b.targets[t] = kNoTarget;
  return b;
}
}  // namespace

TEST_CASE("bidirectional network with untargeted positions: gradients match finite differences", "[moe][bert]") {
  const ModelOptions o = tiny_bert();
  const int N = world().size();
  GptMoe<double> m(o, world(), block_placements(o, N, 4));
  m.init(3);
  check_finite_differences(m, with_untargeted(make_batch(o, 4, world().rank(), N), world().rank()));
}

TEST_CASE("masked loss is the float64 mean cross-entropy of the chosen positions over all ranks", "[moe][bert]") {
  const ModelOptions o = tiny_bert();
  const int N = world().size(), V = o.vocab;
  GptMoe<double> m(o, world(), block_placements(o, N, 4));
  m.init(5);
  const Batch full = make_batch(o, 4, world().rank(), N), masked = with_untargeted(full, world().rank());
  // Every position targeted: the logits of all rows (the forward does not depend on targets).
  const double full_aux = run(m, full, false) - m.last_ce();
  const std::vector<double> logits = m.last_logits();
  REQUIRE(logits.size() == full.targets.size() * static_cast<std::size_t>(V));
  // Reference: per chosen row, logsumexp - logit[target] and whether the target is the argmax.
  double sums[3] = {0, 0, 0};  // cross-entropy, hits, chosen positions
  std::vector<double> chosen_rows;
  for (std::size_t t = 0; t < masked.targets.size(); ++t) {
    if (masked.targets[t] == kNoTarget) continue;
    const double* row = logits.data() + t * static_cast<std::size_t>(V);
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(row[v]);
    sums[0] += std::log(z) - row[masked.targets[t]];
    sums[1] += std::max_element(row, row + V) - row == masked.targets[t] ? 1 : 0;
    sums[2] += 1;
    chosen_rows.insert(chosen_rows.end(), row, row + V);
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double masked_loss = run(m, masked, false);
  REQUIRE(m.last_targeted() == sums[2]);
  REQUIRE(m.last_targeted() < 0.5 * 4 * o.seq_len);  // a third of the positions, not all
  REQUIRE(m.last_ce() == Approx(sums[0] / sums[2]).epsilon(1e-12));
  REQUIRE(m.last_correct() == sums[1]);
  REQUIRE(m.last_logits() == chosen_rows);  // the head saw exactly the chosen rows
  // The gates' auxiliary losses are the same in both runs: the step's loss is the CE plus them.
  REQUIRE(masked_loss - m.last_ce() == Approx(full_aux).margin(1e-12));
}
