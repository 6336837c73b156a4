// moe_train's GPT network on the GPU (train.device=cuda: the dense network and the MoE layers'
// data plane, experts and their AdamW there) against the same network on the host, at 2 ranks:
// one forward + backward (loss, every dense and expert gradient; fp32 and bf16 tolerances), 20
// training iterations under each policy (static, deepspeed, fastermoe with its shadows and smart
// schedule, flexmoe with its replica moves), and checkpoints (the same tensors, close
// values, a GPU-written one resumes on the CPU, and a checkpoint loaded into the GPU network saves
// back byte for byte). The world group is the tests' MPI one, so device buffers cross ranks
// through its pinned staging (the hybrid MPI+NCCL group needs a GPU per rank). Skips without a GPU.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_top1.hpp"
#include "lib/moe/resume.hpp"
#include "lib/moe/session.hpp"
#include "tests/cuda_skip.hpp"
#include "tests/mpi/moe_model_fixture.hpp"
#include "tests/mpi/test_moe_util.hpp"

using namespace skew;

namespace {

// The largest |got - want| over the largest |want|: one scale per tensor, so entries near zero
// in a tensor of large ones are held to the tensor's scale.
double scaled_error(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double largest = 0, worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, std::abs(double(want[i])));
    worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
  }
  REQUIRE(largest > 0);  // a zero tensor would compare vacuously
  return worst / largest;
}

// `masked`: BERT's case, two of three positions out of the objective (kNoTarget), so the head
// gathers the targeted rows and scatters their gradient back; attention then is bidirectional.
void require_network_matches(moe::Precision precision, double tolerance, bool masked = false) {
  using namespace skew_moe_fixture;
  comm::ProcessGroup& group = skew_moe_fixture::world();
  ModelOptions o = tiny(4, 2);
  o.vocab = 37, o.d_model = 24, o.heads = 3, o.seq_len = 7, o.d_ff = 40, o.moe.d_ff = 20;
  o.moe_every = 2, o.layers = 3, o.init_std = 0.2, o.precision = precision, o.causal = !masked;
  const auto placements = block_placements(o, group.size(), 2);
  ModelOptions on_gpu = o;
  on_gpu.device = Device::Cuda;
  GptMoe<float> host(o, group, placements), gpu(on_gpu, group, placements);
  host.init(5), gpu.init(5);
  Batch batch = make_batch(o, 6, group.rank(), group.size());
  if (masked)
    for (std::size_t t = 0; t < batch.targets.size(); ++t)
      if (t % 3 != 1) batch.targets[t] = kNoTarget;
  const double host_loss = run(host, batch, true), gpu_loss = run(gpu, batch, true);
  CHECK(gpu_loss == Approx(host_loss).epsilon(tolerance));
  for (const auto& segment : host.segments()) {
    INFO("dense gradient " << segment.name);
    const std::vector<float> want = host.dense_g().host_copy(), got = gpu.dense_g().host_copy();
    const std::vector<float> w(want.begin() + long(segment.offset), want.begin() + long(segment.offset + segment.size));
    const std::vector<float> g(got.begin() + long(segment.offset), got.begin() + long(segment.offset + segment.size));
    CHECK(scaled_error(g, w) <= tolerance);
  }
  for (std::size_t l = 0; l < host.moe().size(); ++l)
    for (auto& [e, state] : host.moe()[l]->experts()) {
      INFO("layer " << l << " expert " << e);
      CHECK(scaled_error(gpu.moe()[l]->experts().at(e).g.host_copy(), state.g.host_copy()) <= tolerance);
    }
}

// Overrides under which each policy does its own work within 20 iterations: flexmoe a cost model
// and threshold that make its planner move replicas (as tests/mpi/test_moe_resume.cpp's),
// fastermoe a slow all-to-all that makes shadowing pay (66 shadows over the 20 records on the CPU).
// Every cost constant is given: measured ones would make the decisions, and the runs, vary.
std::vector<std::string> policy_overrides(const std::string& policy) {
  if (policy == "flexmoe")
    return {"--placement.interval=2",
            "--placement.threshold=1.0",
            "--placement.warmup=1",
            "--placement.noise_z=0",
            "--placement.gemm_flops=1e6",
            "--placement.alltoall_bandwidth=1e9",
            "--placement.nvlink_bandwidth=1e9",
            "--placement.allreduce_bandwidth=1e9",
            "--placement.alltoall_latency=0",
            "--placement.smoothing=0.8"};
  if (policy == "fastermoe")
    return {
        "--moe.fastermoe_chunks=2",         "--placement.gemm_flops=1e12",         "--placement.alltoall_bandwidth=1e5",
        "--placement.nvlink_bandwidth=1e5", "--placement.allreduce_bandwidth=1e9", "--placement.alltoall_latency=0"};
  return {};
}

struct PolicyRun {
  std::vector<double> losses;                        // rank 0's, per iteration
  std::int64_t placement_changes = 0, shadowed = 0;  // flexmoe's moves; fastermoe's shadows over all records
};

// A 20-iteration run of `arch`.
PolicyRun run_policy(const std::string& device, const std::string& policy, const std::string& dir,
                     const std::string& arch) {
  const std::string metrics = dir + "/" + arch + "_" + device + "_" + policy + ".jsonl";
  std::vector<std::string> overrides = {"--train.device=" + device, "--moe.policy=" + policy, "--model.arch=" + arch,
                                        "--train.iterations=20", "--output.metrics=" + metrics};
  for (const std::string& o : policy_overrides(policy)) overrides.push_back(o);
  const Json summary = skew_moe_test::run(moe_train_schema(), overrides);
  skew_moe_test::world().barrier();
  PolicyRun out;
  out.placement_changes = summary.value("placement_changes", std::int64_t{0});
  for (const Json& rec : skew_moe_test::read_jsonl(metrics)) {
    out.losses.push_back(rec["loss"].get<double>());
    for (const Json& layer : rec.value("shadowed", Json::array()))
      out.shadowed += static_cast<std::int64_t>(layer.size());
  }
  return out;
}

}  // namespace

TEST_CASE("the GPT network's forward and backward on the GPU equal the host's (fp32)", "[moe][cuda][network]") {
  SKEW_REQUIRE_GPU();
  require_network_matches(moe::Precision::Fp32, 2e-4);
}

TEST_CASE("the GPT network's forward and backward on the GPU equal the host's (bf16 GEMM inputs)",
          "[moe][cuda][network]") {
  SKEW_REQUIRE_GPU();
  require_network_matches(moe::Precision::Bf16, 2e-2);
}

TEST_CASE("the BERT network (masked targets, bidirectional) on the GPU equals the host's (fp32)",
          "[moe][cuda][network][bert]") {
  SKEW_REQUIRE_GPU();
  require_network_matches(moe::Precision::Fp32, 2e-4, true);
}

TEST_CASE("the top-1 count on the GPU equals its CPU twin", "[moe][cuda][network]") {
  SKEW_REQUIRE_GPU();
  // A vocabulary wider than a block and rows not a multiple of one; ties planted on a third of
  // the rows (the first is the choice), targets hitting about half of them.
  const int rows = 1031, v = 300;
  Rng rng(7, 5);
  std::vector<float> logits(static_cast<std::size_t>(rows) * v);
  for (auto& x : logits) x = static_cast<float>(rng.normal());
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  std::int64_t want = 0;  // by std::max_element
  for (int r = 0; r < rows; ++r) {
    float* row = logits.data() + static_cast<std::size_t>(r) * v;
    if (r % 3 == 0) row[3] = row[211] = 9.0f;
    const auto top = static_cast<std::int32_t>(std::max_element(row, row + v) - row);
    targets[static_cast<std::size_t>(r)] = r % 2 == 0 ? top : (r % 3 == 0 ? 211 : (top + 7) % v);
    want += targets[static_cast<std::size_t>(r)] == top ? 1 : 0;
  }
  REQUIRE(want > 0);
  const Tensor on_gpu_logits = Tensor::from_vector(logits, {rows, v}).to(Device::Cuda);
  const Tensor on_gpu_targets = Tensor::from_vector(targets, {rows}).to(Device::Cuda);
  CHECK(kernels::moe::top1_hits(Device::Host, rows, v, logits.data(), targets.data()) == want);
  CHECK(kernels::moe::top1_hits(Device::Cuda, rows, v, on_gpu_logits.data<float>(),
                                on_gpu_targets.data<std::int32_t>()) == want);
}

TEST_CASE("20 iterations on cuda track the cpu run's losses under each arch and policy", "[moe][cuda][train][bert]") {
  SKEW_REQUIRE_GPU();
  const std::string dir = skew_moe_test::scratch("cuda_losses");
  // gpt under every policy; bert (gpt's network with masked targets) under the two without
  // placement decisions, whose overrides above were sized on gpt.
  const std::vector<std::pair<std::string, std::string>> runs = {{"gpt", "static"},    {"gpt", "deepspeed"},
                                                                 {"gpt", "fastermoe"}, {"gpt", "flexmoe"},
                                                                 {"bert", "static"},   {"bert", "deepspeed"}};
  for (const auto& [arch, policy] : runs) {
    const PolicyRun cpu = run_policy("cpu", policy, dir, arch), cuda = run_policy("cuda", policy, dir, arch);
    if (skew_moe_test::world().rank() != 0) continue;  // rank 0 writes the records
    INFO("arch " << arch << ", policy " << policy);
    REQUIRE(cpu.losses.size() == 20);
    REQUIRE(cuda.losses.size() == 20);
    // The policy's own device work ran: flexmoe moved replicas, fastermoe shadowed experts.
    if (policy == "flexmoe") CHECK((cpu.placement_changes > 0 && cuda.placement_changes > 0));
    if (policy == "fastermoe") CHECK((cpu.shadowed > 0 && cuda.shadowed > 0));
    // fp32 arithmetic in another order (cuBLAS, the kernels' reductions): the runs drift apart
    // slowly, and a near-tied routing choice may flip, so the bound grows with the iteration.
    for (std::size_t it = 0; it < cpu.losses.size(); ++it) {
      INFO("iteration " << it);
      CHECK(cuda.losses[it] == Approx(cpu.losses[it]).epsilon(1e-4 * double(it + 1) + 1e-4));
    }
  }
}

TEST_CASE("a checkpoint written on cuda holds the cpu run's tensors and resumes on cpu", "[moe][cuda][checkpoint]") {
  SKEW_REQUIRE_GPU();
  const std::string dir = skew_moe_test::scratch("cuda_checkpoint");
  const auto shard = [&](const std::string& run) {
    char name[32];
    std::snprintf(name, sizeof name, "rank_%05d.safetensors", skew_moe_test::world().rank());
    return dir + "/" + run + "/step_00000006/" + name;
  };
  for (const char* device : {"cpu", "cuda"})
    skew_moe_test::run(moe_train_schema(), {std::string("--train.device=") + device, "--train.iterations=6",
                                            "--output.checkpoint_dir=" + dir + "/" + device});
  skew_moe_test::world().barrier();
  const TensorFile cpu = load_safetensors(shard("cpu")), cuda = load_safetensors(shard("cuda"));
  REQUIRE(cpu.tensors.size() == cuda.tensors.size());
  for (std::size_t i = 0; i < cpu.tensors.size(); ++i) {
    const auto& [name, want] = cpu.tensors[i];
    INFO("tensor " << name);
    REQUIRE(cuda.tensors[i].first == name);
    REQUIRE(cuda.tensors[i].second.shape() == want.shape());
    REQUIRE(cuda.tensors[i].second.dtype() == want.dtype());
    // Loose: AdamW's m / sqrt(v) turns a gradient near zero, where the two runs' rounding differs
    // most, into a full-size step either way; the exact check of the copies is the next case.
    if (want.dtype() == DType::F32 && want.numel() > 0)
      CHECK(scaled_error(cuda.tensors[i].second.to_float_vector(), want.to_float_vector()) <= 2e-2);
  }
  // Each run's checkpoint resumes on the cpu for 2 more iterations: the cuda-written one lands
  // close to the cpu-written one.
  const auto resume_on_cpu = [&](const char* run) {
    return skew_moe_test::run(moe_train_schema(), {"--train.device=cpu", "--train.iterations=8", "--output.resume=true",
                                                   "--output.checkpoint_dir=" + dir + "/" + run})["final_loss"]
        .get<double>();
  };
  const double from_cuda = resume_on_cpu("cuda"), from_cpu = resume_on_cpu("cpu");
  CHECK(from_cuda == Approx(from_cpu).epsilon(2e-3));
}

TEST_CASE("a checkpoint loaded into the GPU network saves back byte for byte", "[moe][cuda][checkpoint]") {
  SKEW_REQUIRE_GPU();
  const std::string dir = skew_moe_test::scratch("cuda_roundtrip");
  skew_moe_test::run(moe_train_schema(),
                     {"--train.device=cpu", "--train.iterations=3", "--output.checkpoint_dir=" + dir});
  const Schema schema = moe_train_schema();  // the config refers to it
  const moe::MoeTrainOptions config = moe_train_options(Config::parse_ini_text(
      schema, skew_moe_test::kTiny, "test",
      {"--train.device=cuda", "--train.iterations=3", "--output.resume=true", "--output.checkpoint_dir=" + dir}));
  moe::Session session(config, skew_moe_test::world());
  REQUIRE(session.model->network().device() == Device::Cuda);
  REQUIRE(moe::restore(session) == 3);
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d.safetensors", skew_moe_test::world().rank());
  const TensorFile written = load_safetensors(dir + "/step_00000003/" + name);
  for (const auto& [tensor, saved] : moe::save_state(session.model->network(), *session.adam)) {
    INFO("tensor " << tensor);
    const Tensor& original = written.get(tensor);
    REQUIRE(saved.nbytes() == original.nbytes());
    CHECK(std::memcmp(saved.raw(), original.raw(), saved.nbytes()) == 0);
  }
}
