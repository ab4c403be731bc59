#!/usr/bin/env python3
"""blockcast.torch.Linear forward + backward vs torch.nn.Linear in bf16, per layer: wall time per
iteration (host included: what a training step pays) and GPU busy time per iteration (the sum of the
kernels' durations from torch.profiler), for the layer shapes of the example GPT (d_model 512, 8192
tokens) and for large layers where the GEMMs dominate.

    BLOCKCAST_LIBRARY=build/lib/libblockcast.so.0 python3 tests/bench/bench_linear.py [--iters 50]

Prints a markdown table; ratios are against nn.Linear (bf16) of the same shape, measured in the same run."""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime", "python"))
import blockcast.torch as bct  # noqa: E402

SHAPES = [(8192, 512, 1536), (8192, 2048, 512), (8192, 4096, 4096), (8192, 8192, 8192)]
RECIPES = ["bf16", "fp8_current", "fp8_delayed", "fp8_blockwise", "mxfp8", "nvfp4"]


def layer(recipe, k, n):
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n, device="cuda", dtype=torch.bfloat16)
    return lin if recipe == "bf16" else bct.Linear.from_linear(lin, recipe)


def step(lin, x, dy):
    y = lin(x)
    y.backward(dy)
    lin.weight.grad = None
    lin.bias.grad = None
    x.grad = None


def setup(recipe, m, k, n):
    """The layer and its operands, after 5 warm-up iterations (GEMM paths decided, kernels loaded)."""
    lin = layer(recipe, k, n)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 1e-3
    for _ in range(5):
        step(lin, x, dy)
    torch.cuda.synchronize()
    return lin, x, dy


def measure(recipe, m, k, n, iters):
    lin, x, dy = setup(recipe, m, k, n)
    t0 = time.perf_counter()
    for _ in range(iters):
        step(lin, x, dy)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / iters
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            step(lin, x, dy)
        torch.cuda.synchronize()
    busy = sum(e.self_device_time_total for e in prof.key_averages()) / 10 / 1e6  # us -> s
    return wall, busy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--host-profile", metavar="RECIPE", help="only cProfile the host side of RECIPE on the first shape")
    a = ap.parse_args()
    if a.host_profile:
        import cProfile
        import pstats
        lin, x, dy = setup(a.host_profile, *SHAPES[0])
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(a.iters):
            step(lin, x, dy)
        torch.cuda.synchronize()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
        return
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; forward + backward of one layer, "
          f"bf16 input, {a.iters} iterations (wall) and 10 profiled (GPU busy)")
    print("| M x K -> N | recipe | wall ms | vs bf16 | GPU busy ms | vs bf16 | host-bound (wall / busy) |")
    print("|---|---|---|---|---|---|---|")
    for m, k, n in SHAPES:
        base = None
        for r in RECIPES:
            wall, busy = measure(r, m, k, n, a.iters)
            base = base or (wall, busy)
            print(f"| {m} x {k} -> {n} | {r} | {wall * 1e3:.3f} | {wall / base[0]:.2f}x | {busy * 1e3:.3f} | "
                  f"{busy / base[1]:.2f}x | {wall / busy:.2f} |", flush=True)


if __name__ == "__main__":
    main()
