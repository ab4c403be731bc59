#!/usr/bin/env python3
"""blockcast from Python against the same quantizers written in PyTorch (tests/bench/
torch_quantizers.py), eager and under torch.compile, on a GPU. Every output is compared byte for
byte with blockcast's before anything is timed; a baseline that differs is reported, not timed.
Timing: CUDA events around batches of back-to-back calls, the median batch; inputs rotated over
enough buffers to exceed 4x the L2; a device-to-device copy timed the same way in the same run is
the reference (bytes read + written). Also the host overhead of one call.

  python3 tests/bench/bench_torch.py --out DIR [--formats a,b] [--sizes 4096,8192,16384]
      [--ragged 8190x8194] [--reps 20] [--no-compile] [--overhead-only]
Writes DIR/bench-torch.md (tables), DIR/bench-torch.json and, with matplotlib, DIR/bench-torch.png
(`bench_torch.py --replot FILE.json DIR` draws the plot again from a recorded run)."""
import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "runtime", "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import blockcast as bc  # noqa: E402
from torch_quantizers import OUTPUT_FIELDS, QUANTIZERS  # noqa: E402

BATCH = 10


def median_ms(fn, inputs, reps):
    """Median over reps of (a batch of BATCH calls on rotating inputs) / BATCH, in ms."""
    for i in range(3):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    k = 0
    for _ in range(reps):
        a.record()
        for _ in range(BATCH):
            fn(inputs[k % len(inputs)])
            k += 1
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b) / BATCH)
    return statistics.median(ms)


def copy_gbs(reps):
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    t = median_ms(lambda s: dst.copy_(s), [src], reps)
    return 2 * n / t / 1e6


def raw(t):
    return t.contiguous().view(torch.uint8).reshape(-1)


def bc_fields(q, fields):
    return [getattr(q, f) for f in fields]


def compare(got, want):
    """None if every tensor's bytes agree, else where the first difference is."""
    if len(got) != len(want):
        return f"{len(got)} outputs vs {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        rg, rw = raw(g), raw(w)
        if rg.numel() != rw.numel():
            return f"output {i}: {rg.numel()} bytes vs {rw.numel()}"
        bad = (rg != rw).nonzero()
        if bad.numel():
            j = int(bad[0])
            return f"output {i}: {bad.numel()} bytes differ, first at {j}: {int(rg[j])} vs {int(rw[j])}"
    return None


def overhead(n=3000):
    """Host microseconds per call, small tensors (the GPU is not the limit)."""
    x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    out = {}

    def per_call(fn):
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        return (t1 - t0) / n * 1e6

    def base():
        y = torch.empty_like(x)
        torch.mul(x, 2, out=y)
    fp8, mx, nv = bc.format("fp8_e4m3_tensor"), bc.format("mxfp8_e4m3"), bc.format("nvfp4")
    out["torch.empty + one elementwise op"] = per_call(base)
    out["bc.quantize fp8_e4m3_tensor rowwise (3 outputs, 3 launches)"] = per_call(lambda: bc.quantize(x, fp8))
    out["bc.quantize mxfp8_e4m3 rowwise (2 outputs, 1 launch)"] = per_call(lambda: bc.quantize(x, mx))
    out["bc.quantize nvfp4 rowwise+columnwise (5 outputs, 2 launches)"] = per_call(
        lambda: bc.quantize(x, nv, rowwise=True, columnwise=True))
    out["torch.ops.blockcast.quantize mxfp8_e4m3 (the custom op, as torch.compile calls it)"] = per_call(
        lambda: torch.ops.blockcast.quantize(x, "mxfp8_e4m3", True, False, False, False, 0, 0))
    q = bc.quantize(x, mx)
    out["bc.dequantize mxfp8_e4m3 rowwise"] = per_call(lambda: bc.dequantize(q))
    # where the time of bc.quantize goes (mxfp8 rowwise)
    import ctypes
    from blockcast import _capi as C, core, ops
    f, h = core.handle(mx)
    lay = core._layout(mx.name, 256, 256, C.BC_ROWWISE, False)
    d = torch.empty(core.data_shape(f, lay), dtype=core.torch_data_dtype(f), device="cuda")
    sc = torch.empty(core.scale_shape(f, lay), dtype=core.torch_scale_dtype(f), device="cuda")
    t = C.Tensor(x.data_ptr(), C.BC_BF16, 256, 256, 256)
    qt = C.QTensor(h, 256, 256, d.data_ptr(), sc.data_ptr())
    stream = ops._stream(x.device)
    out["part: C bc_quantize mxfp8 through ctypes (descriptors and outputs made beforehand)"] = per_call(
        lambda: C.call(C.bc_quantize, ctypes.byref(t), ctypes.byref(qt), stream))
    out["part: torch.empty float8 256x256 + float8_e8m0fnu 256x8 (CUDA)"] = per_call(
        lambda: (torch.empty(core.data_shape(f, lay), dtype=core.torch_data_dtype(f), device=x.device),
                 torch.empty(core.scale_shape(f, lay), dtype=core.torch_scale_dtype(f), device=x.device)))
    out["part: current stream handle"] = per_call(lambda: ops._stream(x.device))
    out["part: device guard"] = per_call(lambda: ops._on_device(x.device).__enter__())
    out["part: descriptors (flat2d, ctypes structs)"] = per_call(
        lambda: (ops._hp("quantize", x), C.QTensor(h, 256, 256)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--formats", default="")
    ap.add_argument("--sizes", default="4096,8192,16384")
    ap.add_argument("--ragged", default="8190x8194")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--overhead-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    dev = torch.cuda.get_device_name()
    res = {"device": dev, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"), "rows": []}
    res["overhead_us"] = overhead()
    for k, v in res["overhead_us"].items():
        print(f"overhead: {v:6.2f} us  {k}", flush=True)
    if not args.overhead_only:
        res["copy_gbs"] = copy_gbs(args.reps)
        print(f"copy: {res['copy_gbs']:.0f} GB/s", flush=True)
        shapes = [(int(s), int(s)) for s in args.sizes.split(",") if s]
        if args.ragged:
            m, k = args.ragged.split("x")
            shapes.append((int(m), int(k)))
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        want = set(args.formats.split(",")) if args.formats else None
        keys = [key for key in QUANTIZERS if want is None or key[0] in want]
        for (m, k) in shapes:
            nbuf = max(2, math.ceil(4 * l2 / (m * k * 2)))
            xs = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) * (1 + i) for i in range(nbuf)]
            for key in keys:
                name, direction = key
                fields = OUTPUT_FIELDS[key]
                fmt = bc.format(name)
                rw, cw = direction in ("rowwise", "both"), direction in ("columnwise", "both")
                row = {"format": name, "direction": direction, "shape": f"{m}x{k}"}
                try:
                    q = bc.quantize(xs[0], fmt, rowwise=rw, columnwise=cw)
                except bc.BlockcastError as e:
                    row["error"] = str(e)
                    res["rows"].append(row)
                    print(f"{name} {direction} {m}x{k}: {e}", flush=True)
                    continue
                mine = bc_fields(q, fields)
                nbytes = m * k * 2 + sum(t.numel() * t.element_size() for t in
                                         (q.rowwise_data, q.rowwise_scale_inv, q.columnwise_data,
                                          q.columnwise_scale_inv, q.amax, q.scale) if t is not None)
                row["bytes"] = nbytes
                row["bc_ms"] = median_ms(lambda x: bc.quantize(x, fmt, rowwise=rw, columnwise=cw), xs, args.reps)
                fns = {"eager": QUANTIZERS[key]}
                if not args.no_compile:
                    torch._dynamo.reset()
                    fns["compile"] = torch.compile(QUANTIZERS[key], dynamic=False)
                for label, fn in fns.items():
                    try:
                        t0 = time.perf_counter()
                        diff = compare(list(fn(xs[0])), mine)
                        if label == "compile":
                            row["compile_s"] = time.perf_counter() - t0
                    except Exception as e:  # noqa: BLE001 - reported in the table
                        diff = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                    if diff:
                        row[label + "_mismatch"] = diff
                        continue
                    row[label + "_ms"] = median_ms(fn, xs, args.reps)
                res["rows"].append(row)
                gbs = lambda t: nbytes / t / 1e6  # noqa: E731
                msg = f"{name:18s} {direction:10s} {m}x{k}: bc {gbs(row['bc_ms']):6.0f} GB/s"
                for label in ("compile", "eager"):
                    if label + "_ms" in row:
                        msg += f", {label} {gbs(row[label + '_ms']):6.0f} (x{row[label + '_ms'] / row['bc_ms']:.2f})"
                    elif label + "_mismatch" in row:
                        msg += f", {label} MISMATCH {row[label + '_mismatch']}"
                print(msg, flush=True)
                write(args.out, res, plot_too=False)  # a run cut short keeps what it measured
            del xs
            torch.cuda.empty_cache()
    write(args.out, res)


def write(out, res, plot_too=True):
    with open(os.path.join(out, "bench-torch.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    lines = [f"# blockcast vs PyTorch quantizers (eager, torch.compile), {res['date']}, {res['device']}, torch {res['torch']}",
             "", "Command: `python3 tests/bench/bench_torch.py " + " ".join(sys.argv[1:]) + "`", "",
             "## Host overhead (256x256 bf16, microseconds per call, mean of 3000 calls)", "",
             "| call | us |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in res["overhead_us"].items()]
    if res.get("rows"):
        cp = res["copy_gbs"]
        lines += ["", f"## Bandwidth (bf16 input; bytes = input + every output; copy {cp:.0f} GB/s in this run)", "",
                  "| format | direction | shape | blockcast GB/s | % copy | torch.compile GB/s | speedup vs compile | eager GB/s | speedup vs eager |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            if "error" in r:
                lines.append(f"| {r['format']} | {r['direction']} | {r['shape']} | error: {r['error']} | | | | | |")
                continue
            g = lambda t: r["bytes"] / t / 1e6  # noqa: E731
            cells = [r["format"], r["direction"], r["shape"], f"{g(r['bc_ms']):.0f}", f"{100 * g(r['bc_ms']) / cp:.1f}"]
            for label in ("compile", "eager"):
                if label + "_ms" in r:
                    cells += [f"{g(r[label + '_ms']):.0f}", f"{r[label + '_ms'] / r['bc_ms']:.2f}x"]
                else:
                    cells += [f"not timed: {r.get(label + '_mismatch', 'not run')}", ""]
            lines.append("| " + " | ".join(cells) + " |")
    with open(os.path.join(out, "bench-torch.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    if not plot_too:
        return
    try:
        plot(out, res)
    except ImportError:
        print("matplotlib missing: no plot", flush=True)


def plot(out, res):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in res.get("rows", []) if "bc_ms" in r]
    if not rows:
        return
    keys = sorted({(r["format"], r["direction"]) for r in rows})
    n = len(keys)
    cols = 3
    fig, axes = plt.subplots(math.ceil(n / cols), cols, figsize=(5 * cols, 3.2 * math.ceil(n / cols)), squeeze=False)
    styles = (("blockcast", "bc_ms", "C0"), ("torch.compile", "compile_ms", "C1"), ("eager", "eager_ms", "C2"))
    for ax, key in zip(axes.ravel(), keys):
        rs = [r for r in rows if (r["format"], r["direction"]) == key]
        square = sorted((r for r in rs if r["shape"].split("x")[0] == r["shape"].split("x")[1]),
                        key=lambda r: int(r["shape"].split("x")[0]))
        ragged = [r for r in rs if r not in square]
        for label, field, color in styles:
            pts = [(int(r["shape"].split("x")[0]), r["bytes"] / r[field] / 1e6) for r in square if field in r]
            if pts:
                ax.plot(*zip(*pts), marker="o", color=color, label=label)
            for r in ragged:  # the ragged shape: a cross at its row count
                if field in r:
                    ax.plot(int(r["shape"].split("x")[0]), r["bytes"] / r[field] / 1e6, marker="x", ms=9, color=color)
        ax.axhline(res["copy_gbs"], color="gray", ls="--", lw=0.8, label="copy")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{key[0]} {key[1]}", fontsize=9)
        ax.set_xlabel("N (N x N bf16; x: " + ", ".join(r["shape"] for r in ragged) + ")" if ragged else "N (N x N bf16)",
                      fontsize=8)
        ax.set_ylabel("GB/s")
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7)
    fig.suptitle(f"{res['device']}, {res['date']}: quantize bandwidth vs size (bytes = input + outputs)")
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(os.path.join(out, "bench-torch.png"), dpi=80)


def replot(path, out):
    with open(path) as fh:
        plot(out, json.load(fh))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--replot":  # --replot FILE.json OUTDIR: the plot again
        replot(sys.argv[2], sys.argv[3])
    else:
        main()
