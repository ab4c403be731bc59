#!/usr/bin/env python3
"""The binding on a GPU with torch: every format x direction x dtype bit-identical to the C
reference (which the C GPU tier proves equal to the kernels) on the same inputs, dequantize
too; strided and ND inputs; torch.compile(fullgraph=True) gives the eager bytes; torch's scaled
matmul on blockcast operands equals the matmul of the dequantized operands; errors. TAP output.
Run: BLOCKCAST_LIBRARY=path/libblockcast.so python3 runtime/python/tests/test_gpu.py"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import run, skip, skip_all  # noqa: E402

try:
    import torch
except ImportError:
    skip_all("torch is not installed")
if not torch.cuda.is_available():
    skip_all("no CUDA device")

import blockcast as bc  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
FIELDS = ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax", "scale")
DEV = torch.device("cuda")
gen = torch.Generator().manual_seed(2026)


def sample(rows, cols, dtype, specials=True):
    x = torch.randn(rows, cols, generator=gen) * torch.exp2(torch.randint(-8, 8, (rows, 1), generator=gen).float())
    if specials:
        x[0, : min(cols, 48)] = 0.0                                  # all-zero blocks
        flat = x.view(-1)
        n = flat.numel()
        idx = torch.randint(0, n, (min(n, 64),), generator=gen)
        vals = torch.tensor([1e-40, -1e-42, 3.0e38, -448.0, 65504.0, -0.0, 1e-8, 6.0], dtype=torch.float32)
        flat[idx] = vals[torch.arange(idx.numel()) % vals.numel()]
    return x.to(dtype)


def raw(t):
    return None if t is None else t.detach().contiguous().view(torch.uint8).cpu().reshape(-1)


def same(a, b, what):
    ra, rb = raw(a), raw(b)
    assert (ra is None) == (rb is None), f"{what}: one side is None"
    if ra is None:
        return
    assert ra.numel() == rb.numel(), f"{what}: {ra.numel()} vs {rb.numel()} bytes"
    bad = (ra != rb).nonzero()
    assert bad.numel() == 0, f"{what}: {bad.numel()} bytes differ, first at {int(bad[0])}: {int(ra[bad[0]])} vs {int(rb[bad[0]])}"


def check_format(name, shapes, dtypes=(torch.bfloat16, torch.float32, torch.float16)):
    f = bc.format(name)
    n = 0
    for rows, cols in shapes:
        for dt in dtypes:
            x = sample(rows, cols, dt)
            xd = x.to(DEV)
            for rw, cw in ((True, False), (False, True), (True, True)):
                for sw in ((False, True) if not f.per_tensor else (False,)):
                    g = bc.quantize(xd, f, rowwise=rw, columnwise=cw, swizzled=sw)
                    r = bc.ref.quantize(x, f, rowwise=rw, columnwise=cw, swizzled=sw)
                    tag = f"{name} {dt} {rows}x{cols} rw={rw} cw={cw} sw={sw}"
                    for k in FIELDS:
                        same(getattr(g, k), getattr(r, k), f"{tag} {k}")
                        gk = getattr(g, k)
                        if gk is not None:
                            assert gk.dtype == getattr(r, k).dtype and gk.shape == getattr(r, k).shape, (tag, k)
                    for d, want in (("rowwise", rw), ("columnwise", cw)):
                        if not want:
                            continue
                        for odt in (torch.bfloat16, torch.float32):
                            same(bc.dequantize(g, d, dtype=odt), bc.ref.dequantize(r, d, dtype=odt), f"{tag} dequantize {d} {odt}")
                    n += 1
    torch.cuda.synchronize()
    return n


SHAPES = [(256, 512), (130, 96), (1, 64), (257, 320)]
SHAPES_4BIT = [(256, 512), (130, 96), (2, 64), (258, 320)]  # columnwise 4-bit rows pack in pairs


def test_fp8_tensor():
    """fp8_e4m3_tensor and fp8_e5m2_tensor: every direction and dtype, bit-identical to the reference"""
    for name in ("fp8_e4m3_tensor", "fp8_e5m2_tensor"):
        check_format(name, SHAPES)


def test_fp8_block():
    """fp8_block_1x128 and fp8_block_128x128 (compact and swizzled scales)"""
    for name in ("fp8_block_1x128", "fp8_block_128x128"):
        check_format(name, SHAPES)


def test_mxfp8():
    """mxfp8_e4m3 and mxfp8_e5m2"""
    for name in ("mxfp8_e4m3", "mxfp8_e5m2"):
        check_format(name, SHAPES)


def test_4bit():
    """mxfp4, nvfp4, nvfp4_2d (the global amax too)"""
    for name in ("mxfp4", "nvfp4", "nvfp4_2d"):
        check_format(name, SHAPES_4BIT)


SHAPES_6BIT = [(256, 512), (132, 96), (4, 64), (260, 324)]  # 6-bit rows hold whole groups of 4


def test_6bit():
    """mxfp6_e3m2, mxfp6_e2m3: four elements in three bytes (uint8 data, 3/4 of a byte per element)"""
    for name in ("mxfp6_e3m2", "mxfp6_e2m3"):
        check_format(name, SHAPES_6BIT)
    q = bc.quantize(sample(8, 64, torch.bfloat16).to(DEV), "mxfp6_e2m3", rowwise=True, columnwise=True)
    assert q.rowwise_data.dtype == torch.uint8 and q.rowwise_data.shape == (8, 48), q.rowwise_data.shape
    assert q.columnwise_data.shape == (64, 6), q.columnwise_data.shape


def test_quantize_cast_amax_scale():
    """amax, compute_scale and quantize_cast on the GPU give quantize's bytes"""
    x = sample(512, 256, torch.bfloat16, specials=False).to(DEV)
    a = bc.amax(x)
    assert a.dtype == torch.float32 and a.shape == (1,) and float(a) == float(x.float().abs().max())
    s, si = bc.compute_scale("fp8_e4m3_tensor", a)
    q = bc.quantize(x, "fp8_e4m3_tensor", rowwise=True, columnwise=True)
    same(s, q.scale, "scale")
    c = bc.quantize_cast(x, "fp8_e4m3_tensor", scale=s, rowwise=True, columnwise=True)
    for k in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
        same(getattr(c, k), getattr(q, k), k)
    n = bc.quantize(x, "nvfp4", rowwise=True, columnwise=True)
    nc = bc.quantize_cast(x, "nvfp4", amax=n.amax, rowwise=True, columnwise=True)
    for k in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
        same(getattr(nc, k), getattr(n, k), "nvfp4 " + k)


def test_swizzle():
    """scale_swizzle turns compact scales into quantize's swizzled ones and back"""
    x = sample(300, 256, torch.bfloat16).to(DEV)
    for name in ("mxfp8_e4m3", "nvfp4", "fp8_block_1x128"):
        q = bc.quantize(x, name, rowwise=True, columnwise=True)
        s = bc.quantize(x, name, rowwise=True, columnwise=True, swizzled=True)
        for d in ("rowwise", "columnwise"):
            sw = bc.scale_swizzle(name, 300, 256, q.scale_inv(d), d)
            same(sw, s.scale_inv(d), f"{name} {d} swizzled")
            same(bc.scale_swizzle(name, 300, 256, sw, d, from_swizzled=True), q.scale_inv(d), f"{name} {d} back")


def test_strided_nd():
    """a strided view and a 3D tensor give the bytes of their contiguous 2D copies"""
    wide = sample(64, 700, torch.bfloat16).to(DEV)
    v = wide[:, 100:612]
    for name in ("mxfp8_e4m3", "nvfp4", "fp8_e4m3_tensor"):
        a = bc.quantize(v, name, rowwise=True, columnwise=True)
        b = bc.quantize(v.contiguous(), name, rowwise=True, columnwise=True)
        for k in FIELDS:
            same(getattr(a, k), getattr(b, k), f"{name} strided {k}")
    x3 = sample(8, 256, torch.bfloat16).to(DEV).view(2, 4, 256)
    a = bc.quantize(x3, "mxfp4")
    b = bc.quantize(x3.reshape(8, 256), "mxfp4")
    assert a.shape == (8, 256)
    same(a.rowwise_data, b.rowwise_data, "3D")


def test_compile_fullgraph():
    """quantize + dequantize under torch.compile(fullgraph=True): the eager bytes"""
    fmts = [bc.format(n) for n in ("fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "fp8_block_128x128")]

    def f(x, fmt):
        q = bc.quantize(x, fmt, rowwise=True, columnwise=True)
        return (bc.dequantize(q, "rowwise"), bc.dequantize(q, "columnwise", dtype=torch.float32),
                q.rowwise_data, q.rowwise_scale_inv, q.columnwise_scale_inv)

    def g(x):  # delayed-scaling style: amax -> scale -> cast with the scale
        a = bc.amax(x)
        s, _ = bc.compute_scale(fmts[0], a)
        q = bc.quantize_cast(x * 2, fmts[0], scale=s, rowwise=True, columnwise=True)
        return bc.dequantize(q, "columnwise") + 1

    x = sample(256, 384, torch.bfloat16, specials=False).to(DEV)
    for fmt in fmts:
        cf = torch.compile(lambda t, fmt=fmt: f(t, fmt), fullgraph=True)
        for a, b in zip(cf(x), f(x, fmt)):
            same(a, b, f"compiled {fmt.name}")
    cg = torch.compile(g, fullgraph=True)
    same(cg(x), g(x), "compiled amax/scale/cast")


def test_grouped():
    """quantize_grouped (mixture of experts: groups of 0, 1 and many rows) bit-identical to the CPU
    reference's grouped quantize in every buffer, compact and swizzled, both directions; each group
    equals quantize() of its rows alone"""
    x = sample(516, 192, torch.bfloat16)
    for name in ("fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "mxfp4", "fp8_block_128x128", "fp8_block_1x128", "mxfp6_e3m2", "nvfp4_2d"):
        f = bc.format(name)
        for rows, cw in (([300, 0, 1, 211, 4], False), ([300, 0, 212, 4], True)):
            xs = x[:sum(rows)]
            for sw in (False, True) if not f.per_tensor else (False,):
                g = bc.quantize_grouped(xs.to(DEV), name, rows, rowwise=True, columnwise=cw, swizzled=sw)
                r = bc.ref.quantize_grouped(xs, name, rows, rowwise=True, columnwise=cw, swizzled=sw)
                assert g.offsets == r.offsets
                for k in FIELDS:
                    same(getattr(g, k), getattr(r, k), f"grouped {name} {rows} cw={cw} sw={sw} {k}")
                start = 0
                for i, n in enumerate(rows):
                    if n:
                        alone = bc.quantize(xs[start:start + n].to(DEV), name, rowwise=True, columnwise=cw, swizzled=sw)
                        for k in FIELDS:
                            same(getattr(g.group(i), k), getattr(alone, k), f"grouped {name} group {i} {k}")
                    start += n
    torch.cuda.synchronize()


def test_compile_dynamic():
    """torch.compile(dynamic=True): quantize + dequantize compile once for inputs of four row
    counts (the fakes' layouts are arithmetic on the symbolic sizes), each result the eager bytes"""
    from torch._dynamo.testing import CompileCounter
    for name in ("fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "mxfp6_e3m2", "fp8_block_128x128", "nvfp4_2d", "fp8_block_1x128"):
        fmt = bc.format(name)

        def f(x):
            q = bc.quantize(x, fmt, rowwise=True, columnwise=True)
            return (bc.dequantize(q, "rowwise"), bc.dequantize(q, "columnwise"), q.rowwise_data, q.rowwise_scale_inv,
                    q.columnwise_data, q.columnwise_scale_inv)
        torch._dynamo.reset()
        cnt = CompileCounter()
        cf = torch.compile(f, backend=cnt, dynamic=True, fullgraph=True)
        for rows in (64, 96, 256, 324):  # 4-bit / 6-bit columnwise data pack rows in groups of 2 / 4
            x = sample(rows, 192, torch.bfloat16, specials=False).to(DEV)
            for a, b in zip(cf(x), f(x)):
                same(a, b, f"dynamic {name} rows {rows}")
        assert cnt.frame_count == 1, f"{name}: {cnt.frame_count} compiles for 4 row counts"
    torch._dynamo.reset()


def test_scaled_mm_fp8_tensor():
    """torch._scaled_mm on blockcast FP8 operands (forward: rowwise x rowwise; dgrad: the columnwise copy)
    equals the fp32 matmul of the dequantized operands"""
    if torch.cuda.get_device_capability() < (8, 9):
        skip("fp8 scaled matmul needs sm_89+")
    m, n, k = 256, 512, 384
    x = sample(m, k, torch.bfloat16, specials=False).to(DEV)
    w = (sample(n, k, torch.bfloat16, specials=False) * 1000).to(DEV)  # scales far apart from x's
    dy = sample(m, n, torch.bfloat16, specials=False).to(DEV)
    fmt = bc.format("fp8_e4m3_tensor")
    qx = bc.quantize(x, fmt)
    qw = bc.quantize(w, fmt, rowwise=True, columnwise=True)
    qdy = bc.quantize(dy, fmt)
    fwd = torch._scaled_mm(qx.rowwise_data, qw.rowwise_data.t(), scale_a=qx.rowwise_scale_inv,
                           scale_b=qw.rowwise_scale_inv, out_dtype=torch.float32)
    ref = ref_fwd = bc.dequantize(qx, dtype=torch.float32) @ bc.dequantize(qw, dtype=torch.float32).t()
    rel = float((fwd - ref).norm() / ref.norm())
    # Hopper's fp8 tensor cores accumulate with fewer bits than fp32 (~1e-4 relative here); a wrong
    # scale is off by orders of magnitude more (checked below)
    print(f"# scaled_mm fp8 per-tensor forward: relative error {rel:.2e} against the fp32 matmul of the dequantized operands")
    assert rel < 1e-3, f"forward: relative error {rel}"
    # dgrad dX = dY @ W: B = W as [N, K] column-major = the columnwise (transposed [K, N]) data, .t()
    dgrad = torch._scaled_mm(qdy.rowwise_data, qw.columnwise_data.t(), scale_a=qdy.rowwise_scale_inv,
                             scale_b=qw.columnwise_scale_inv, out_dtype=torch.float32)
    ref = bc.dequantize(qdy, dtype=torch.float32) @ bc.dequantize(qw, "columnwise", dtype=torch.float32).t()
    rel = float((dgrad - ref).norm() / ref.norm())
    print(f"# scaled_mm fp8 per-tensor dgrad (columnwise copy): relative error {rel:.2e}")
    assert rel < 1e-3, f"dgrad: relative error {rel}"
    # the check has teeth: the other operand's scale in place of this one's is far outside the tolerance
    bad = torch._scaled_mm(qx.rowwise_data, qw.rowwise_data.t(), scale_a=qw.rowwise_scale_inv,
                           scale_b=qw.rowwise_scale_inv, out_dtype=torch.float32)
    rel_bad = float((bad - ref_fwd).norm() / ref_fwd.norm())
    assert rel_bad > 1e-2, f"a wrong scale gave relative error {rel_bad}"


def _blockwise_variants(qa, qb, m, n, k):
    """scale_a / scale_b views of blockcast's 1x128 and 128x128 scale layouts to try with torch
    (torch 2.9+ on sm_90 reads 1x128 scales as [M, K/128] with strides (1, M), and the 128x128
    scales of B^T as [N/128, K/128] row-major, passed transposed)."""
    kb, nb = k // 128, n // 128
    sa = qa.rowwise_scale_inv[:kb, :m]          # stored [K/128, roundup(M,4)]: M-major
    sb = qb.rowwise_scale_inv[:nb, :kb]          # stored [N/128, roundup(K/128,4)]
    return [("scale_a = [M,K/128] view (stride (1, M)), scale_b = [N/128,K/128] view .t()", sa.t(), sb.t()),
            ("scale_a view, scale_b = [N/128,K/128] copied contiguous .t()", sa.t(), sb.contiguous().t()),
            ("scale_a view, scale_b = [N/128,K/128] view", sa.t(), sb)]


def test_scaled_mm_blockwise():
    """1x128 activations x 128x128 weights through torch._scaled_mm where torch supports it on this GPU"""
    m, n, k = 256, 512, 512  # M % 4 == 0 and (K/128) % 4 == 0: blockcast's padded scales are views torch takes
    x = sample(m, k, torch.bfloat16, specials=False).to(DEV)
    w = sample(n, k, torch.bfloat16, specials=False).to(DEV)
    qa = bc.quantize(x, "fp8_block_1x128")
    qb = bc.quantize(w, "fp8_block_128x128")
    ref = bc.dequantize(qa, dtype=torch.float32) @ bc.dequantize(qb, dtype=torch.float32).t()
    tried = []
    for label, sa, sb in _blockwise_variants(qa, qb, m, n, k):
        try:
            out = torch._scaled_mm(qa.rowwise_data, qb.rowwise_data.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        except Exception as e:  # noqa: BLE001 - torch says which layouts it takes
            tried.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        rel = float((out.float() - ref).norm() / ref.norm())
        tried.append(f"{label}: relative error {rel:.2e}")
        if rel < 1e-2:
            print(f"# blockwise scaled_mm accepted: {label} (relative error {rel:.2e}, bf16 output)")
            wrong = sb.clone()  # the same strides, the blocks' scales in another order
            wrong.copy_(sb.flip(0))
            bad = torch._scaled_mm(qa.rowwise_data, qb.rowwise_data.t(), scale_a=sa, scale_b=wrong,
                                   out_dtype=torch.bfloat16)
            assert float((bad.float() - ref).norm() / ref.norm()) > 1e-2, "a wrong scale layout went unnoticed"
            return
    skip("torch._scaled_mm took no blockwise layout here (" + " | ".join(tried) + ")")


def test_errors():
    """GPU-side errors carry the library's message"""
    x = sample(16, 64, torch.bfloat16).to(DEV)

    def raises(fn, *parts):
        try:
            fn()
        except bc.BlockcastError as e:
            for p in parts:
                assert p in str(e), (str(e), p)
            return
        raise AssertionError("no BlockcastError")
    raises(lambda: bc.quantize(x.cpu(), "mxfp8_e4m3"), "is on cpu")
    raises(lambda: bc.quantize(x.to(torch.int32), "mxfp8_e4m3"), "torch.int32")
    raises(lambda: bc.quantize(x[:, ::2], "mxfp8_e4m3"), "contiguous")
    raises(lambda: bc.quantize(sample(4, 33, torch.bfloat16).to(DEV), "nvfp4"), "BC_ERR_ARG", "33")
    raises(lambda: bc.quantize_cast(x, "fp8_e4m3_tensor"), "pass scale=")
    raises(lambda: bc.quantize_cast(x, "fp8_e4m3_tensor", scale=torch.ones(2, device=DEV, dtype=torch.float16)), "float32")
    q = bc.quantize(x, "mxfp8_e4m3")
    small = q._replace(rowwise_data=q.rowwise_data[:4])
    raises(lambda: bc.dequantize(small), "holds 256 bytes", "need 1024")


def test_readme_example():
    """the README's Python example runs and computes x @ w.T"""
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "README.md")).read()
    code = readme.split("<!-- pyexample:begin -->")[1].split("<!-- pyexample:end -->")[0]
    code = code.split("```python")[1].split("```")[0]
    env = {}
    exec(compile(code, "README.md (python example)", "exec"), env)
    x, w, y, x2 = env["x"], env["w"], env["y"], env["x2"]
    ref = x.float() @ w.float().t()
    rel = float((y.float() - ref).norm() / ref.norm())
    assert rel < 0.1, rel  # fp8 e4m3 operands: a few percent
    assert x2.shape == x.shape and float((x2.float() - x.float()).norm() / x.float().norm()) < 0.1


def test_delayed_scale_update():
    """delayed scaling of 1000 tensors in one call, in place: bit-identical to the reference; under torch.compile too"""
    n, L = 1000, 16
    h = torch.rand(L, n, generator=gen) * torch.exp2(torch.randint(-20, 20, (L, n), generator=gen).float())
    h.view(-1)[torch.randint(0, L * n, (200,), generator=gen)] = torch.tensor([0.0, float("nan"), float("inf"), 1e-40]).repeat(50)
    s = torch.exp2(torch.randint(-5, 5, (n,), generator=gen).float())
    for algo, margin in (("max", 0), ("most_recent", 2)):
        hr, sr, sir = h.clone(), s.clone(), torch.empty(n)
        bc.ref.delayed_scale_update("fp8_e4m3_tensor", hr, sr, sir, margin=margin, algo=algo)
        hg, sg, sig = h.to(DEV), s.to(DEV), torch.full((n,), -1.0, device=DEV)
        bc.delayed_scale_update("fp8_e4m3_tensor", hg, sg, sig, margin=margin, algo=algo)
        same(hg, hr, f"{algo} history")
        same(sg, sr, f"{algo} scale")
        same(sig, sir, f"{algo} scale_inv")
    fmt = bc.format("fp8_e4m3_tensor")

    def step(x, hist, scale):  # amax into row 0, then the update: one graph
        hist[0, 0] = bc.amax(x)[0]
        bc.delayed_scale_update(fmt, hist, scale)
        return bc.quantize_cast(x, fmt, scale=scale[0:1]).rowwise_data

    x = sample(64, 256, torch.bfloat16, specials=False).to(DEV)
    he, se = torch.zeros(4, 1, device=DEV), torch.ones(1, device=DEV)
    hc, sc = he.clone(), se.clone()
    eager = step(x, he, se)
    compiled = torch.compile(step, fullgraph=True)(x, hc, sc)
    same(compiled, eager, "compiled step")
    same(hc, he, "compiled history")
    same(sc, se, "compiled scale")


def _ranks(comms, fn):
    """fn(rank, comm) on one thread per rank, each on a stream of its own; results by rank"""
    import threading
    out, errs = [None] * len(comms), []

    def body(r):
        try:
            torch.cuda.set_device(0)
            st = torch.cuda.Stream()
            with torch.cuda.stream(st):
                out[r] = fn(r, comms[r])
            st.synchronize()
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append((r, e))

    th = [threading.Thread(target=body, args=(r,)) for r in range(len(comms))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errs, f"rank errors: {errs}"
    return out


def test_collectives():
    """the collectives from Python threads on the local transport: all_gather and
    all_gather_quantized (unequal rows that cut blocks, a rank with none) bit-identical to quantize
    of the whole tensor; quantize_comm with the group's amax; amax_allreduce"""
    rows = [70, 0, 58]
    comms = bc.Comm.local(3)
    for name, sw in (("fp8_e4m3_tensor", False), ("mxfp8_e4m3", True), ("nvfp4", False), ("fp8_block_128x128", False)):
        x = sample(sum(rows), 256, torch.bfloat16).to(DEV)
        parts = list(torch.split(x, rows))
        want = bc.quantize(x, name, rowwise=True, columnwise=True, swizzled=sw)
        got = _ranks(comms, lambda r, c: bc.all_gather(parts[r], name, c, rows=rows, rowwise=True, columnwise=True, swizzled=sw))
        for r in range(3):
            for k in FIELDS:
                same(getattr(got[r], k), getattr(want, k), f"all_gather {name} rank {r} {k}")
        # quantized pieces (quantize_comm: the group's amax), gathered as they are or, where blocks
        # straddle ranks, dequantized and gathered exactly: compared with the same path's result
        def qpath(r, c):
            q = bc.quantize_comm(parts[r], name, c, rowwise=True, columnwise=False)
            return q, bc.all_gather_quantized(q, c, rows=rows, rowwise=True, columnwise=False)
        res = _ranks(comms, qpath)
        if name != "fp8_block_128x128":  # rowwise pieces of per-tensor / 1D formats: no block straddles
            keys = ("rowwise_data", "amax", "scale") + (("rowwise_scale_inv",) if not sw else ())
            for r in range(3):
                for k in keys:
                    same(getattr(res[r][1], k), getattr(want, k), f"all_gather_quantized {name} rank {r} {k}")
        for r in (1, 2):
            same(res[r][1].rowwise_data, res[0][1].rowwise_data, f"all_gather_quantized {name}: rank {r} == rank 0")
        if name in ("fp8_e4m3_tensor", "nvfp4"):  # the group's amax on every rank
            for r in range(3):
                same(res[r][0].amax, want.amax, f"quantize_comm {name} rank {r} amax")
    a = [torch.tensor([float(r), 5.0 - r, -1.0], device=DEV) for r in range(3)]
    _ranks(comms, lambda r, c: bc.amax_allreduce(a[r], c))
    for r in range(3):
        assert a[r].tolist() == [2.0, 5.0, -1.0], (r, a[r].tolist())
    assert comms[0].transport == "local" and comms[0].bytes_sent > 0
    for c in comms:
        c.close()



def poison(q):
    """q's buffers filled with 0xA5 bytes (amax / scale NaN): an output a call leaves unwritten shows"""
    for k in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
        t = getattr(q, k)
        if t is not None:
            t.view(torch.uint8).fill_(0xA5)
    for k in ("amax", "scale"):
        if getattr(q, k) is not None:
            getattr(q, k).fill_(float("nan"))
    return q


def test_out_in_place():
    """out=: quantize, quantize_cast, all_gather and all_gather_quantized write given buffers
    (blockcast.empty, filled with a pattern first) and return them; the in-place gather (each rank
    casts its rows straight into its row_slice of out, then gathers out; a last rank of 88 rows
    too) is bit-identical to the whole tensor's cast; a buffer too small for the layout is refused"""
    cols = 256
    comms = bc.Comm.local(2)
    for rows in ([256, 128], [256, 88]):
        starts, total = [0, rows[0]], sum(rows)
        for name in ("fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "fp8_block_128x128", "mxfp4"):
            f = bc.format(name)
            x = sample(total, cols, torch.bfloat16).to(DEV)
            parts = list(torch.split(x, rows))
            full = bc.quantize(x, name)
            kw = {"scale": full.scale} if f.per_tensor else {"amax": full.amax} if f.two_level else {}
            want = bc.quantize_cast(x, name, **kw) if kw else full
            o = poison(bc.empty(name, total, cols))
            assert bc.quantize(x, name, out=o) is o
            for k in FIELDS:
                same(getattr(o, k), getattr(full, k), f"quantize(out=) {name} {k}")
            o2 = poison(bc.empty(name, total, cols))
            assert bc.quantize_cast(x, name, out=o2, **kw) is o2
            keys = [k for k in FIELDS if getattr(want, k) is not None]
            for k in keys:
                same(getattr(o2, k), getattr(want, k), f"quantize_cast(out=) {name} {k}")

            def body(r, c):
                out = poison(bc.empty(name, total, cols))
                mine = out.row_slice(starts[r], rows[r])
                if kw:
                    bc.quantize_cast(parts[r], name, out=mine, **kw)
                else:
                    bc.quantize(parts[r], name, out=mine)
                res = bc.all_gather_quantized(mine, c, rows=rows, out=out)
                assert res is out
                g = bc.all_gather(parts[r], name, c, rows=rows, out=poison(bc.empty(name, total, cols)))
                return out, g
            res = _ranks(comms, body)
            for r in range(2):
                for k in keys:
                    same(getattr(res[r][0], k), getattr(want, k), f"in-place gather {name} rows {rows} rank {r} {k}")
                for k in FIELDS:
                    same(getattr(res[r][1], k), getattr(full, k), f"all_gather(out=) {name} rows {rows} rank {r} {k}")
            small = o._replace(rowwise_data=o.rowwise_data.view(torch.uint8)[:100].view(o.rowwise_data.dtype))
            try:
                bc.quantize(x, name, out=small)
                raise AssertionError("a 100-row data buffer was accepted")
            except bc.BlockcastError as e:
                assert "out.rowwise_data holds" in str(e) and "blockcast.layout" in str(e), e
    for c in comms:
        c.close()


def test_shard_cast():
    """the sharded cast from Python threads (2 local ranks, random flat cuts, odd offsets, an empty
    shard): the ranks' buffers summed byte by byte, then shard_finish, equal quantize() of each whole
    weight in both directions (amax and scale too)"""
    import threading
    weights = [("mxfp8_e4m3", (96, 160), True, None), ("nvfp4", (64, 96), True, None), ("fp8_block_128x128", (200, 130), False, None),
               ("fp8_e4m3_tensor", (33, 47), False, None), ("fp8_e4m3_tensor", (40, 64), False, 3.0), ("nvfp4_2d", (48, 80), False, None)]
    comms = bc.Comm.local(2)
    fulls, cuts = [], []
    for i, (name, (r, c), _, _) in enumerate(weights):
        fulls.append(sample(r, c, torch.float32, specials=False).to(DEV))
        n = r * c
        cut = [0, n // 2 + 1 + i, n] if i != 2 else [0, 0, n]  # odd cuts; weight 2: rank 0 holds nothing
        cuts.append(cut)
    got, errs = [None, None], []

    def rank(k):
        try:
            shards, scales = [], []
            for i, (name, (r, c), col, sc) in enumerate(weights):
                a, b = cuts[i][k], cuts[i][k + 1]
                shards.append((fulls[i].reshape(-1)[a:b].clone(), a, (r, c), name))
                scales.append(torch.tensor([sc], device=DEV) if sc else None)
            qs = bc.shard_cast(shards, comms[k], columnwise=True, scales=scales)
            torch.cuda.synchronize()
            got[k] = qs
        except Exception as e:  # noqa: BLE001
            errs.append(f"rank {k}: {e}")
    th = [threading.Thread(target=rank, args=(k,)) for k in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errs, errs
    combined = []
    for i, (name, (r, c), col, sc) in enumerate(weights):
        q0, q1 = got[0][i], got[1][i]
        summed = {}
        for fld in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
            a, b = getattr(q0, fld), getattr(q1, fld)
            if a is None:
                continue
            if fld.endswith("scale_inv") and q0.format.per_tensor:
                summed[fld] = a  # every rank writes the group's scale_inv
            else:
                summed[fld] = (a.view(torch.uint8) + b.view(torch.uint8)).view(a.dtype)
        combined.append(q0._replace(**summed))
    done = bc.shard_finish(combined)
    for i, (name, (r, c), col, sc) in enumerate(weights):
        if sc:
            want = bc.quantize_cast(fulls[i], name, scale=torch.tensor([sc], device=DEV), rowwise=True, columnwise=True)
            want = want._replace(amax=bc.amax(fulls[i]))
        else:
            want = bc.quantize(fulls[i], name, rowwise=True, columnwise=True)
        for fld in FIELDS:
            w = getattr(want, fld)
            if w is None:
                continue
            same(getattr(done[i], fld), w, f"{name} {r}x{c} {fld}")


if __name__ == "__main__":
    sys.exit(run(globals()))
