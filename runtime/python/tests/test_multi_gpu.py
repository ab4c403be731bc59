#!/usr/bin/env python3
"""The Python collectives over real NCCL: one process per GPU (skips with fewer than 2 GPUs),
each bootstrapped by Comm.nccl(id file, W, rank, device=rank) without torch.cuda.set_device. Every
rank checks its own results against bc.quantize / bc.quantize_cast of the whole tensor on its
GPU: all_gather (both directions), quantize_comm + all_gather_quantized, the in-place cast +
gather (out=, row_slice), amax_allreduce, and a tensor on another GPU refused. TAP output (the
parent prints one test point per rank and check).
Run: BLOCKCAST_LIBRARY=path/libblockcast.so.0 python3 runtime/python/tests/test_multi_gpu.py [W]"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from tap import skip_all  # noqa: E402

if "BLOCKCAST_LIBRARY" not in os.environ and os.environ.get("BC_BUILD"):
    os.environ["BLOCKCAST_LIBRARY"] = os.path.join(os.environ["BC_BUILD"], "lib", "libblockcast.so.0")

FORMATS = ("fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "fp8_block_128x128", "mxfp4")


def same(a, b, what):
    import torch
    if a is None or b is None:
        assert a is None and b is None, f"{what}: one side is None"
        return
    ra = a.contiguous().view(torch.uint8).reshape(-1)
    rb = b.contiguous().view(torch.uint8).reshape(-1)
    assert ra.numel() == rb.numel(), f"{what}: {ra.numel()} vs {rb.numel()} bytes"
    bad = (ra != rb).nonzero()
    assert bad.numel() == 0, f"{what}: {bad.numel()} bytes differ, first at {int(bad[0])}"


def child(rank, world, d):
    import torch
    import blockcast as bc
    dev = torch.device("cuda", rank)
    comm = bc.Comm.nccl(os.path.join(d, "id"), world, rank, timeout=120, device=rank)
    results = []

    def check(name, fn):
        try:
            fn()
            results.append((name, True, ""))
        except Exception as e:  # noqa: BLE001 - reported by the parent
            results.append((name, False, f"{type(e).__name__}: {e}"))

    rows = [256 + 128 * (r % 2) for r in range(world)]  # unequal, whole 128-row bands
    starts = [sum(rows[:r]) for r in range(world)]
    cols = 512
    g = torch.Generator().manual_seed(2026)  # the same whole tensor on every rank
    x = (torch.randn(sum(rows), cols, generator=g) * torch.exp2(torch.randint(-6, 6, (sum(rows), 1), generator=g).float()))
    x = x.to(torch.bfloat16).to(dev)
    mine = x[starts[rank]:starts[rank] + rows[rank]]
    fields = ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax", "scale")
    with torch.cuda.device(dev):
        for name in FORMATS:
            f = bc.format(name)
            full = bc.quantize(x, name, rowwise=True, columnwise=True)

            def gather_both():
                q = bc.all_gather(mine, name, comm, rows=rows, rowwise=True, columnwise=True)
                for k in fields:
                    same(getattr(q, k), getattr(full, k), k)
            check(f"{name}: all_gather, both directions == quantize of the whole tensor", gather_both)

            def quantized_rows():
                q = bc.quantize_comm(mine, name, comm)
                g2 = bc.all_gather_quantized(q, comm, rows=rows)
                for k in ("rowwise_data", "rowwise_scale_inv", "amax", "scale"):
                    same(getattr(g2, k), getattr(full, k), k)
            check(f"{name}: quantize_comm + all_gather_quantized == quantize of the whole tensor", quantized_rows)

            def in_place():
                kw = {"scale": full.scale} if f.per_tensor else {"amax": full.amax} if f.two_level else {}
                want = bc.quantize_cast(x, name, **kw) if kw else bc.quantize(x, name)
                out = bc.empty(name, sum(rows), cols, device=dev)
                for k in ("rowwise_data", "rowwise_scale_inv"):  # a pattern: bytes the gather leaves unwritten show
                    getattr(out, k).view(torch.uint8).fill_(0xA5)
                piece = out.row_slice(starts[rank], rows[rank])
                if kw:
                    bc.quantize_cast(mine, name, out=piece, **kw)
                else:
                    bc.quantize(mine, name, out=piece)
                assert bc.all_gather_quantized(piece, comm, rows=rows, out=out) is out
                for k in fields:
                    if getattr(want, k) is not None:
                        same(getattr(out, k), getattr(want, k), k)
            check(f"{name}: the cast into its rows of out + the in-place gather == the whole tensor's cast", in_place)

        def amax():
            a = torch.tensor([float(rank), float(world - rank), -1.0], device=dev)
            bc.amax_allreduce(a, comm)
            assert a.tolist() == [float(world - 1), float(world), -1.0], a.tolist()
        check("amax_allreduce: the group's MAX in place", amax)

        def other_device():
            y = mine.to(torch.device("cuda", (rank + 1) % world))
            try:
                bc.all_gather(y, "mxfp8_e4m3", comm, rows=rows)
            except bc.BlockcastError as e:
                assert "the communicator was made on" in str(e), e
                return
            raise AssertionError("a tensor on another GPU was accepted")
        check("a tensor on another GPU is refused before any collective", other_device)
        torch.cuda.synchronize()
    comm.close()
    print("RESULTS " + json.dumps(results), flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return 0
    try:
        import torch
    except ImportError:
        skip_all("torch is not installed")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        skip_all(f"{n} GPUs (the Python multi-GPU test needs 2 or more)")
    world = min(n, int(sys.argv[1]) if len(sys.argv) > 1 else 8)
    timeout = float(os.environ.get("BC_MULTI_TIMEOUT", "240"))
    with tempfile.TemporaryDirectory(prefix="blockcast-pymulti-") as d:
        env = dict(os.environ, NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE", "0"))
        logs = [(open(os.path.join(d, f"rank{r}.out"), "w+"), open(os.path.join(d, f"rank{r}.err"), "w+")) for r in range(world)]
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), str(world), d], env=env,
                                  stdout=logs[r][0], stderr=logs[r][1], text=True) for r in range(world)]
        outs = []
        for r, p in enumerate(procs):
            note = ""
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                p.wait()
                note = f"killed after {timeout} s\n"
            o, e = logs[r]
            o.seek(0)
            e.seek(0)
            outs.append((p.returncode, o.read(), note + e.read()))
            o.close()
            e.close()
    print(f"# {world} GPUs, {world} ranks (one process each)")
    i, failed = 0, 0
    for r, (rc, o, e) in enumerate(outs):
        line = next((ln for ln in o.splitlines() if ln.startswith("RESULTS ")), None)
        if line is None:
            i += 1
            failed += 1
            print(f"not ok {i} - rank {r}: exited {rc} before its results")
            for ln in (e.strip().splitlines() or ["(no stderr)"])[-15:]:
                print(f"# {ln}")
            continue
        for name, ok, why in json.loads(line[len("RESULTS "):]):
            i += 1
            print(f"{'ok' if ok else 'not ok'} {i} - rank {r}: {name}")
            if not ok:
                failed += 1
                print(f"# {why}")
    print(f"1..{i}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
