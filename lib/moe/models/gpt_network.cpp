#include "lib/moe/models/gpt_network.hpp"

#include <algorithm>

#include "lib/core/error.hpp"
#include "lib/core/rng.hpp"
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
  dense_g_.assign(dense_w_.size(), T(0));
  acts_.resize(static_cast<std::size_t>(opt.layers));
}

// Normal(0, init_std) matrices, LayerNorm gains 1, biases 0; residual output projections scaled
// by 1/sqrt(2 * layers) as in GPT-2. The same seed gives the same model on every rank.
template <class T>
void GptMoe<T>::init(std::uint64_t seed) {
  Rng rng(seed, 1);
  const double resid = opt_.init_std / std::sqrt(2.0 * opt_.layers);
  for (const auto& s : segments_) {
    T* w = dense_w_.data() + s.offset;
    const bool gain = s.name.ends_with(".g");
    const bool bias = s.name.find(".b") != std::string::npos && !s.name.ends_with("w_qkv");
    const double std = (s.name.ends_with("w_o") || s.name.ends_with("ffn.w2")) ? resid : opt_.init_std;
    for (std::size_t i = 0; i < s.size; ++i) w[i] = gain ? T(1) : bias ? T(0) : static_cast<T>(std * rng.normal());
  }
  for (std::size_t i = 0; i < moe_.size(); ++i) moe_[i]->init_experts(seed, static_cast<int>(i), opt_.init_std);
}

template <class T>
double GptMoe<T>::step(const std::int32_t* tokens, const std::int32_t* targets, int batch, const StepInputs& in,
                       bool backward) {
  const int D = opt_.d_model, S = opt_.seq_len, V = opt_.vocab, F = opt_.d_ff, H = opt_.heads;
  const int n = batch * S;
  const std::size_t nD = static_cast<std::size_t>(n) * D;
  // The positions in the objective, and their count over all ranks (the loss's denominator).
  std::vector<int> targeted;
  std::vector<std::int32_t> targeted_ids;
  for (int t = 0; t < n; ++t) {
    if (targets[t] == kNoTarget) continue;
    SKEW_CHECK(targets[t] >= 0 && targets[t] < V, "target " << targets[t] << " outside the vocabulary of " << V);
    targeted.push_back(t), targeted_ids.push_back(targets[t]);
  }
  const int m = static_cast<int>(targeted.size());
  std::vector<double> global = {static_cast<double>(m)};
  world_.allreduce(comm::view(global), comm::ReduceOp::Sum);
  std::vector<T> x(nD), tmp(nD), f(nD);
  for (int t = 0; t < n; ++t)
    SKEW_CHECK(tokens[t] >= 0 && tokens[t] < V, "token " << tokens[t] << " outside the vocabulary of " << V);
  embedding_forward<T>(n, D, S, tokens, param("wte"), param("wpe"), x.data());
  double aux = 0;
  for (int l = 0; l < opt_.layers; ++l) {
    const BlockNames p(l);
    BlockActs& A = acts_[static_cast<std::size_t>(l)];
    A.x_in = x;
    A.ln1.resize(nD), A.mean1.resize(static_cast<std::size_t>(n)), A.rstd1.resize(static_cast<std::size_t>(n));
    layernorm_forward<T>(n, D, x.data(), param(p("ln1.g")), param(p("ln1.b")), A.ln1.data(), A.mean1.data(),
                         A.rstd1.data());
    A.qkv.resize(nD * 3), A.att.resize(nD), A.probs.resize(static_cast<std::size_t>(batch) * H * S * S);
    linear_forward<T>(n, D, 3 * D, A.ln1.data(), param(p("attn.w_qkv")), param(p("attn.b_qkv")), A.qkv.data(),
                      opt_.precision);
    attention_forward<T>(batch, S, D, H, A.qkv.data(), A.att.data(), A.probs.data(), opt_.precision, opt_.causal);
    linear_forward<T>(n, D, D, A.att.data(), param(p("attn.w_o")), param(p("attn.b_o")), tmp.data(), opt_.precision);
    for (std::size_t i = 0; i < nD; ++i) x[i] += tmp[i];
    A.x_mid = x;
    A.ln2.resize(nD), A.mean2.resize(static_cast<std::size_t>(n)), A.rstd2.resize(static_cast<std::size_t>(n));
    layernorm_forward<T>(n, D, x.data(), param(p("ln2.g")), param(p("ln2.b")), A.ln2.data(), A.mean2.data(),
                         A.rstd2.data());
    const int mi = moe_index_[static_cast<std::size_t>(l)];
    if (mi >= 0) {
      aux += this->moe_forward(mi, n, A.ln2.data(), param(p("gate.w")), in, f.data());
    } else {
      A.hpre.resize(static_cast<std::size_t>(n) * F), A.h.resize(static_cast<std::size_t>(n) * F);
      linear_forward<T>(n, D, F, A.ln2.data(), param(p("ffn.w1")), param(p("ffn.b1")), A.hpre.data(), opt_.precision);
      gelu_forward<T>(A.h.size(), A.hpre.data(), A.h.data());
      linear_forward<T>(n, F, D, A.h.data(), param(p("ffn.w2")), param(p("ffn.b2")), f.data(), opt_.precision);
    }
    for (std::size_t i = 0; i < nD; ++i) x[i] += f[i];
  }
  x_final_ = x;
  lnf_.resize(nD), meanf_.resize(static_cast<std::size_t>(n)), rstdf_.resize(static_cast<std::size_t>(n));
  layernorm_forward<T>(n, D, x.data(), param("lnf.g"), param("lnf.b"), lnf_.data(), meanf_.data(), rstdf_.data());
  // The LM head sees only the targeted rows: all of them (GPT, no copy) or the masked ones.
  const bool all_targeted = m == n;
  if (!all_targeted) {
    head_in_.resize(static_cast<std::size_t>(m) * D);
    for (int r = 0; r < m; ++r)
      std::copy_n(lnf_.data() + static_cast<std::size_t>(targeted[static_cast<std::size_t>(r)]) * D, D,
                  head_in_.data() + static_cast<std::size_t>(r) * D);
  }
  const T* head_in = all_targeted ? lnf_.data() : head_in_.data();
  logits_.resize(static_cast<std::size_t>(m) * V);
  if (m > 0) matmul<T>(false, true, m, V, D, T(1), head_in, param("wte"), T(0), logits_.data(), opt_.precision);
  std::vector<T> dlogits(logits_.size());
  // No targeted position anywhere (possible for a tiny masked batch): the objective is 0.
  const T scale = global[0] > 0 ? static_cast<T>(1.0 / global[0]) : T(0);
  std::vector<double> sums = {cross_entropy<T>(m, V, logits_.data(), targeted_ids.data(), scale, dlogits.data()), 0};
  for (int r = 0; r < m; ++r) {
    const T* row = logits_.data() + static_cast<std::size_t>(r) * V;
    sums[1] += std::max_element(row, row + V) - row == targeted_ids[static_cast<std::size_t>(r)] ? 1 : 0;
  }
  world_.allreduce(comm::view(sums), comm::ReduceOp::Sum);
  last_ce_ = sums[0], last_correct_ = sums[1], last_targeted_ = global[0];
  if (!backward) return last_ce_ + aux;

  // Backward.
  std::vector<T> dx(nD), dln(nD, T(0));  // untargeted rows get no gradient from the head
  if (m > 0) {
    T* dhead = dln.data();
    std::vector<T> dhead_rows;
    if (!all_targeted) dhead_rows.resize(static_cast<std::size_t>(m) * D), dhead = dhead_rows.data();
    matmul<T>(false, false, m, D, V, T(1), dlogits.data(), param("wte"), T(0), dhead, opt_.precision);
    matmul<T>(true, false, V, D, m, T(1), dlogits.data(), head_in, T(1), dense_g_.data() + offset_of_["wte"],
              opt_.precision);
    if (!all_targeted)
      for (int r = 0; r < m; ++r)
        std::copy_n(dhead_rows.data() + static_cast<std::size_t>(r) * D, D,
                    dln.data() + static_cast<std::size_t>(targeted[static_cast<std::size_t>(r)]) * D);
  }
  layernorm_backward<T>(n, D, x_final_.data(), param("lnf.g"), meanf_.data(), rstdf_.data(), dln.data(), dx.data(),
                        grad("lnf.g"), grad("lnf.b"));
  for (int l = opt_.layers - 1; l >= 0; --l) {
    const BlockNames p(l);
    BlockActs& A = acts_[static_cast<std::size_t>(l)];
    const int mi = moe_index_[static_cast<std::size_t>(l)];
    if (mi >= 0) {
      moe_[static_cast<std::size_t>(mi)]->backward(dx.data(), param(p("gate.w")), dln.data(), grad(p("gate.w")));
    } else {
      std::vector<T> dh(static_cast<std::size_t>(n) * F);
      linear_backward<T>(n, F, D, A.h.data(), param(p("ffn.w2")), dx.data(), dh.data(), grad(p("ffn.w2")),
                         grad(p("ffn.b2")), opt_.precision);
      gelu_backward<T>(dh.size(), A.hpre.data(), dh.data(), dh.data());
      linear_backward<T>(n, D, F, A.ln2.data(), param(p("ffn.w1")), dh.data(), dln.data(), grad(p("ffn.w1")),
                         grad(p("ffn.b1")), opt_.precision);
    }
    layernorm_backward<T>(n, D, A.x_mid.data(), param(p("ln2.g")), A.mean2.data(), A.rstd2.data(), dln.data(),
                          tmp.data(), grad(p("ln2.g")), grad(p("ln2.b")));
    for (std::size_t i = 0; i < nD; ++i) dx[i] += tmp[i];
    std::vector<T> datt(nD), dqkv(nD * 3);
    linear_backward<T>(n, D, D, A.att.data(), param(p("attn.w_o")), dx.data(), datt.data(), grad(p("attn.w_o")),
                       grad(p("attn.b_o")), opt_.precision);
    attention_backward<T>(batch, S, D, H, A.qkv.data(), A.probs.data(), datt.data(), dqkv.data(), opt_.precision,
                          opt_.causal);
    linear_backward<T>(n, D, 3 * D, A.ln1.data(), param(p("attn.w_qkv")), dqkv.data(), dln.data(),
                       grad(p("attn.w_qkv")), grad(p("attn.b_qkv")), opt_.precision);
    layernorm_backward<T>(n, D, A.x_in.data(), param(p("ln1.g")), A.mean1.data(), A.rstd1.data(), dln.data(),
                          tmp.data(), grad(p("ln1.g")), grad(p("ln1.b")));
    for (std::size_t i = 0; i < nD; ++i) dx[i] += tmp[i];
  }
  embedding_backward<T>(n, D, S, tokens, dx.data(), grad("wte"), grad("wpe"));
  return last_ce_ + aux;
}

template class GptMoe<float>;
template class GptMoe<double>;

}  // namespace skew::moe
