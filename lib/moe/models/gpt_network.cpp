#include "lib/moe/models/gpt_network.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "kernels/moe_route.hpp"
#include "kernels/moe_top1.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

namespace {
// Parameter names of block l ("h3.attn.w_o"); appended piecewise, which sidesteps a GCC 12
// -Wrestrict false positive on chained std::string operator+.
struct BlockNames {
  explicit BlockNames(int l) : prefix("h") { prefix.append(std::to_string(l)).append("."); }
  std::string operator()(const char* name) const { return std::string(prefix).append(name); }
  std::string prefix;
};
}  // namespace

template <class T>
GptMoe<T>::GptMoe(const ModelOptions& opt, comm::ProcessGroup& world,
                  const std::vector<placement::LayerPlacement>& placements, std::shared_ptr<BalancingPolicy<T>> policy)
    : MoeNetwork<T>(opt, world) {
  const std::size_t D = static_cast<std::size_t>(opt.d_model), F = static_cast<std::size_t>(opt.d_ff);
  SKEW_CHECK(opt.d_model % opt.heads == 0,
             "model.d_model " << opt.d_model << " is not a multiple of model.heads " << opt.heads);
  SKEW_CHECK(static_cast<int>(placements.size()) == opt.moe_layers(), "need one placement per MoE layer");
  opt_.moe.d_model = opt.d_model;
  opt_.moe.precision = opt.precision;
  if (!policy) policy = make_policy<T>(opt_.moe);
  add("wte", static_cast<std::size_t>(opt.vocab) * D);
  add("wpe", static_cast<std::size_t>(opt.seq_len) * D);
  for (int l = 0; l < opt.layers; ++l) {
    const BlockNames p(l);
    add(p("ln1.g"), D), add(p("ln1.b"), D), add(p("attn.w_qkv"), D * 3 * D), add(p("attn.b_qkv"), 3 * D);
    add(p("attn.w_o"), D * D), add(p("attn.b_o"), D), add(p("ln2.g"), D), add(p("ln2.b"), D);
    if (opt.is_moe_block(l)) {
      add(p("gate.w"), D * static_cast<std::size_t>(opt.moe.gate.num_experts));
      moe_index_.push_back(static_cast<int>(moe_.size()));
      moe_.push_back(std::make_unique<MoeLayer<T>>(opt_.moe, world, placements[moe_.size()], policy));
    } else {
      add(p("ffn.w1"), D * F), add(p("ffn.b1"), F), add(p("ffn.w2"), F * D), add(p("ffn.b2"), D);
      moe_index_.push_back(-1);
    }
  }
  add("lnf.g", D), add("lnf.b", D);
  this->allocate_dense();
  for (int l = 0; l < opt.layers; ++l) acts_.emplace_back(opt.device);
  for (DeviceArray<T>* b :
       {&x_, &dx_, &f_, &dln_, &x_final_, &lnf_, &meanf_, &rstdf_, &head_in_, &dhead_, &logits_, &dlogits_})
    *b = DeviceArray<T>(opt.device);
  tokens_ = DeviceArray<std::int32_t>(opt.device), targets_ = DeviceArray<std::int32_t>(opt.device);
  targeted_rows_ = DeviceArray<std::int64_t>(opt.device);
}

// Normal(0, init_std) matrices, LayerNorm gains 1, biases 0; residual output projections scaled
// by 1/sqrt(2 * layers) as in GPT-2. The same seed gives the same model on every rank.
template <class T>
void GptMoe<T>::init(std::uint64_t seed) {
  Rng rng(seed, 1);
  const double resid = opt_.init_std / std::sqrt(2.0 * opt_.layers);
  std::vector<T> w(dense_w_.size());
  for (const auto& s : segments_) {
    const bool gain = s.name.ends_with(".g");
    const bool bias = s.name.find(".b") != std::string::npos && !s.name.ends_with("w_qkv");
    const double std = (s.name.ends_with("w_o") || s.name.ends_with("ffn.w2")) ? resid : opt_.init_std;
    for (std::size_t i = 0; i < s.size; ++i)
      w[s.offset + i] = gain ? T(1) : bias ? T(0) : static_cast<T>(std * rng.normal());
  }
  dense_w_.upload(w.data(), w.size());
  for (std::size_t i = 0; i < moe_.size(); ++i) moe_[i]->init_experts(seed, static_cast<int>(i), opt_.init_std);
}

template <class T>
GptBlockShape GptMoe<T>::block_shape(int batch) const {
  GptBlockShape s;
  s.batch = batch, s.seq = opt_.seq_len, s.d = opt_.d_model, s.heads = opt_.heads, s.d_ff = opt_.d_ff;
  s.causal = opt_.causal, s.precision = opt_.precision, s.device = opt_.device;
  return s;
}

template <class T>
GptBlockParams<const T> GptMoe<T>::block_weights(int l) {
  const BlockNames p(l);
  GptBlockParams<const T> w{param(p("ln1.g")),    param(p("ln1.b")),    param(p("attn.w_qkv")), param(p("attn.b_qkv")),
                            param(p("attn.w_o")), param(p("attn.b_o")), param(p("ln2.g")),      param(p("ln2.b"))};
  if (moe_index_[static_cast<std::size_t>(l)] < 0)
    w.w1 = param(p("ffn.w1")), w.b1 = param(p("ffn.b1")), w.w2 = param(p("ffn.w2")), w.b2 = param(p("ffn.b2"));
  return w;
}

template <class T>
GptBlockParams<T> GptMoe<T>::block_grads(int l) {
  const BlockNames p(l);
  GptBlockParams<T> g{grad(p("ln1.g")),    grad(p("ln1.b")),    grad(p("attn.w_qkv")), grad(p("attn.b_qkv")),
                      grad(p("attn.w_o")), grad(p("attn.b_o")), grad(p("ln2.g")),      grad(p("ln2.b"))};
  if (moe_index_[static_cast<std::size_t>(l)] < 0)
    g.w1 = grad(p("ffn.w1")), g.b1 = grad(p("ffn.b1")), g.w2 = grad(p("ffn.w2")), g.b2 = grad(p("ffn.b2"));
  return g;
}

template <class T>
template <class I>
const I* GptMoe<T>::ids_on_device(DeviceArray<I>& slot, const I* host, std::size_t count) {
  if (opt_.device == Device::Host) return host;
  slot.resize(count);
  slot.upload(host, count);
  return slot.data();
}

template <class T>
void GptMoe<T>::find_rows(StepRows& r, const std::int32_t* tokens, const std::int32_t* targets, int batch) {
  const int S = opt_.seq_len, V = opt_.vocab;
  r.batch = batch;
  r.n = batch * S;
  // The positions in the objective, and their count over all ranks (the loss's denominator).
  std::vector<std::int64_t>& targeted = r.positions;
  std::vector<std::int32_t>& targeted_ids = r.target_ids;
  for (int t = 0; t < r.n; ++t) {
    if (targets[t] == kNoTarget) continue;
    SKEW_CHECK(targets[t] >= 0 && targets[t] < V, "target " << targets[t] << " outside the vocabulary of " << V);
    targeted.push_back(t), targeted_ids.push_back(targets[t]);
  }
  r.m = static_cast<int>(targeted.size());
  std::vector<double> global = {static_cast<double>(r.m)};
  world_.allreduce(comm::view(global), comm::ReduceOp::Sum);
  r.global_targeted = global[0];
  for (int t = 0; t < r.n; ++t)
    SKEW_CHECK(tokens[t] >= 0 && tokens[t] < V, "token " << tokens[t] << " outside the vocabulary of " << V);
  r.tokens = ids_on_device(tokens_, tokens, static_cast<std::size_t>(r.n));
  r.targets = ids_on_device(targets_, targeted_ids.data(), targeted_ids.size());
  // The LM head sees only the targeted rows: all of them (GPT, no copy) or the masked ones (BERT),
  // gathered at these positions on the device.
  r.all_targeted = r.m == r.n;
  r.rows = r.all_targeted ? nullptr : ids_on_device(targeted_rows_, targeted.data(), targeted.size());
}

template <class T>
double GptMoe<T>::blocks_forward(const StepRows& r, const StepInputs& in) {
  const std::size_t nD = static_cast<std::size_t>(r.n) * opt_.d_model;
  const GptBlockShape shape = block_shape(r.batch);
  double aux = 0;
  for (int l = 0; l < opt_.layers; ++l) {
    GptBlockActs<T>& A = acts_[static_cast<std::size_t>(l)];
    const GptBlockParams<const T> w = block_weights(l);
    attention_half_forward(shape, w, x_, A);
    const int mi = moe_index_[static_cast<std::size_t>(l)];
    if (mi >= 0) {
      f_.resize(nD);
      aux += this->moe_forward(mi, r.n, A.ln2.data(), param(BlockNames(l)("gate.w")), in, f_.data());
    } else {
      dense_ffn_forward(shape, w, A, f_);
    }
    add_inplace<T>(nD, x_.data(), f_.data(), opt_.device);
  }
  return aux;
}

template <class T>
void GptMoe<T>::head_forward(StepRows& r) {
  const int D = opt_.d_model, V = opt_.vocab, n = r.n, m = r.m;
  const std::size_t nD = static_cast<std::size_t>(n) * D;
  const Device device = opt_.device;
  x_final_.assign(x_);
  lnf_.resize(nD), meanf_.resize(static_cast<std::size_t>(n)), rstdf_.resize(static_cast<std::size_t>(n));
  layernorm_forward<T>(n, D, x_.data(), param("lnf.g"), param("lnf.b"), lnf_.data(), meanf_.data(), rstdf_.data(),
                       device);
  if (!r.all_targeted) {
    head_in_.resize(static_cast<std::size_t>(m) * D);
    kernels::moe::gather_rows<T>(device, m, D, r.rows, lnf_.data(), head_in_.data());
  }
  r.head_in = r.all_targeted ? lnf_.data() : head_in_.data();
  logits_.resize(static_cast<std::size_t>(m) * V), dlogits_.resize(static_cast<std::size_t>(m) * V);
  if (m > 0)
    matmul<T>(false, true, m, V, D, T(1), r.head_in, param("wte"), T(0), logits_.data(), opt_.precision, device);
  // No targeted position anywhere (possible for a tiny masked batch): the objective is 0.
  const T scale = r.global_targeted > 0 ? static_cast<T>(1.0 / r.global_targeted) : T(0);
  // The top-1 count where the logits are: one scalar comes back.
  std::vector<double> sums = {
      m > 0 ? cross_entropy<T>(m, V, logits_.data(), r.targets, scale, dlogits_.data(), device) : 0.0,
      static_cast<double>(kernels::moe::top1_hits(device, m, V, logits_.data(), r.targets))};
  world_.allreduce(comm::view(sums), comm::ReduceOp::Sum);
  last_ce_ = sums[0], last_correct_ = sums[1], last_targeted_ = r.global_targeted;
}

template <class T>
void GptMoe<T>::step_backward(const StepRows& r) {
  const int D = opt_.d_model, V = opt_.vocab, n = r.n, m = r.m;
  const std::size_t nD = static_cast<std::size_t>(n) * D;
  const Device device = opt_.device;
  const GptBlockShape shape = block_shape(r.batch);
  dx_.resize(nD), dln_.resize(nD);
  dln_.zero();  // untargeted rows get no gradient from the head
  if (m > 0) {
    T* dhead = dln_.data();
    if (!r.all_targeted) dhead_.resize(static_cast<std::size_t>(m) * D), dhead = dhead_.data();
    matmul<T>(false, false, m, D, V, T(1), dlogits_.data(), param("wte"), T(0), dhead, opt_.precision, device);
    matmul<T>(true, false, V, D, m, T(1), dlogits_.data(), r.head_in, T(1), grad("wte"), opt_.precision, device);
    // Back to the targeted rows: a dispatch with one choice per row, none dropped (all < n).
    if (!r.all_targeted) kernels::moe::dispatch_rows<T>(device, m, 1, D, r.rows, n, dhead_.data(), dln_.data());
  }
  layernorm_backward<T>(n, D, x_final_.data(), param("lnf.g"), meanf_.data(), rstdf_.data(), dln_.data(), dx_.data(),
                        grad("lnf.g"), grad("lnf.b"), device);
  for (int l = opt_.layers - 1; l >= 0; --l) {
    GptBlockActs<T>& A = acts_[static_cast<std::size_t>(l)];
    const GptBlockParams<const T> w = block_weights(l);
    const GptBlockParams<T> g = block_grads(l);
    const int mi = moe_index_[static_cast<std::size_t>(l)];
    if (mi >= 0) {
      const BlockNames p(l);
      this->moe_backward(mi, dx_.data(), param(p("gate.w")), dln_.data(), grad(p("gate.w")));
    } else {
      dense_ffn_backward(shape, w, g, A, dx_, dln_);
    }
    attention_half_backward(shape, w, g, A, dln_, dx_);
  }
  embedding_backward<T>(n, D, opt_.seq_len, r.tokens, dx_.data(), grad("wte"), grad("wpe"), device);
}

template <class T>
double GptMoe<T>::step(const std::int32_t* tokens, const std::int32_t* targets, int batch, const StepInputs& in,
                       bool backward) {
  StepRows rows;
  find_rows(rows, tokens, targets, batch);
  x_.resize(static_cast<std::size_t>(rows.n) * opt_.d_model);
  embedding_forward<T>(rows.n, opt_.d_model, opt_.seq_len, rows.tokens, param("wte"), param("wpe"), x_.data(),
                       opt_.device);
  const double aux = blocks_forward(rows, in);
  head_forward(rows);
  if (backward) step_backward(rows);
  return last_ce_ + aux;
}

template class GptMoe<float>;
template class GptMoe<double>;

}  // namespace skew::moe
