"""PyTorch eager baseline for moe_gpu_bench's "GPT-MoE model step" row: the same GPT-MoE training
step on the same data shape, timed with CUDA events (median of repeats after a warm-up), one JSON
line. The model is moe_train's GPT (lib/moe/models/gpt_network.hpp, lib/moe/gate.hpp,
lib/moe/moe_layer.hpp): byte tokens (vocab 256) + learned positions, pre-LayerNorm blocks (qkv and
output linears with biases, causal multi-head attention), every FFN an MoE layer: gate logits
x Wg (no bias), softmax, top-k, each chosen expert's output weighed by its probability; the
GShard/Switch balance loss aux_weight * E * sum_e mean_prob[e] * assigned_fraction[e] and the
z-loss z_weight * mean(logsumexp^2); experts y = gelu(x W1 + b1) W2 + b2 run as a per-expert loop;
final LayerNorm, LM head tied to the token embedding, cross-entropy, gradient-norm clip 1.0, AdamW.
Matmuls under bf16 autocast, fp32 master weights (moe_train's train.precision=bf16).
Two attention rows: plain matmuls + masked softmax (no flash), and scaled_dot_product_attention.
--device cpu with tiny sizes is the dry run of the script (host clock, no autocast).
"""
import argparse
import json
import math
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_gpt_moe.py: PyTorch is not installed here (pip install torch); "
             "it runs in scripts/device_check.sh on the device machine")

from torch_timing import median_ms


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        d, e, f = a.d_model, a.experts, a.d_ff
        self.a = a
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.gate = torch.nn.Linear(d, e, bias=False)
        init = lambda *shape: torch.nn.Parameter(torch.randn(*shape) * 0.02)  # noqa: E731
        self.w1, self.b1 = init(e, d, f), torch.nn.Parameter(torch.zeros(e, f))
        self.w2, self.b2 = init(e, f, d), torch.nn.Parameter(torch.zeros(e, d))

    def attention(self, x):
        b, t, d = x.shape
        h = self.a.heads
        q, k, v = self.qkv(x).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        if self.a.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def moe(self, x):
        """Returns the layer's output and its auxiliary losses (balance + z)."""
        a = self.a
        rows = x.reshape(-1, x.shape[-1])
        logits = self.gate(rows).float()  # the router in fp32, as moe_train keeps it
        probs = torch.softmax(logits, dim=-1)
        weight, expert = torch.topk(probs, a.topk, dim=-1)
        assigned = torch.bincount(expert.flatten(), minlength=a.experts).float() / expert.numel()
        aux = a.aux_weight * a.experts * (probs.mean(0) * assigned).sum()
        z = a.z_weight * torch.logsumexp(logits, dim=-1).square().mean()
        flat_expert = expert.flatten()
        order = torch.argsort(flat_expert, stable=True)
        token = order // a.topk
        counts = torch.bincount(flat_expert, minlength=a.experts).tolist()  # the loop's sizes: a host sync
        out = torch.zeros_like(rows)
        start = 0
        for e, count in enumerate(counts):
            if count == 0:
                continue
            idx = token[start:start + count]
            h = F.gelu(rows[idx] @ self.w1[e] + self.b1[e], approximate="tanh")
            y = (h @ self.w2[e] + self.b2[e]) * weight.flatten()[order[start:start + count]].unsqueeze(1)
            out = out.index_add(0, idx, y.to(out.dtype))
            start += count
        return out.view_as(x), aux + z

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        y, aux = self.moe(self.ln2(x))
        return x + y, aux


class GptMoe(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok = torch.nn.Embedding(256, a.d_model)
        self.pos = torch.nn.Embedding(a.seq, a.d_model)
        torch.nn.init.normal_(self.tok.weight, std=0.02)
        torch.nn.init.normal_(self.pos.weight, std=0.02)
        self.blocks = torch.nn.ModuleList(Block(a) for _ in range(a.layers))
        self.lnf = torch.nn.LayerNorm(a.d_model)

    def forward(self, tokens, targets):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        aux = 0.0
        for block in self.blocks:
            x, block_aux = block(x)
            aux = aux + block_aux
        logits = self.lnf(x) @ self.tok.weight.t()  # LM head tied to the token embedding
        return F.cross_entropy(logits.float().view(-1, 256), targets.view(-1)) + aux


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=4096)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--aux-weight", type=float, default=0.01)
    p.add_argument("--z-weight", type=float, default=0.001)
    p.add_argument("--repeats", type=int, default=5, help="timed steps after one warm-up (median reported)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu (tiny sizes) for a dry run of the script")
    a = p.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_gpt_moe.py: no CUDA device visible to PyTorch (--device cpu is the dry run)")
    torch.manual_seed(7)
    # Random bytes as the token ids: the step's work does not depend on the text.
    tokens = torch.randint(0, 256, (a.batch, a.seq + 1), device=dev)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    out = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "shape": {k: getattr(a, k) for k in ("d_model", "heads", "layers", "experts", "topk", "d_ff", "seq",
                                                 "batch")},
           "tokens_per_step": a.batch * a.seq, "timed_steps": a.repeats}
    for name, sdpa in (("matmul_attention", False), ("sdpa_attention", True)):
        a.sdpa = sdpa
        model = GptMoe(a).to(dev)
        adam = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.01)
        losses = []

        def step():
            adam.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
                loss = model(inputs, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            adam.step()
            losses.append(loss.detach())

        ms = median_ms(step, a.repeats, dev)
        out[name] = {"step_ms": ms, "tokens_per_s": a.batch * a.seq / (ms * 1e-3),
                     "last_loss": float(losses[-1])}
        del model, adam, losses
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
