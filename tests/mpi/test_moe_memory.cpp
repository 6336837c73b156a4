// moe_train's memory estimate (lib/moe/memory_estimate.hpp, issue 38) against built networks:
// the parameter count must equal the values the network allocates (dense segments and this
// rank's experts) exactly; the whole estimate (parameters, gradients, AdamW's moments,
// activations) must be within a factor of 2 of the heap a built model, its AdamW and one
// training step hold (glibc's mallinfo2: bytes in use).

#include "lib/moe/memory_estimate.hpp"
#include "lib/moe/models/swin_network.hpp"
#include "lib/moe/optimizer.hpp"
#include "moe_model_fixture.hpp"
#include "tests/unit/heap_usage.hpp"

using namespace skew_moe_fixture;

namespace {
template <class Net>
std::int64_t expert_values(Net& net) {
  std::int64_t values = 0;
  for (auto& layer : net.moe())
    for (auto& [e, s] : layer->experts()) values += std::int64_t(s.w.numel());
  return values;
}

MoeTrainOptions run_options(int batch) {
  MoeTrainOptions o;
  o.model.arch = "gpt";
  o.train.batch_size = batch;
  o.data.builtin_bytes = 0;
  return o;
}
}  // namespace

TEST_CASE("moe memory estimate: GPT parameters exactly, MoE and dense blocks, with replica slots", "[moe][memory]") {
  const int N = world().size();
  for (int moe_every : {1, 2})
    for (int extra_slots : {0, 1}) {
      ModelOptions o = tiny(4, 2);
      o.layers = 3, o.moe_every = moe_every, o.d_ff = 20, o.moe.d_ff = 12;
      // A rank starts with its E / N experts; flexmoe's replicas later fill its placement slots,
      // each an expert of the same size: the estimate counts the slots, the most a rank holds.
      const int slots = 4 / N + extra_slots;
      GptMoe<float> net(o, world(), block_placements(o, N, slots));
      const ModelMemory mem = gpt_model_memory(o, 3, slots);
      CAPTURE(moe_every, extra_slots, N);
      CHECK(mem.dense_params == std::int64_t(net.dense_w().size()));
      CHECK(mem.expert_params * (4 / N) == expert_values(net) * slots);
      CHECK(mem.expert_params > 0);
    }
}

TEST_CASE("moe memory estimate: Swin parameters exactly", "[moe][memory]") {
  const int N = world().size();
  ModelOptions o = tiny(4, 2);
  o.layers = 2, o.moe_every = 2, o.moe.d_ff = 10;
  SwinShape shape;
  shape.image = 12, shape.channels = 1, shape.patch = 2, shape.window = 3, shape.classes = 5, shape.stage1_blocks = 2;
  o.device = Device::Host;
  SwinMoe<float> net(o, shape, world(), block_placements(o, N, 4 / N));
  const ModelMemory mem = swin_model_memory(o, shape, 2, 4 / N);
  CHECK(mem.dense_params == std::int64_t(net.dense_w().size()));
  CHECK(mem.expert_params == expert_values(net));
}

TEST_CASE("moe memory estimate: the total is within a factor of 2 of the heap after one step", "[moe][memory]") {
  const int N = world().size();
  ModelOptions o = tiny(4, 2);
  o.vocab = 256, o.d_model = 64, o.heads = 4, o.layers = 2, o.seq_len = 32, o.moe.d_ff = 128;
  const int sequences = 8;
  const Batch batch = make_batch(o, sequences * N, world().rank(), N);
  const double before = skew::test::heap_in_use();
  double held = 0;
  {
    GptMoe<float> net(o, world(), block_placements(o, N, 4 / N));
    net.init(7);
    AdamW adam(AdamWOptions{}, net, world());
    run(net, batch, true);
    adam.step(0);
    held = skew::test::heap_in_use() - before;
  }
  const ModelMemory mem = gpt_model_memory(o, sequences, 4 / N);
  std::vector<MemoryPart> parts = memory_parts(run_options(sequences), mem);
  parts.pop_back();  // the text: none here
  double estimate = 0;
  for (const MemoryPart& p : parts) estimate += p.bytes;
  skew::test::check_estimate_within_factor_two(held, estimate);
}
