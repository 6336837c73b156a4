// A harness around one dense GPT block, forward and backward on buffers of one device:
// embedding -> the block (lib/moe/models/gpt_block.hpp: layernorm, qkv linear, causal attention,
// out linear, residual, layernorm, dense FFN; the functions GptMoe runs every block through) ->
// residual -> final layernorm -> linear to vocab -> cross-entropy, then the whole backward and
// the gradients' sum of squares. Templated on the scalar type, so the same chain runs as float
// on the host (the CPU twins), as float on a GPU (the CUDA kernels and cuBLAS), and as double on
// the host (the float64 references). It is what the device-neutral ops are tested and timed
// through (tests/unit/test_moe_block_ops.cpp, tests/cuda/test_moe_block_cuda.cpp, moe_gpu_bench's
// "dense GPT block" row).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "lib/moe/models/gpt_block.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

// The tests' sizes by default, odd everywhere: no dimension a multiple of a warp, a GEMM tile or
// the heads' width.
struct DenseBlockShape {
  int d = 96, heads = 4, seq = 33, batch = 3, vocab = 67, d_ff = 160;
  int tokens() const { return batch * seq; }
};

struct DenseBlockInputs {
  DenseBlockShape shape;
  std::map<std::string, std::vector<double>> params;
  std::vector<std::int32_t> tokens, targets;
};

// Every value of a run, copied to the host as double: activations under their names, parameter
// gradients as "d" + the parameter's name.
struct DenseBlockRun {
  double loss = 0, gradient_squares = 0;
  std::map<std::string, std::vector<double>> values;
};

inline DenseBlockInputs random_dense_block_inputs(const DenseBlockShape& s, std::uint64_t seed) {
  DenseBlockInputs in;
  in.shape = s;
  std::uint64_t stream = 0;
  const auto normal = [&](std::size_t count, double scale, double offset) {
    Rng rng(seed, ++stream);
    std::vector<double> v(count);
    for (auto& x : v) x = offset + scale * rng.normal();
    return v;
  };
  const std::size_t d = s.d, f = s.d_ff, v = s.vocab;
  // Weights about 1/sqrt(fan-in), so activations stay O(1) and the softmaxes are not one-hot.
  in.params["wte"] = normal(v * d, 0.5, 0), in.params["wpe"] = normal(static_cast<std::size_t>(s.seq) * d, 0.5, 0);
  for (const char* ln : {"ln1", "ln2", "lnf"}) {
    in.params[std::string(ln) + ".g"] = normal(d, 0.1, 1.0);
    in.params[std::string(ln) + ".b"] = normal(d, 0.1, 0);
  }
  in.params["w_qkv"] = normal(d * 3 * d, 1.5 / std::sqrt(double(d)), 0), in.params["b_qkv"] = normal(3 * d, 0.1, 0);
  in.params["w_o"] = normal(d * d, 1 / std::sqrt(double(d)), 0), in.params["b_o"] = normal(d, 0.1, 0);
  in.params["w1"] = normal(d * f, 1 / std::sqrt(double(d)), 0), in.params["b1"] = normal(f, 0.1, 0);
  in.params["w2"] = normal(f * d, 1 / std::sqrt(double(f)), 0), in.params["b2"] = normal(d, 0.1, 0);
  in.params["w_head"] = normal(d * v, 2 / std::sqrt(double(d)), 0), in.params["b_head"] = normal(v, 0.1, 0);
  Rng rng(seed, ++stream);
  for (int t = 0; t < s.tokens(); ++t) {
    in.tokens.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.vocab))));
    in.targets.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.vocab))));
  }
  return in;
}

// Named buffers of T on one device: allocated zero-filled on first use and reused by later
// steps (every activation is overwritten, the parameter gradients keep accumulating), or
// uploaded; downloaded as double at the end.
template <class T>
class DenseBlockBuffers {
 public:
  explicit DenseBlockBuffers(Device device)
      : acts(device), residual(device), ffn(device), dffn(device), device_(device) {}
  std::vector<std::string> parameters;  // their gradients are "d" + name
  GptBlockActs<T> acts;                 // the block's, kept by its forward
  DeviceArray<T> residual, ffn, dffn;   // the residual stream (its gradient in the backward), the FFN's output, dln2
  T* zeros(const std::string& name, std::size_t count) {
    const auto found = tensors_.find(name);
    if (found != tensors_.end() && found->second.numel() == count) return found->second.template data<T>();
    return slot(name, Tensor::zeros({static_cast<std::int64_t>(count)}, dtype_of<T>(), device_)).template data<T>();
  }
  T* upload(const std::string& name, const std::vector<double>& values) {
    const std::vector<T> cast(values.begin(), values.end());
    return slot(name, Tensor::from_vector(cast, {static_cast<std::int64_t>(cast.size())}).to(device_))
        .template data<T>();
  }
  const std::int32_t* upload_ids(const std::string& name, const std::vector<std::int32_t>& ids) {
    return slot(name, Tensor::from_vector(ids, {static_cast<std::int64_t>(ids.size())}).to(device_))
        .template data<std::int32_t>();
  }
  T* operator()(const std::string& name) { return tensors_.at(name).template data<T>(); }
  std::size_t size(const std::string& name) const { return tensors_.at(name).numel(); }
  const std::int32_t* ids(const std::string& name) { return tensors_.at(name).template data<std::int32_t>(); }
  std::map<std::string, std::vector<double>> download() const {
    std::map<std::string, std::vector<double>> out;
    for (const auto& [name, tensor] : tensors_) {
      if (tensor.dtype() != dtype_of<T>()) continue;  // token ids
      const Tensor host = tensor.to(Device::Host);
      out[name].assign(host.template data<T>(), host.template data<T>() + host.numel());
    }
    for (const auto& [name, buffer] : acts.named()) {
      const std::vector<T> host = buffer->host_copy();
      out["block." + name].assign(host.begin(), host.end());
    }
    return out;
  }

 private:
  Tensor& slot(const std::string& name, Tensor t) { return tensors_[name] = std::move(t); }
  Device device_;
  std::map<std::string, Tensor> tensors_;
};

// The inputs on b's device: the parameters, zeroed gradients "d" + name, tokens and targets.
template <class T>
void upload_dense_block(const DenseBlockInputs& in, DenseBlockBuffers<T>& b) {
  for (const auto& [name, values] : in.params) {
    b.upload(name, values);
    b.zeros("d" + name, values.size());
    b.parameters.push_back(name);
  }
  b.upload_ids("tokens", in.tokens);
  b.upload_ids("targets", in.targets);
}

// One forward and backward on the uploaded block; the loss and the gradients' sum of squares
// come back to the host (the scalars a training step logs), everything else stays in b.
template <class T>
DenseBlockRun dense_block_step(const DenseBlockShape& s, DenseBlockBuffers<T>& b, Device device, Precision precision) {
  const int n = s.tokens(), d = s.d, v = s.vocab;
  const std::size_t nd = static_cast<std::size_t>(n) * d;
  const std::int32_t* tokens = b.ids("tokens");
  const std::int32_t* targets = b.ids("targets");
  const GptBlockShape shape{s.batch, s.seq, d, s.heads, s.d_ff, true, precision, device};
  const GptBlockParams<const T> w{b("ln1.g"), b("ln1.b"), b("w_qkv"), b("b_qkv"), b("w_o"), b("b_o"),
                                  b("ln2.g"), b("ln2.b"), b("w1"),    b("b1"),    b("w2"),  b("b2")};
  const GptBlockParams<T> g{b("dln1.g"), b("dln1.b"), b("dw_qkv"), b("db_qkv"), b("dw_o"), b("db_o"),
                            b("dln2.g"), b("dln2.b"), b("dw1"),    b("db1"),    b("dw2"),  b("db2")};
  // Forward.
  b.residual.resize(nd);
  embedding_forward<T>(n, d, s.seq, tokens, b("wte"), b("wpe"), b.residual.data(), device);
  attention_half_forward(shape, w, b.residual, b.acts);
  dense_ffn_forward(shape, w, b.acts, b.ffn);
  add_inplace<T>(nd, b.residual.data(), b.ffn.data(), device);  // x2 = x1 + FFN
  // The final LayerNorm's input, kept: the residual buffer carries the gradient in the backward.
  copy_bytes(b.zeros("x2", nd), device, b.residual.data(), device, nd * sizeof(T));
  layernorm_forward<T>(n, d, b("x2"), b("lnf.g"), b("lnf.b"), b.zeros("lnf.y", nd), b.zeros("lnf.mean", n),
                       b.zeros("lnf.rstd", n), device);
  linear_forward<T>(n, d, v, b("lnf.y"), b("w_head"), b("b_head"), b.zeros("logits", static_cast<std::size_t>(n) * v),
                    precision, device);
  DenseBlockRun run;
  run.loss = cross_entropy<T>(n, v, b("logits"), targets, static_cast<T>(1.0 / n),
                              b.zeros("dlogits", static_cast<std::size_t>(n) * v), device);
  // Backward: the residual stream's gradient gains each branch's.
  linear_backward<T>(n, d, v, b("lnf.y"), b("w_head"), b("dlogits"), b.zeros("dlnf.y", nd), b("dw_head"), b("db_head"),
                     precision, device);
  layernorm_backward<T>(n, d, b("x2"), b("lnf.g"), b("lnf.mean"), b("lnf.rstd"), b("dlnf.y"), b.residual.data(),
                        b("dlnf.g"), b("dlnf.b"), device);
  dense_ffn_backward(shape, w, g, b.acts, b.residual, b.dffn);
  attention_half_backward(shape, w, g, b.acts, b.dffn, b.residual);
  embedding_backward<T>(n, d, s.seq, tokens, b.residual.data(), b("dwte"), b("dwpe"), device);
  copy_bytes(b.zeros("dx0", nd), device, b.residual.data(), device, nd * sizeof(T));
  for (const std::string& name : b.parameters) {
    const std::string grad = "d" + name;
    run.gradient_squares += sum_of_squares<T>(b.size(grad), b(grad), device);
  }
  return run;
}

// The block uploaded to `device`, one step, and every buffer downloaded (for the tests).
template <class T>
DenseBlockRun run_dense_block(const DenseBlockInputs& in, Device device, Precision precision) {
  DenseBlockBuffers<T> b(device);
  upload_dense_block(in, b);
  DenseBlockRun run = dense_block_step(in.shape, b, device, precision);
  run.values = b.download();
  return run;
}

}  // namespace skew::moe
