"""PyTorch baseline for wide_gpu_bench: one epoch of FM mini-batch gradients on the same rows.

The data is what `wide_gpu_bench --bench.export=FILE` wrote (frequency-renumbered CSR as
safetensors: row_ptr, index, value, label; metadata num_features, batch_size). The model is the
FM of kernels/wide_flow.hpp (bias, linear weight w_f, latent v_f of k floats):
    logit = b + sum_j w_j x_j + 0.5 * (||sum_j v_j x_j||^2 - sum_j ||v_j x_j||^2)
with the linear term and sum_j v_j x_j through torch.nn.functional.embedding_bag (per-sample
weights = the values) and the squares through embedding + index_add. The gradient of the summed
log-loss is taken with autograd, as dense tensors and as sparse ones (sparse=True); the faster
is PyTorch's number. Timing: CUDA events (on --device cpu, the dry run where no GPU is, a host
clock), median of repeats after a warm-up epoch. Prints one JSON line.
"""
import argparse
import json
import struct

import torch
from torch_timing import median_ms
import torch.nn.functional as F

DTYPES = {"I64": torch.int64, "I32": torch.int32, "F32": torch.float32}


def load(path, device):
    """Reads the safetensors file directly (8-byte header length, JSON header, raw tensors)."""
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        raw = bytearray(f.read())
    meta = header.pop("__metadata__")
    t = {}
    for name in ("row_ptr", "index", "value", "label"):
        begin, end = header[name]["data_offsets"]
        t[name] = torch.frombuffer(raw[begin:end], dtype=DTYPES[header[name]["dtype"]]).to(device)
    t["index"] = t["index"].long()  # embedding_bag wants indices and offsets of one dtype
    return t, int(meta["num_features"]), int(meta["batch_size"])


def batches(t, batch_size):
    """Pre-sliced batches (views plus the sample id of each nonzero), made outside the timing,
    as the CUDA kernels get their CSR uploaded beforehand."""
    row_ptr, rows = t["row_ptr"], t["label"].numel()
    out = []
    for begin in range(0, rows, batch_size):
        end = min(rows, begin + batch_size)
        lo, hi = int(row_ptr[begin]), int(row_ptr[end])
        offsets = row_ptr[begin:end] - lo
        counts = row_ptr[begin + 1:end + 1] - row_ptr[begin:end]
        sample = torch.repeat_interleave(torch.arange(end - begin, device=row_ptr.device), counts)
        out.append((t["index"][lo:hi], t["value"][lo:hi], offsets, sample, t["label"][begin:end]))
    return out


def fm_logits(bias, w, v, idx, val, offsets, sample, sparse):
    linear = F.embedding_bag(idx, w, offsets, mode="sum", per_sample_weights=val, sparse=sparse)[:, 0]
    s = F.embedding_bag(idx, v, offsets, mode="sum", per_sample_weights=val, sparse=sparse)
    q = F.embedding(idx, v, sparse=sparse)
    sq_nnz = (q * q).sum(1) * (val * val)
    sq = torch.zeros(offsets.numel(), device=val.device, dtype=val.dtype).index_add_(0, sample, sq_nnz)
    return bias + linear + 0.5 * ((s * s).sum(1) - sq)


def epoch(params, data, sparse):
    bias, w, v = params
    loss_sum = 0.0
    for idx, val, offsets, sample, label in data:
        z = fm_logits(bias, w, v, idx, val, offsets, sample, sparse)
        loss = F.binary_cross_entropy_with_logits(z, label, reduction="sum")
        torch.autograd.grad(loss, [bias, w, v])
        loss_sum += loss.detach()
    return loss_sum


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", help="safetensors file from wide_gpu_bench --bench.export")
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the script")
    args = p.parse_args()
    device = torch.device(args.device)
    t, num_features, batch_size = load(args.data, device)
    data = batches(t, batch_size)
    gen = torch.Generator(device=device).manual_seed(1)
    bias = torch.zeros((), device=device, requires_grad=True)
    w = (0.01 * torch.randn(num_features, 1, device=device, generator=gen)).requires_grad_()
    v = (0.01 * torch.randn(num_features, args.k, device=device, generator=gen)).requires_grad_()
    result = {"rows": t["label"].numel(), "nnz": t["index"].numel(), "batch_size": batch_size, "k": args.k,
              "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__}
    losses = {}
    for mode in ("dense", "sparse"):
        sparse = mode == "sparse"
        losses[mode] = float(epoch((bias, w, v), data, sparse))
        result[f"{mode}_ms"] = median_ms(lambda: epoch((bias, w, v), data, sparse), args.repeats, device)
    # Both modes compute the same function: their epoch losses must agree.
    assert abs(losses["dense"] - losses["sparse"]) <= 1e-4 * abs(losses["dense"]), losses
    result["epoch_loss"] = losses["dense"]
    result["best_ms"] = min(result["dense_ms"], result["sparse_ms"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
