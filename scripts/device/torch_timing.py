"""Median wall time of a PyTorch callable, shared by the PyTorch comparison scripts: CUDA events
on a GPU device, perf_counter on the CPU (dry runs), one warm-up call first."""
import statistics
import time

import torch


def median_ms(fn, repeats, device):
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        else:
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
