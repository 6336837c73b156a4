#include "lib/moe/models/swin_network.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "lib/moe/models/swin_ops.hpp"

namespace skew::moe {

namespace {
std::size_t sz(std::int64_t v) {
  return static_cast<std::size_t>(v);
}
}  // namespace

template <class T>
SwinMoe<T>::SwinMoe(const ModelOptions& opt, const SwinShape& shape, comm::ProcessGroup& world,
                    const std::vector<placement::LayerPlacement>& placements,
                    std::shared_ptr<BalancingPolicy<T>> policy)
    : MoeNetwork<T>(opt, world), shape_(shape) {
  const int C = opt.d_model;
  SKEW_CHECK(shape.patch > 0 && shape.image % shape.patch == 0,
             "swin.patch " << shape.patch << " does not divide the " << shape.image << "-pixel image side");
  const int r1 = shape.image / shape.patch;
  SKEW_CHECK(r1 % 2 == 0, "patch merging needs an even map: the image has " << r1 << " patches a side (swin.patch "
                                                                            << shape.patch << ")");
  SKEW_CHECK(C % opt.heads == 0, "model.d_model " << C << " is not a multiple of model.heads " << opt.heads);
  stages_[0] = {r1, C, opt.heads, std::min(shape.window, r1), shape.stage1_blocks, opt.d_ff, {}};
  stages_[1] = {r1 / 2, 2 * C, 2 * opt.heads, std::min(shape.window, r1 / 2), opt.layers, 2 * opt.d_ff, {}};
  for (int s = 0; s < 2; ++s) {
    Stage& st = stages_[s];
    SKEW_CHECK(st.res % st.window == 0, "swin.window " << shape.window << " does not tile stage " << s + 1 << "'s "
                                                       << st.res << " x " << st.res << " map");
    if (st.blocks > 1 && st.res > st.window) st.mask = shifted_window_mask<T>(st.res, st.res, st.window, st.window / 2);
  }
  SKEW_CHECK(static_cast<int>(placements.size()) == opt.moe_layers(), "need one placement per MoE layer");
  opt_.moe.d_model = 2 * C;  // the MoE layers are stage 2's FFNs
  opt_.moe.precision = opt.precision;
  SKEW_CHECK(opt.device == Device::Host,
             "the Swin network runs on the host only (model.arch=swin needs train.device=cpu)");
  if (!policy) policy = make_policy<T>(opt_.moe);
  const std::size_t E = sz(opt.moe.gate.num_experts), K = sz(shape.patch * shape.patch * shape.channels);
  add("patch.w", K * sz(C)), add("patch.b", sz(C)), add("patch.ln.g", sz(C)), add("patch.ln.b", sz(C));
  for (int s = 0; s < 2; ++s) {
    const Stage& st = stages_[s];
    const std::size_t D = sz(st.width), F = sz(st.d_ff), span = sz(2 * st.window - 1);
    for (int i = 0; i < st.blocks; ++i) {
      BlockRef b{s, i, -1};
      add(name(b, "ln1.g"), D), add(name(b, "ln1.b"), D), add(name(b, "attn.w_qkv"), D * 3 * D);
      add(name(b, "attn.b_qkv"), 3 * D), add(name(b, "attn.rpb"), span * span * sz(st.heads));
      add(name(b, "attn.w_o"), D * D), add(name(b, "attn.b_o"), D), add(name(b, "ln2.g"), D), add(name(b, "ln2.b"), D);
      if (s == 1 && opt.is_moe_block(i)) {
        add(name(b, "gate.w"), D * E);
        b.moe = static_cast<int>(moe_.size());
        moe_.push_back(std::make_unique<MoeLayer<T>>(opt_.moe, world, placements[moe_.size()], policy));
      } else {
        add(name(b, "ffn.w1"), D * F), add(name(b, "ffn.b1"), F), add(name(b, "ffn.w2"), F * D);
        add(name(b, "ffn.b2"), D);
      }
      blocks_.push_back(b);
    }
    if (s == 0)
      add("merge.ln.g", 4 * D), add("merge.ln.b", 4 * D), add("merge.w", 4 * D * 2 * D), add("merge.b", 2 * D);
  }
  const std::size_t C2 = sz(2 * C), classes = sz(shape.classes);
  add("norm.g", C2), add("norm.b", C2), add("head.w", C2 * classes), add("head.b", classes);
  this->allocate_dense();
  acts_.resize(blocks_.size());
}

template <class T>
std::string SwinMoe<T>::name(const BlockRef& b, const char* what) const {
  // Appended piecewise, which sidesteps a GCC 12 -Wrestrict false positive on chained operator+.
  std::string s("s");
  s.append(std::to_string(b.stage)).append(".b").append(std::to_string(b.block)).append(".").append(what);
  return s;
}

template <class T>
int SwinMoe<T>::shift_of(const BlockRef& b) const {
  const Stage& st = stages_[b.stage];
  return b.block % 2 == 1 && !st.mask.empty() ? st.window / 2 : 0;
}

template <class T>
int SwinMoe<T>::tokens_per_image() const {
  return stages_[1].res * stages_[1].res;
}

// Normal(0, init_std) matrices and relative position bias tables (Swin: trunc_normal(0.02)),
// LayerNorm gains 1, biases 0. The same seed gives the same model on every rank.
template <class T>
void SwinMoe<T>::init(std::uint64_t seed) {
  Rng rng(seed, 1);
  for (const auto& s : this->segments_) {
    T* w = this->dense_w_.data() + s.offset;
    const std::string last = s.name.substr(s.name.rfind('.') + 1);
    const bool gain = last == "g", bias = last[0] == 'b';
    for (std::size_t i = 0; i < s.size; ++i)
      w[i] = gain ? T(1) : bias ? T(0) : static_cast<T>(opt_.init_std * rng.normal());
  }
  for (std::size_t i = 0; i < moe_.size(); ++i) moe_[i]->init_experts(seed, static_cast<int>(i), opt_.init_std);
}

template <class T>
double SwinMoe<T>::block_forward(const BlockRef& b, int batch, std::vector<T>& x, const StepInputs& in) {
  const Stage& st = stages_[b.stage];
  const int D = st.width, N = st.window * st.window, n = batch * st.res * st.res, shift = shift_of(b);
  const std::size_t nD = sz(n) * sz(D);
  BlockActs& A = acts_[sz(&b - blocks_.data())];
  A.x_in = x;
  A.ln1.resize(nD), A.mean1.resize(sz(n)), A.rstd1.resize(sz(n)), A.win.resize(nD);
  layernorm_forward<T>(n, D, x.data(), param(name(b, "ln1.g")), param(name(b, "ln1.b")), A.ln1.data(), A.mean1.data(),
                       A.rstd1.data());
  window_partition<T>(Device::Host, batch, st.res, st.res, D, st.window, shift, A.ln1.data(), A.win.data());
  A.qkv.resize(3 * nD), A.att.resize(nD), A.probs.resize(sz(n / N) * sz(st.heads) * sz(N) * sz(N));
  linear_forward<T>(n, D, 3 * D, A.win.data(), param(name(b, "attn.w_qkv")), param(name(b, "attn.b_qkv")), A.qkv.data(),
                    opt_.precision);
  window_attention_forward<T>(n / N, st.window, D, st.heads, A.qkv.data(), param(name(b, "attn.rpb")),
                              shift ? st.mask.data() : nullptr, (st.res / st.window) * (st.res / st.window),
                              A.att.data(), A.probs.data(), opt_.precision);
  std::vector<T> proj(nD), f(nD);
  linear_forward<T>(n, D, D, A.att.data(), param(name(b, "attn.w_o")), param(name(b, "attn.b_o")), proj.data(),
                    opt_.precision);
  window_reverse<T>(Device::Host, batch, st.res, st.res, D, st.window, shift, proj.data(), f.data());
  for (std::size_t i = 0; i < nD; ++i) x[i] += f[i];
  A.x_mid = x;
  A.ln2.resize(nD), A.mean2.resize(sz(n)), A.rstd2.resize(sz(n));
  layernorm_forward<T>(n, D, x.data(), param(name(b, "ln2.g")), param(name(b, "ln2.b")), A.ln2.data(), A.mean2.data(),
                       A.rstd2.data());
  double aux = 0;
  if (b.moe >= 0) {
    aux = this->moe_forward(b.moe, n, A.ln2.data(), param(name(b, "gate.w")), in, f.data());
  } else {
    const int F = st.d_ff;
    A.hpre.resize(sz(n) * sz(F)), A.h.resize(sz(n) * sz(F));
    linear_forward<T>(n, D, F, A.ln2.data(), param(name(b, "ffn.w1")), param(name(b, "ffn.b1")), A.hpre.data(),
                      opt_.precision);
    gelu_forward<T>(A.h.size(), A.hpre.data(), A.h.data());
    linear_forward<T>(n, F, D, A.h.data(), param(name(b, "ffn.w2")), param(name(b, "ffn.b2")), f.data(),
                      opt_.precision);
  }
  for (std::size_t i = 0; i < nD; ++i) x[i] += f[i];
  return aux;
}

template <class T>
void SwinMoe<T>::block_backward(const BlockRef& b, int batch, std::vector<T>& dx) {
  const Stage& st = stages_[b.stage];
  const int D = st.width, N = st.window * st.window, n = batch * st.res * st.res, shift = shift_of(b);
  const std::size_t nD = sz(n) * sz(D);
  BlockActs& A = acts_[sz(&b - blocks_.data())];
  std::vector<T> dln(nD), tmp(nD);
  if (b.moe >= 0) {
    moe_[sz(b.moe)]->backward(dx.data(), param(name(b, "gate.w")), dln.data(), grad(name(b, "gate.w")));
  } else {
    const int F = st.d_ff;
    std::vector<T> dh(sz(n) * sz(F));
    linear_backward<T>(n, F, D, A.h.data(), param(name(b, "ffn.w2")), dx.data(), dh.data(), grad(name(b, "ffn.w2")),
                       grad(name(b, "ffn.b2")), opt_.precision);
    gelu_backward<T>(dh.size(), A.hpre.data(), dh.data(), dh.data());
    linear_backward<T>(n, D, F, A.ln2.data(), param(name(b, "ffn.w1")), dh.data(), dln.data(), grad(name(b, "ffn.w1")),
                       grad(name(b, "ffn.b1")), opt_.precision);
  }
  layernorm_backward<T>(n, D, A.x_mid.data(), param(name(b, "ln2.g")), A.mean2.data(), A.rstd2.data(), dln.data(),
                        tmp.data(), grad(name(b, "ln2.g")), grad(name(b, "ln2.b")));
  for (std::size_t i = 0; i < nD; ++i) dx[i] += tmp[i];
  // The attention branch: the partition is a permutation, so the reverse's backward is the partition.
  std::vector<T> dproj(nD), datt(nD), dqkv(3 * nD);
  window_partition<T>(Device::Host, batch, st.res, st.res, D, st.window, shift, dx.data(), dproj.data());
  linear_backward<T>(n, D, D, A.att.data(), param(name(b, "attn.w_o")), dproj.data(), datt.data(),
                     grad(name(b, "attn.w_o")), grad(name(b, "attn.b_o")), opt_.precision);
  window_attention_backward<T>(n / N, st.window, D, st.heads, A.qkv.data(), A.probs.data(), datt.data(), dqkv.data(),
                               grad(name(b, "attn.rpb")), opt_.precision);
  linear_backward<T>(n, D, 3 * D, A.win.data(), param(name(b, "attn.w_qkv")), dqkv.data(), dproj.data(),
                     grad(name(b, "attn.w_qkv")), grad(name(b, "attn.b_qkv")), opt_.precision);
  window_reverse<T>(Device::Host, batch, st.res, st.res, D, st.window, shift, dproj.data(), dln.data());
  layernorm_backward<T>(n, D, A.x_in.data(), param(name(b, "ln1.g")), A.mean1.data(), A.rstd1.data(), dln.data(),
                        tmp.data(), grad(name(b, "ln1.g")), grad(name(b, "ln1.b")));
  for (std::size_t i = 0; i < nD; ++i) dx[i] += tmp[i];
}

template <class T>
std::vector<const typename SwinMoe<T>::BlockRef*> SwinMoe<T>::stage_blocks(int stage) const {
  std::vector<const BlockRef*> out;
  for (const auto& b : blocks_)
    if (b.stage == stage) out.push_back(&b);
  return out;
}

template <class T>
double SwinMoe<T>::stages_forward(const T* pixels, int batch, std::vector<T>& x, const StepInputs& in) {
  const Stage &s1 = stages_[0], &s2 = stages_[1];
  const int C = s1.width, C2 = s2.width;
  const int K = shape_.patch * shape_.patch * shape_.channels, n1 = batch * s1.res * s1.res,
            n2 = batch * s2.res * s2.res;
  // Patch embedding and its LayerNorm.
  patches_.resize(sz(n1) * sz(K)), embed_.resize(sz(n1) * sz(C)), embed_mean_.resize(sz(n1)),
      embed_rstd_.resize(sz(n1));
  patchify<T>(Device::Host, batch, shape_.image, shape_.image, shape_.channels, shape_.patch, pixels, patches_.data());
  linear_forward<T>(n1, K, C, patches_.data(), param("patch.w"), param("patch.b"), embed_.data(), opt_.precision);
  x.resize(sz(n1) * sz(C));
  layernorm_forward<T>(n1, C, embed_.data(), param("patch.ln.g"), param("patch.ln.b"), x.data(), embed_mean_.data(),
                       embed_rstd_.data());
  double aux = 0;
  for (const BlockRef* b : stage_blocks(0)) aux += block_forward(*b, batch, x, in);
  // Patch merging to stage 2.
  merged_.resize(sz(n2) * 4 * sz(C)), merged_ln_.resize(merged_.size()), merge_mean_.resize(sz(n2)),
      merge_rstd_.resize(sz(n2));
  merge_gather<T>(Device::Host, batch, s1.res, s1.res, C, x.data(), merged_.data());
  layernorm_forward<T>(n2, 4 * C, merged_.data(), param("merge.ln.g"), param("merge.ln.b"), merged_ln_.data(),
                       merge_mean_.data(), merge_rstd_.data());
  x.resize(sz(n2) * sz(C2));
  linear_forward<T>(n2, 4 * C, C2, merged_ln_.data(), param("merge.w"), param("merge.b"), x.data(), opt_.precision);
  for (const BlockRef* b : stage_blocks(1)) aux += block_forward(*b, batch, x, in);
  return aux;
}

template <class T>
double SwinMoe<T>::head_forward(const std::vector<T>& x, const std::int32_t* labels, int batch, double global_batch,
                                std::vector<T>& dlogits) {
  const int C2 = stages_[1].width, classes = shape_.classes, per_image = stages_[1].res * stages_[1].res;
  const int n2 = batch * per_image;
  // Final LayerNorm, mean pool over the tokens of each image, linear head.
  final_in_ = x;
  final_ln_.resize(x.size()), final_mean_.resize(sz(n2)), final_rstd_.resize(sz(n2));
  layernorm_forward<T>(n2, C2, x.data(), param("norm.g"), param("norm.b"), final_ln_.data(), final_mean_.data(),
                       final_rstd_.data());
  pooled_.assign(sz(batch) * sz(C2), T(0));
  for (int t = 0; t < n2; ++t)
    for (int c = 0; c < C2; ++c)
      pooled_[sz(t / per_image) * sz(C2) + sz(c)] += final_ln_[sz(t) * sz(C2) + sz(c)] / static_cast<T>(per_image);
  logits_.resize(sz(batch) * sz(classes));
  linear_forward<T>(batch, C2, classes, pooled_.data(), param("head.w"), param("head.b"), logits_.data(),
                    opt_.precision);
  dlogits.resize(logits_.size());
  std::vector<double> totals = {
      cross_entropy<T>(batch, classes, logits_.data(), labels, static_cast<T>(1.0 / global_batch), dlogits.data()),
      0.0};
  for (int i = 0; i < batch; ++i) {
    const T* row = logits_.data() + sz(i) * sz(classes);
    totals[1] += std::max_element(row, row + classes) - row == labels[i] ? 1.0 : 0.0;
  }
  this->world_.allreduce(comm::view(totals), comm::ReduceOp::Sum);
  last_ce_ = totals[0];
  last_correct_ = static_cast<std::int64_t>(totals[1]);
  return totals[0];
}

template <class T>
void SwinMoe<T>::step_backward(int batch, const std::vector<T>& dlogits) {
  const Stage &s1 = stages_[0], &s2 = stages_[1];
  const int C = s1.width, C2 = s2.width, classes = shape_.classes;
  const int K = shape_.patch * shape_.patch * shape_.channels, n1 = batch * s1.res * s1.res,
            n2 = batch * s2.res * s2.res, per_image = s2.res * s2.res;
  std::vector<T> dpooled(pooled_.size()), dln(final_in_.size()), dx(final_in_.size());
  linear_backward<T>(batch, C2, classes, pooled_.data(), param("head.w"), dlogits.data(), dpooled.data(),
                     grad("head.w"), grad("head.b"), opt_.precision);
  for (int t = 0; t < n2; ++t)
    for (int c = 0; c < C2; ++c)
      dln[sz(t) * sz(C2) + sz(c)] = dpooled[sz(t / per_image) * sz(C2) + sz(c)] / static_cast<T>(per_image);
  layernorm_backward<T>(n2, C2, final_in_.data(), param("norm.g"), final_mean_.data(), final_rstd_.data(), dln.data(),
                        dx.data(), grad("norm.g"), grad("norm.b"));
  const auto stage2 = stage_blocks(1);
  for (auto it = stage2.rbegin(); it != stage2.rend(); ++it) block_backward(**it, batch, dx);
  std::vector<T> dmerged_ln(merged_.size()), dmerged(merged_.size());
  linear_backward<T>(n2, 4 * C, C2, merged_ln_.data(), param("merge.w"), dx.data(), dmerged_ln.data(), grad("merge.w"),
                     grad("merge.b"), opt_.precision);
  layernorm_backward<T>(n2, 4 * C, merged_.data(), param("merge.ln.g"), merge_mean_.data(), merge_rstd_.data(),
                        dmerged_ln.data(), dmerged.data(), grad("merge.ln.g"), grad("merge.ln.b"));
  dx.resize(sz(n1) * sz(C));
  merge_scatter<T>(Device::Host, batch, s1.res, s1.res, C, dmerged.data(), dx.data());
  const auto stage1 = stage_blocks(0);
  for (auto it = stage1.rbegin(); it != stage1.rend(); ++it) block_backward(**it, batch, dx);
  std::vector<T> dembed(dx.size());
  layernorm_backward<T>(n1, C, embed_.data(), param("patch.ln.g"), embed_mean_.data(), embed_rstd_.data(), dx.data(),
                        dembed.data(), grad("patch.ln.g"), grad("patch.ln.b"));
  linear_backward<T>(n1, K, C, patches_.data(), param("patch.w"), dembed.data(), nullptr, grad("patch.w"),
                     grad("patch.b"), opt_.precision);
}

template <class T>
double SwinMoe<T>::step(const T* pixels, const std::int32_t* labels, int batch, const StepInputs& in, bool backward) {
  std::vector<double> global = {static_cast<double>(batch)};
  this->world_.allreduce(comm::view(global), comm::ReduceOp::Sum);
  for (int i = 0; i < batch; ++i)
    SKEW_CHECK(labels[i] >= 0 && labels[i] < shape_.classes,
               "label " << labels[i] << " outside the " << shape_.classes << " classes");
  std::vector<T> x, dlogits;
  const double aux = stages_forward(pixels, batch, x, in);
  const double ce = head_forward(x, labels, batch, global[0], dlogits);
  if (backward) step_backward(batch, dlogits);
  return ce + aux;
}

template class SwinMoe<float>;
template class SwinMoe<double>;

}  // namespace skew::moe
