#!/usr/bin/env python3
"""The quantized all-gather from Python over real NCCL against what a PyTorch user runs today:
torch.distributed.all_gather_into_tensor of the bf16 activation. One process per GPU (2 to 8),
a bf16 [M, 8192] activation per rank of 64 and 256 MiB. Rank 0 prints, per format (ms, and the
bf16 gather's time / this time):
  all_gather           bc.all_gather (current scaling: amax, all-reduce, cast, exchange), new buffers each call
  all_gather, out=     the same into buffers made once (bc.empty)
  cast + gather        delayed scaling: bc.quantize_cast with a known scale (NVFP4: global amax)
                       into a buffer of its own, then bc.all_gather_quantized
  in place             the cast into this rank's row_slice of out, then the in-place gather
Before timing, every rank compares each path's output with bc.quantize / quantize_cast of the
whole tensor on its GPU (byte for byte). Timing: CUDA events on the current stream around 10
calls, median of 7 such samples, rank 0's (the collectives keep the ranks in step).
Run: BLOCKCAST_LIBRARY=build/lib/libblockcast.so.0 PYTHONPATH=runtime/python python3 tests/bench/bench_torch_multi.py [W]"""
import os
import subprocess
import sys
import tempfile

FORMATS = ("fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4")
K = 8192


def timed(fn, reps=10, samples=7):
    import torch
    for _ in range(3):
        fn()
    ts = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / reps)
    return sorted(ts)[len(ts) // 2]


def same(a, b, what):
    import torch
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert torch.equal(a.contiguous().view(torch.uint8).reshape(-1), b.contiguous().view(torch.uint8).reshape(-1)), what


def child(rank, world, d):
    import torch
    import torch.distributed as dist
    import blockcast as bc
    dev = torch.device("cuda", rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method="file://" + os.path.join(d, "pg"), world_size=world, rank=rank, device_id=dev)
    comm = bc.Comm.nccl(os.path.join(d, "id"), world, rank, timeout=120, device=rank)
    rows_out = []
    for mb in (64, 256):
        M = mb * 1024 * 1024 // (K * 2)
        rows = [M] * world
        g = torch.Generator().manual_seed(7)
        whole = (torch.randn(world * M, K, generator=g) * 3).to(torch.bfloat16).to(dev)  # the same on every rank
        x = whole[rank * M:(rank + 1) * M]
        obf = torch.empty(world * M, K, dtype=torch.bfloat16, device=dev)
        t_bf = timed(lambda: dist.all_gather_into_tensor(obf, x))
        assert torch.equal(obf, whole)
        rows_out.append((mb, "bf16", "torch.distributed.all_gather_into_tensor", t_bf, 1.0))
        for name in FORMATS:
            f = bc.format(name)
            full = bc.quantize(whole, name)
            kw = {"scale": full.scale} if f.per_tensor else {"amax": full.amax} if f.two_level else {}
            want = bc.quantize_cast(whole, name, **kw) if kw else full
            fields = [k for k in ("rowwise_data", "rowwise_scale_inv", "amax", "scale") if getattr(want, k) is not None]
            out = bc.empty(name, world * M, K, device=dev)
            mine = bc.empty(name, M, K, device=dev)
            piece = out.row_slice(rank * M, M)

            def ag():
                return bc.all_gather(x, name, comm, rows=rows)

            def ag_out():
                return bc.all_gather(x, name, comm, rows=rows, out=out)

            def cast_into(target):  # delayed scaling: the scale (NVFP4: the global amax) known
                if kw:
                    bc.quantize_cast(x, name, out=target, **kw)
                else:
                    bc.quantize(x, name, out=target)

            def cast_gather():
                cast_into(mine)
                return bc.all_gather_quantized(mine, comm, rows=rows, out=out)

            def in_place():
                cast_into(piece)
                return bc.all_gather_quantized(piece, comm, rows=rows, out=out)
            for label, fn, ref in (("all_gather", ag, full), ("all_gather, out=", ag_out, full),
                                   ("cast + gather", cast_gather, want), ("in place", in_place, want)):
                for k in ("rowwise_data", "rowwise_scale_inv"):  # a pattern first: bytes a path leaves unwritten show
                    getattr(out, k).view(torch.uint8).fill_(0xA5)
                res = fn()
                torch.cuda.synchronize()
                for k in fields if ref is want else ("rowwise_data", "rowwise_scale_inv", "amax", "scale"):
                    same(getattr(res, k), getattr(ref, k), f"{name} {label} {k}")
                t = timed(fn)
                rows_out.append((mb, name, label, t, t_bf / t))
    comm.close()
    dist.destroy_process_group()
    if rank == 0:
        print(f"# {world} x {torch.cuda.get_device_name(0)}, torch {torch.__version__}, one process per GPU; "
              f"ratio = torch's bf16 gather / this")
        print("| per rank | format | path | ms | vs bf16 |\n|---|---|---|---|---|")
        for mb, name, label, t, r in rows_out:
            print(f"| {mb} MiB | {name} | {label} | {t:.3f} | {r:.2f}x |")
    sys.stdout.flush()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return 0
    import torch
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        print(f"bench_torch_multi: {n} GPUs; it needs 2 or more")
        return 1
    world = min(n, int(sys.argv[1]) if len(sys.argv) > 1 else 8)
    with tempfile.TemporaryDirectory(prefix="blockcast-pybench-") as d:
        env = dict(os.environ, NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE", "0"))
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), str(world), d], env=env)
                 for r in range(world)]
        rc = 0
        for p in procs:
            try:
                rc |= p.wait(timeout=float(os.environ.get("BENCH_LIMIT", "300")))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                return 1
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
