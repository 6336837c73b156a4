"""Turns the logs of scripts/device_check.sh into the short table it prints last, and a JSON file.

Reads OUT/ctest.log (ctest's summary lines), OUT/bench.log and OUT/torch.log (the one-line JSON
summaries that wide_gpu_bench, moe_gpu_bench (kernel rows; model row), torch_wide_fm.py,
torch_moe.py and torch_gpt_moe.py print), checks the targets of issues 7 and 19, writes OUT/results.json and prints the table. Exit status 0 when every
target is met, 1 otherwise; a missing measurement counts as not met. SCOPE "moe" (the
DEVICE_CHECK_SCOPE=moe run, which builds and runs no wide_train parts) leaves the wide rows out;
SCOPE "wide" (DEVICE_CHECK_SCOPE=wide: no MoE parts) leaves the MoE rows out.
    python3 scripts/device/summarize.py OUT COMMIT DEVICE [SCOPE]
"""
import json
import pathlib
import re
import sys


def json_lines(path):
    """The JSON objects printed one per line in a log, keyed by what identifies them."""
    found = {}
    if not path.exists():
        return found
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "runs" in obj or ("nnz" in obj and "dense_ms" not in obj):
            found["wide"] = obj
        elif "dense_ms" in obj:
            found["torch_wide"] = obj
        elif "matmul_attention" in obj:
            found["torch_gpt_moe"] = obj
        elif "model_shape" in obj:  # moe_gpu_bench --bench.rows=model
            found["moe_model"] = obj
        elif "tokens" in obj:
            found["moe"] = obj
        elif "experts" in obj and "gate" in obj:
            found["torch_moe"] = obj
    return found


def ctest_counts(path):
    text = path.read_text(errors="replace") if path.exists() else ""
    # CMake 4 drops the ", N tests failed" part when none failed ("100% tests passed out of 6").
    m = re.search(r"(\d+)% tests passed(?:, (\d+) tests failed)? out of (\d+)", text)
    if not m:
        return None
    failed, total = int(m.group(2) or 0), int(m.group(3))
    skipped = len(re.findall(r"\*\*\*Skipped", text))
    return {"total": total, "failed": failed, "skipped": skipped, "passed": total - failed - skipped}


def rowwise_rows(rowwise, rows):
    """One info row per row-wise kernel: its time against the bytes it must move at 4.8 TB/s."""
    if not rowwise:
        rows.append(("MoE row-wise kernels (layernorm, embedding, softmax, CE, grad norm)", "n/a", "-", "-"))
        return
    shape = rowwise["shape"]
    label = f"{shape['rows']}x{shape['d']}, seq {shape['seq']}, heads {shape['heads']}, vocab {shape['vocab']}"
    rows.append((f"MoE row-wise kernels at {label} (info)", "ms, share of 4.8 TB/s / of copy", "-", "-"))
    for name, r in rowwise.items():
        if name == "shape":
            continue
        rows.append((f"  {name}, {r['MB']:.0f} MB (bound {r['bound_ms']:.3f} ms) (info)",
                     f"{r['ms']:.3f} ms, {100 * r['of_peak']:.0f}% / {100 * r['of_copy_bound']:.0f}%", "-", "-"))


def dense_block_rows(block, rows):
    """Info rows for one dense GPT block's forward + backward through lib/moe/ops on the GPU."""
    if not block:
        rows.append(("dense GPT block fwd+bwd (lib/moe/ops on CUDA)", "n/a", "-", "-"))
        return
    shape = block["shape"]
    label = (f"d {shape['d']}, {shape['heads']} heads, seq {shape['seq']}, batch {shape['batch']}, "
             f"d_ff {shape['d_ff']}, vocab {shape['vocab']}")
    for precision in ("fp32", "bf16"):
        r = block[precision]
        rows.append((f"dense GPT block fwd+bwd, {precision}, {label} (info)",
                     f"{r['tokens_per_s']:.0f} tokens/s, {r['ms']:.2f} ms, {r['gemm_TFLOPs']:.0f} TFLOP/s", "-", "-"))


def model_rows(model, torch_model, check, rows):
    """Issue 19's GPT-MoE d1024 training step: ours (moe_gpu_bench's model row) against PyTorch
    eager (torch_gpt_moe.py, the faster of its two attention variants), and the expert GEMMs'
    share of the H200's 790 TFLOP/s bf16; the step's split as an info row."""
    ours = model.get("model")
    eager = [torch_model[k] for k in ("matmul_attention", "sdpa_attention") if k in torch_model]
    best = max(eager, key=lambda r: r["tokens_per_s"]) if eager else None
    shape = (ours or {}).get("shape") or model.get("model_shape") or {}
    label = f"GPT-MoE d{shape.get('d_model', 1024)} step (batch {shape.get('batch', '?')} x seq {shape.get('seq', '?')})"
    if ours and best:
        ratio = ours["tokens_per_s"] / best["tokens_per_s"]
        check(f"{label}: ours vs PyTorch eager",
              f"{ratio:.2f}x ({ours['tokens_per_s']:.0f} vs {best['tokens_per_s']:.0f} tokens/s)", ">= 1.5x", ratio >= 1.5)
    else:
        check(f"{label}: ours vs PyTorch eager",
              None if not ours else f"{ours['tokens_per_s']:.0f} tokens/s, PyTorch n/a", ">= 1.5x", None)
    for name in ("matmul_attention", "sdpa_attention"):
        if name in torch_model:
            rows.append((f"  PyTorch eager, {name.replace('_', ' ')} (info)",
                         f"{torch_model[name]['tokens_per_s']:.0f} tokens/s", "-", "-"))
    if not ours:
        check(f"{label}: expert GEMM of 790 TFLOP/s bf16", None, ">= 40%", None)
        return
    check(f"{label}: expert GEMM of 790 TFLOP/s bf16",
          f"{100 * ours['expert_gemm_of_peak']:.0f}% ({ours['expert_gemm_TFLOPs']:.0f} TFLOP/s)", ">= 40%",
          ours["expert_gemm_of_peak"] >= 0.4)
    split = ", ".join(f"{k.replace('_incl_attention', '+attn')} {v:.1f}" for k, v in ours["split_ms"].items())
    rows.append((f"  step split, ms of {ours['step_ms']:.1f} (info)", split, "-", "-"))


def main():
    out, commit, device = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    scope = sys.argv[4] if len(sys.argv) > 4 else "all"
    logs = {**json_lines(out / "bench.log"), **json_lines(out / "torch.log")}
    tests = ctest_counts(out / "ctest.log")
    rows, met = [], []

    def check(name, value, target, ok):
        rows.append((name, "n/a" if value is None else value, target, "n/a" if ok is None else ("yes" if ok else "NO")))
        met.append(bool(ok))

    if tests:
        check("CUDA tests passed/skipped/failed", f"{tests['passed']}/{tests['skipped']}/{tests['failed']} of {tests['total']}",
              "0 failed", tests["failed"] == 0 and tests["passed"] > 0)
    else:
        check("CUDA tests", None, "0 failed", None)
    wide, torch_wide = logs.get("wide", {}), logs.get("torch_wide", {})
    fm = next((r for r in wide.get("runs", []) if r.get("model") == "fm"), None)
    lr = next((r for r in wide.get("runs", []) if r.get("model") == "lr"), None)
    if scope == "moe":
        pass  # the wide parts were not built
    elif fm:
        check("wide FM flow/classical speedup", f"{fm['flow_speedup']:.2f}x ({fm['flow_ms']:.2f} vs {fm['classical_ms']:.2f} ms/epoch)",
              ">= 5x", fm["flow_speedup"] >= 5)
        if torch_wide:
            ratio = torch_wide["best_ms"] / fm["flow_ms"]
            check("wide FM flow vs PyTorch EmbeddingBag", f"{ratio:.2f}x ({torch_wide['best_ms']:.2f} ms/epoch torch)", "> 1x", ratio > 1)
        else:
            check("wide FM flow vs PyTorch EmbeddingBag", None, "> 1x", None)
    else:
        check("wide FM flow/classical speedup", None, ">= 5x", None)
        check("wide FM flow vs PyTorch EmbeddingBag", None, "> 1x", None)
    if lr:
        rows.append(("wide LR flow/classical speedup (info)", f"{lr['flow_speedup']:.2f}x", "-", "-"))
    ffm = next((r for r in wide.get("runs", []) if r.get("model") == "ffm"), None)
    if ffm:
        rows.append(("wide FFM flow/classical speedup (info)", f"{ffm['flow_speedup']:.2f}x", "-", "-"))
    for r in wide.get("runs", []):
        if "train_flow_overlap_ms" in r:
            rows.append((f"wide {r['model'].upper()} training epoch classical/flow/flow+overlap (info)",
                         f"{r['train_classical_ms']:.1f}/{r['train_flow_ms']:.1f}/{r['train_flow_overlap_ms']:.1f} ms "
                         f"(overlap {r['overlap_gain']:.2f}x)", "-", "-"))
    moe, torch_moe = logs.get("moe", {}), logs.get("torch_moe", {})
    if scope == "wide":
        pass  # the MoE parts were not built
    elif "dispatch" in moe:
        d = moe["dispatch"]
        check("MoE dispatch of copy bound", f"{100 * d['of_copy_bound']:.0f}% ({d['GBps']:.0f} of {moe['copy_GBps']:.0f} GB/s)",
              ">= 50%", d["of_copy_bound"] >= 0.5)
        if "dispatch" in torch_moe:
            rows.append(("MoE dispatch, PyTorch (info)", f"{torch_moe['dispatch']['GBps']:.0f} GB/s", "-", "-"))
        g = moe["gate"]
        rows.append(("MoE gate (info)", f"{g['GBps']:.0f} GB/s, {100 * g['of_copy_bound']:.0f}% of copy", "-", "-"))
        if "gate" in torch_moe:
            rows.append(("MoE gate, PyTorch (info)", f"{torch_moe['gate']['GBps']:.0f} GB/s", "-", "-"))
        if "elementwise" in moe:
            el = moe["elementwise"]
            rows.append(("GELU forward / AdamW over 2^26 floats (info)",
                         f"{100 * el['gelu_of_copy_bound']:.0f}% / {100 * el['adamw_of_copy_bound']:.0f}% of copy bound", "-", "-"))
        e = moe["experts"]
        check("bf16 grouped GEMM of one cuBLAS GEMM",
              f"{100 * e['of_one_gemm']:.0f}% ({e['grouped_TFLOPs']:.0f} vs {e['one_gemm_TFLOPs']:.0f} TFLOP/s)",
              ">= 60%", e["of_one_gemm"] >= 0.6)
        te = torch_moe.get("experts", {})
        for key, name in (("cached_weights_TFLOPs", "weights kept in bf16, activations rounded per call"),
                          ("bf16_operands_TFLOPs", "both operands bf16")):
            if key in e:
                vs_torch = f", {e[key] / te['loop_TFLOPs']:.2f}x PyTorch's loop" if "loop_TFLOPs" in te else ""
                rows.append((f"bf16 grouped GEMM, {name} (info)", f"{e[key]:.0f} TFLOP/s{vs_torch}", "-", "-"))
        v = e.get("variants", {})
        if "bf16_out_TFLOPs" in v:
            rows.append(("bf16 grouped GEMM, bf16 operands and bf16 out (info)", f"{v['bf16_out_TFLOPs']:.0f} TFLOP/s", "-", "-"))
        if "grouped_batched_TFLOPs" in v:
            rows.append(("cublasGemmGroupedBatchedEx, bf16 operands (info)",
                         f"{v['grouped_batched_TFLOPs']:.0f} TFLOP/s, rel L2 {v.get('grouped_batched_rel_l2', float('nan')):.1e}", "-", "-"))
        elif "grouped_batched_error" in v:
            rows.append(("cublasGemmGroupedBatchedEx (info)", v["grouped_batched_error"][:60], "-", "-"))
        for key in ("loop_TFLOPs", "loop_fp32_out_TFLOPs", "grouped_mm_TFLOPs", "one_gemm_TFLOPs"):
            if key in te:
                rows.append((f"PyTorch bf16 {key.replace('_TFLOPs', '')} (info)", f"{te[key]:.0f} TFLOP/s", "-", "-"))
    else:
        check("MoE dispatch of copy bound", None, ">= 50%", None)
        check("bf16 grouped GEMM of one cuBLAS GEMM", None, ">= 60%", None)
    if scope != "wide":
        rowwise_rows(moe.get("rowwise"), rows)
        dense_block_rows(moe.get("dense_block"), rows)
        model_rows(logs.get("moe_model", {}), logs.get("torch_gpt_moe", {}), check, rows)
    (out / "results.json").write_text(json.dumps({"commit": commit, "device": device, "tests": tests, **logs}, indent=1) + "\n")
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(str(r[1])) for r in rows)
    lines = [f"device check: {device}, commit {commit}", f"{'measure':<{width}}  {'value':<{vwidth}}  target    met"]
    lines += [f"{n:<{width}}  {str(v):<{vwidth}}  {t:<8}  {m}" for n, v, t, m in rows]
    lines.append(f"all targets met: {'yes' if all(met) else 'NO'}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
