"""PyTorch baseline for moe_gpu_bench: the same gate, dispatch and expert-GEMM work at the same
shapes, timed with CUDA events (median of repeats after a warm-up), with the same byte and FLOP
counts, so the two print comparable GB/s and TFLOP/s. Prints one JSON line. --device cpu (with
small sizes) is the dry run of the script where no GPU is: host clock, fp32 for the GEMMs.
  gate      softmax, logsumexp and top-k of [tokens, experts] fp32 logits
  dispatch  bincount + cumsum + stable argsort of the expert ids, then the row permutation
  experts   one bf16 matmul per expert group (Zipf sizes, as in the C++ bench), torch._grouped_mm
            where this PyTorch has it, and one bf16 matmul of the whole shape
"""
import argparse
import json

import torch
from torch_timing import median_ms


def skewed_offsets(groups, rows, s):
    """Same as moe_gpu_bench's: group g gets rows * (1/(g+1)^s) / sum, the last the rest."""
    w = [1.0 / (g + 1.0) ** s for g in range(groups)]
    total = sum(w)
    offsets = [0]
    for g in range(groups):
        offsets.append(rows if g + 1 == groups else offsets[-1] + int(rows * w[g] / total))
    return offsets


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=65536)
    p.add_argument("--experts", type=int, default=64)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--gemm-rows", type=int, default=32768)
    p.add_argument("--gemm-k", type=int, default=2048)
    p.add_argument("--gemm-n", type=int, default=8192)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the script")
    a = p.parse_args()
    dev = torch.device(a.device)
    gemm_dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(7)
    out = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "torch": torch.__version__}

    big = torch.empty(1 << (30 if dev.type == "cuda" else 24), dtype=torch.uint8, device=dev).random_()
    copy = torch.empty_like(big)
    bandwidth = 2 * big.numel() / (median_ms(lambda: copy.copy_(big), a.repeats, dev) * 1e-3)
    out["copy_GBps"] = bandwidth / 1e9
    del big, copy

    logits = torch.randn(a.tokens, a.experts, device=dev)

    def gate():
        probs = torch.softmax(logits, dim=-1)
        lse = torch.logsumexp(logits, dim=-1)
        weight, expert = torch.topk(probs, a.topk, dim=-1)
        return probs, lse, weight, expert

    ms = median_ms(gate, a.repeats, dev)
    cells, picks = a.tokens * a.experts, a.tokens * a.topk
    gate_bytes = cells * 8 + a.tokens * 4 + picks * 8
    out["gate"] = {"ms": ms, "GBps": gate_bytes / (ms * 1e-3) / 1e9}

    n = a.tokens * a.topk
    bounds = torch.tensor(skewed_offsets(a.experts, 1 << 20, 1.0)[1:-1], device=dev)
    keys = torch.bucketize(torch.randint(0, 1 << 20, (n,), device=dev), bounds, right=True).to(torch.int32)
    rows_in = torch.randn(n, a.width, device=dev)

    def dispatch():
        counts = torch.bincount(keys, minlength=a.experts)
        starts = torch.cumsum(counts, 0) - counts
        order = torch.argsort(keys, stable=True)
        return starts, rows_in.index_select(0, order)

    ms = median_ms(dispatch, a.repeats, dev)
    dispatch_bytes = n * a.width * 8 + n * 4 + n * 8
    out["dispatch"] = {"ms": ms, "GBps": dispatch_bytes / (ms * 1e-3) / 1e9,
                       "of_copy_bound": dispatch_bytes / (ms * 1e-3) / bandwidth}

    offsets = skewed_offsets(a.groups, a.gemm_rows, a.zipf)
    a16 = torch.randn(a.gemm_rows, a.gemm_k, device=dev, dtype=gemm_dtype)
    b16 = torch.randn(a.groups, a.gemm_k, a.gemm_n, device=dev, dtype=gemm_dtype)
    flops = 2.0 * a.gemm_rows * a.gemm_k * a.gemm_n

    def per_group():
        return [a16[offsets[g]:offsets[g + 1]] @ b16[g] for g in range(a.groups)]

    experts = {"loop_ms": median_ms(per_group, a.repeats, dev)}
    # The same loop writing fp32 outputs, as moe_gpu_bench's grouped GEMM does (bf16 operands,
    # fp32 accumulate): PyTorch builds that have the out_dtype argument of torch.mm only.
    try:
        def per_group_fp32_out():
            return [torch.mm(a16[offsets[g]:offsets[g + 1]], b16[g], out_dtype=torch.float32) for g in range(a.groups)]
        per_group_fp32_out()
        experts["loop_fp32_out_ms"] = median_ms(per_group_fp32_out, a.repeats, dev)
    except (TypeError, RuntimeError) as e:
        experts["loop_fp32_out_error"] = str(e).splitlines()[0]
    if hasattr(torch, "_grouped_mm") and dev.type == "cuda":
        offs = torch.tensor(offsets[1:], device=dev, dtype=torch.int32)
        # _grouped_mm wants B as [groups, n, k] transposed (column-major per group).
        bt = b16.transpose(1, 2).contiguous().transpose(1, 2)
        try:
            experts["grouped_mm_ms"] = median_ms(lambda: torch._grouped_mm(a16, bt, offs=offs), a.repeats, dev)
        except RuntimeError as e:  # unsupported layout or device in this build: report, carry on
            experts["grouped_mm_error"] = str(e).splitlines()[0]
    experts["one_gemm_ms"] = median_ms(lambda: a16 @ b16[0], a.repeats, dev)
    for key in [k for k in experts if k.endswith("_ms")]:
        experts[key.replace("_ms", "_TFLOPs")] = flops / (experts[key] * 1e-3) / 1e12
    out["experts"] = experts
    print(json.dumps(out))


if __name__ == "__main__":
    main()
