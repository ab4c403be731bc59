#!/usr/bin/env python3
"""The binding without a GPU: formats, layouts, the CPU reference through numpy arrays (and CPU
torch tensors where torch is installed), error messages. TAP output (run by tests/16-python.sh)."""
import ctypes
import math
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import blockcast as bc  # noqa: E402
from tap import run, skip  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

BUILTIN = ["fp8_block_128x128", "fp8_block_1x128", "fp8_e4m3_tensor", "fp8_e5m2_tensor", "mxfp4", "mxfp6_e2m3", "mxfp6_e3m2",
           "mxfp8_e4m3", "mxfp8_e5m2", "nvfp4", "nvfp4_2d"]
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
rng = np.random.default_rng(1234)


def raises(fn, status, *parts):
    try:
        fn()
    except bc.BlockcastError as e:
        assert e.status == status, f"status {e.status}, expected {status}: {e}"
        for p in parts:
            assert p in e.message, f"message {e.message!r} lacks {p!r}"
        assert str(e).startswith(status + ": ")
        return e
    raise AssertionError(f"no BlockcastError({status}) raised")


def sample(rows, cols, dtype=np.float32):
    x = (rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-6, 6, (rows, 1)))).astype(dtype)
    x[0, : min(cols, 40)] = 0  # an all-zero block
    return x


def roundup(a, m):
    return (a + m - 1) // m * m


def cdiv(a, b):
    return (a + b - 1) // b


def test_formats():
    """every built-in format is listed; a Format is an immutable, hashable value"""
    names = [f.name for f in bc.formats()]
    assert sorted(names) == BUILTIN, names
    f = bc.format("mxfp8_e4m3")
    assert f is bc.format("mxfp8_e4m3") and f == bc.format(f) and hash(f) == hash(bc.format("mxfp8_e4m3"))
    assert {f: 1}[bc.format("mxfp8_e4m3")] == 1
    assert (f.element, f.element_bits, f.block, f.block_cols, f.scale_type, f.scale_rule) == ("e4m3", 8, "1d", 32, "e8m0", "rceil")
    try:
        f.name = "x"
    except AttributeError:
        pass
    else:
        raise AssertionError("a Format could be changed")
    n = bc.format("nvfp4")
    assert n.two_level and n.element == "e2m1" and n.scale_type == "ue4m3" and n.columnwise_transposed
    assert bc.format("fp8_e4m3_tensor").per_tensor and bc.format("fp8_e4m3_tensor").element_max == 448.0


def test_layouts():
    """layout() gives DESIGN.md's table for every block format on ragged shapes"""
    for m, k in ((1, 32), (130, 96), (257, 384)):
        lay = bc.layout("mxfp8_e4m3", m, k, "rowwise")
        assert (lay.data_rows, lay.data_cols, lay.scale_rows, lay.scale_cols) == (m, k, roundup(m, 128), roundup(cdiv(k, 32), 4))
        lay = bc.layout("mxfp8_e4m3", m, k, "columnwise")
        assert (lay.data_rows, lay.data_cols, lay.scale_rows, lay.scale_cols) == (m, k, roundup(cdiv(m, 32), 4), roundup(k, 128))
        lay = bc.layout("fp8_block_1x128", m, k, "rowwise")
        assert (lay.scale_rows, lay.scale_cols, lay.scale_elem_bytes) == (cdiv(k, 128), roundup(m, 4), 4)
        lay = bc.layout("fp8_block_128x128", m, k, "columnwise")
        assert (lay.data_rows, lay.data_cols, lay.scale_rows, lay.scale_cols) == (k, m, cdiv(k, 128), roundup(cdiv(m, 128), 4))
        lay = bc.layout("nvfp4", m, k, "rowwise")
        assert (lay.data_bytes, lay.scale_rows, lay.scale_cols) == (m * k // 2, roundup(m, 128), roundup(cdiv(k, 16), 4))
        sw = bc.layout("nvfp4", m, k, "rowwise", swizzled=True)
        assert sw.scale_bytes == lay.scale_bytes and sw.scale_rows % 128 == 0 and sw.scale_cols % 4 == 0


def test_sym_layout():
    """the layout as arithmetic (what the fakes use under torch.compile's dynamic shapes) equals
    bc_qtensor_layout for every format, direction and swizzle on 400 shapes, and refuses what it refuses"""
    from blockcast.core import _layout, sym_layout
    shapes = [(int(r), int(c)) for r, c in zip(rng.integers(1, 3000, 400), rng.integers(1, 3000, 400))]
    shapes += [(1, 1), (128, 128), (129, 4), (4, 129), (16, 16), (17, 31), (8192, 8193)]
    n = 0
    for f in bc.formats():
        for d, has in ((1, f.has_rowwise), (2, f.has_columnwise)):
            if not has:
                raises(lambda: sym_layout(f, 4, 4, d, False), "BC_ERR_ARG", "no ")
                continue
            for sw in (False, True):
                for r, c in shapes:
                    try:
                        want = _layout(f.name, r, c, d, sw)
                    except bc.BlockcastError:
                        raises(lambda: sym_layout(f, r, c, d, sw), "BC_ERR_ARG")
                        continue
                    got = sym_layout(f, r, c, d, sw)
                    assert got == want, (f.name, d, sw, r, c, got, want)
                    n += 1
    assert n > 10000, n
    for r, c in ((0, 64), (-1, 64), (64, 0), (1 << 26, 1 << 25)):
        raises(lambda: sym_layout(bc.format("mxfp8_e4m3"), r, c, 1, False), "BC_ERR_ARG", "expected rows, cols >= 1")


def test_ref_fp8_tensor():
    """per-tensor FP8: amax, scale and every code of both directions as the element rules give them"""
    x = sample(37, 70)
    q = bc.ref.quantize(x, "fp8_e4m3_tensor", rowwise=True, columnwise=True)
    amax = float(np.max(np.abs(x)))
    assert q.amax[0] == np.float32(amax) and q.amax.dtype == np.float32
    scale, scale_inv = bc.ref.scale("fp8_e4m3_tensor", amax)
    assert q.scale[0] == np.float32(scale) and q.rowwise_scale_inv[0] == np.float32(scale_inv)
    assert q.rowwise_data.shape == (37, 70) and q.columnwise_data.shape == (70, 37) and q.rowwise_data.dtype == np.uint8
    want = np.array([bc.ref.encode("fp8_e4m3_tensor", float(np.float32(v) * np.float32(scale))) for v in x.ravel()],
                    dtype=np.uint8).reshape(x.shape)
    assert np.array_equal(q.rowwise_data, want) and np.array_equal(q.columnwise_data, want.T)
    y = bc.ref.dequantize(q)
    dec = np.array([bc.ref.decode("fp8_e4m3_tensor", int(c)) for c in want.ravel()], dtype=np.float32).reshape(x.shape)
    assert np.array_equal(y, dec * np.float32(scale_inv))


def test_ref_round_trip():
    """every format and direction: dequantize(quantize(x)) is within the element's precision"""
    x = sample(64, 128)
    for name in BUILTIN:
        f = bc.format(name)
        q = bc.ref.quantize(x, f, rowwise=True, columnwise=True)
        # relative step of the element (e4m3 2^-3, e5m2 2^-2, e2m1 up to 1/2 of a block's max)
        tol = {"e4m3": 2 ** -3, "e5m2": 2 ** -2, "e2m1": 0.5, "e2m3": 2 ** -3, "e3m2": 2 ** -2}[f.element]
        for d in ("rowwise", "columnwise"):
            y = bc.ref.dequantize(q, d)
            ref = x if (d == "rowwise" or not f.columnwise_transposed) else x.T
            assert y.shape == ref.shape, (name, d, y.shape)
            err = np.abs(y - ref)
            # per-element bound: tol * |x| (+ an absolute step for 4-bit elements: tol/8 of the largest value)
            # (+ the element's subnormal step: 2^-15 of the largest value for 8-bit elements, 2^-5 for 6-bit)
            absolute = {4: tol / 8, 6: 2.0 ** -5}.get(f.element_bits, 2.0 ** -15)
            bound = tol * np.abs(ref) + np.max(np.abs(ref)) * absolute
            assert np.all(err <= bound + 1e-30), (name, d, float(np.max(err - bound)))


def test_strided_and_nd():
    """a strided row view and a 3D array give the bytes of their contiguous 2D copies"""
    wide = sample(48, 200)
    view = wide[:, 8:136]  # row stride 200, 128 columns
    a = bc.ref.quantize(view, "mxfp8_e4m3", rowwise=True, columnwise=True)
    b = bc.ref.quantize(np.ascontiguousarray(view), "mxfp8_e4m3", rowwise=True, columnwise=True)
    for k in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    x3 = sample(6, 128).reshape(2, 3, 128)
    c = bc.ref.quantize(x3, "nvfp4")
    d = bc.ref.quantize(x3.reshape(6, 128), "nvfp4")
    assert c.shape == (6, 128) and np.array_equal(c.rowwise_data, d.rowwise_data) and c.amax[0] == d.amax[0]


def test_quantize_cast_and_swizzle():
    """quantize_cast with the scale of quantize gives the same bytes; swizzled scales hold the same entries"""
    x = sample(96, 64)
    q = bc.ref.quantize(x, "fp8_e5m2_tensor", rowwise=True, columnwise=True)
    c = bc.ref.quantize_cast(x, "fp8_e5m2_tensor", scale=float(q.scale[0]), rowwise=True, columnwise=True)
    assert np.array_equal(q.rowwise_data, c.rowwise_data) and np.array_equal(q.columnwise_data, c.columnwise_data)
    n = bc.ref.quantize(x, "nvfp4")
    nc = bc.ref.quantize_cast(x, "nvfp4", amax=n.amax)
    assert np.array_equal(n.rowwise_data, nc.rowwise_data) and np.array_equal(n.rowwise_scale_inv, nc.rowwise_scale_inv)
    s = bc.ref.quantize(x, "mxfp4", swizzled=True)
    lay = bc.layout("mxfp4", 96, 64)
    compact = bc.ref.quantize(x, "mxfp4")
    assert np.array_equal(s.rowwise_data, compact.rowwise_data)
    # DESIGN.md's 128x4 swizzle: off(r,c) = (r/128)*ceil(cols/4)*512 + (c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4
    sw = s.rowwise_scale_inv.ravel()
    for r in range(lay.scale_rows):
        for cc in range(lay.scale_cols):
            off = (r // 128) * cdiv(lay.scale_cols, 4) * 512 + (cc // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + cc % 4
            assert sw[off] == compact.rowwise_scale_inv[r, cc], (r, cc)
    y = bc.ref.dequantize(s)
    assert np.array_equal(y, bc.ref.dequantize(compact))


def test_row_slice():
    """QuantizedTensor.row_slice: a band of rows of the whole tensor's buffers (views) equals the
    reference quantize of those rows alone (per-tensor: the whole scale; NVFP4: the whole amax);
    slices whose buffers are not a piece of the tensor's are refused"""
    rows, cols = 640, 192
    x = sample(rows, cols)
    ragged = sample(600, cols)  # a last slice of 88 rows: its padded scale rows are the tensor's own padding
    cuts = [(0, 128), (128, 256), (384, 256), (512, 128)]
    for name in BUILTIN:
        f = bc.format(name)
        if name == "fp8_block_1x128":  # its scales are [ceil(cols / 128), rows]: no band of rows is a piece of them
            raises(lambda: bc.ref.quantize(x, f).row_slice(0, 128), "BC_ERR_UNSUPPORTED", "row by row", "[2, 640]")
            continue
        for xx, start, count in [(x, a, b) for a, b in cuts] + [(ragged, 512, 88)] + ([(x, 3, 17), (x, 600, 40)] if f.per_tensor else []):
            whole = bc.ref.quantize(xx, f)
            sl = whole.row_slice(start, count)
            part = xx[start:start + count]
            if f.per_tensor:  # the slice's own copies of the tensor's scale_inv, amax and scale
                want = bc.ref.quantize_cast(part, f, scale=float(whole.scale[0]))
                for k in ("scale", "amax", "rowwise_scale_inv"):
                    a, b = getattr(sl, k), getattr(whole, k)
                    assert np.array_equal(a, b) and not np.shares_memory(a, b), (name, k)
            elif f.two_level:
                want = bc.ref.quantize_cast(part, f, amax=whole.amax)
                assert np.array_equal(sl.amax, whole.amax) and not np.shares_memory(sl.amax, whole.amax)
            else:
                want = bc.ref.quantize(part, f)
            if not f.per_tensor:
                assert np.shares_memory(sl.rowwise_scale_inv, whole.rowwise_scale_inv), name
            assert sl.shape == (count, cols) and sl.columnwise_data is None, name
            assert np.shares_memory(sl.rowwise_data, whole.rowwise_data), name
            assert sl.rowwise_data.shape == want.rowwise_data.shape, (name, sl.rowwise_data.shape, want.rowwise_data.shape)
            assert np.array_equal(sl.rowwise_data, want.rowwise_data), (name, start, count)
            if not f.per_tensor:
                assert sl.rowwise_scale_inv.shape == want.rowwise_scale_inv.shape, (name, start, count)
                assert np.array_equal(sl.rowwise_scale_inv.view(np.uint8), want.rowwise_scale_inv.view(np.uint8)), (name, start, count)
    # written through the slice = written in the whole tensor
    whole = bc.ref.quantize(x, "mxfp8_e4m3")
    whole.row_slice(128, 128).rowwise_data[:] = 0
    assert not whole.rowwise_data[128:256].any() and whole.rowwise_data[256:].any()
    q = bc.ref.quantize(x, "mxfp8_e4m3")
    raises(lambda: q.row_slice(0, 100), "BC_ERR_ARG", "padding", "or a slice that ends the tensor")
    raises(lambda: q.row_slice(600, 41), "BC_ERR_ARG", "rows [600, 641) of a tensor of 640 rows")
    raises(lambda: q.row_slice(-1, 4), "BC_ERR_ARG", "0 <= start")
    raises(lambda: bc.ref.quantize(x, "fp8_block_128x128").row_slice(64, 576), "BC_ERR_ARG", "not whole blocks", "128 block rows")
    raises(lambda: bc.ref.quantize(x, "fp8_block_128x128").row_slice(128, 100), "BC_ERR_ARG", "not whole blocks")
    raises(lambda: bc.ref.quantize(x, "nvfp4_2d").row_slice(0, 16), "BC_ERR_ARG", "take 128 rows", "only 16 are its own")
    raises(lambda: bc.ref.quantize(x, "mxfp4").row_slice(600, 40), "BC_ERR_ARG", "take 128 rows", "only 40 are its own")
    raises(lambda: bc.ref.quantize(x, "mxfp8_e4m3", swizzled=True).row_slice(0, 128), "BC_ERR_UNSUPPORTED", "swizzled")
    raises(lambda: bc.ref.quantize(x, "mxfp8_e4m3", rowwise=False, columnwise=True).row_slice(0, 128), "BC_ERR_ARG",
           "no rowwise data")


def test_grouped_ref():
    """quantize_grouped in the CPU reference: each group (GroupedTensor.group: views) equals the
    reference quantize of its rows alone, groups of 0, 1 and many rows, every format, compact and
    swizzled, both directions; the rowwise data is the whole tensor's; bad group rows refused"""
    x = sample(516, 192)

    def raw(a):
        return None if a is None else np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    checked = 0
    for name in BUILTIN:
        f = bc.format(name)
        cases = [([300, 0, 1, 211, 4], False)]
        if f.has_columnwise:
            cases.append(([300, 0, 212, 4], True))  # 4- and 6-bit columnwise data pack rows in 2s / 4s
        for rows, cw in cases:
            xs = x[:sum(rows)]
            for sw in (False, True) if not f.per_tensor else (False,):
                gt = bc.ref.quantize_grouped(xs, f, rows, rowwise=True, columnwise=cw, swizzled=sw)
                assert gt.group_rows == tuple(rows) and len(gt.offsets) == len(rows) + 1
                # 1D blocks of one scale level: the groups' rowwise data is the whole tensor's
                whole = bc.ref.quantize(xs, f, swizzled=sw) if f.block == "1d" and not f.two_level else None
                if whole is not None:
                    assert np.array_equal(raw(gt.rowwise_data), raw(whole.rowwise_data)), name
                start = 0
                for g, r in enumerate(rows):
                    qg = gt.group(g)
                    assert qg.shape == (r, 192)
                    if r == 0:
                        assert qg.rowwise_data.size == 0
                        if qg.amax is not None:
                            assert float(qg.amax[0]) == 0.0  # an empty group writes nothing
                        continue
                    want = bc.ref.quantize(xs[start:start + r], f, rowwise=True, columnwise=cw, swizzled=sw)
                    for k in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax", "scale"):
                        a, b = raw(getattr(qg, k)), raw(getattr(want, k))
                        assert (a is None) == (b is None) and (a is None or np.array_equal(a, b)), (name, rows, cw, sw, g, k)
                    checked += 1
                    start += r
    assert checked > 100, checked
    raises(lambda: bc.ref.quantize_grouped(x, "mxfp8_e4m3", [100, 100]), "BC_ERR_ARG", "sum to 200", "516 rows")
    raises(lambda: bc.ref.quantize_grouped(x, "mxfp8_e4m3", []), "BC_ERR_ARG", "group_rows is empty")
    raises(lambda: bc.ref.quantize_grouped(x, "mxfp4", [515, 1], columnwise=True), "BC_ERR_ARG", "group 0", "multiple of 2")
    raises(lambda: bc.ref.quantize_grouped(x, "nvfp4", [516]).group(1), "BC_ERR_ARG", "group 1 of 1")
    raises(lambda: bc.ref.quantize_grouped(x, "nvfp4", [258.0, 258]), "BC_ERR_ARG", "ref.quantize_grouped", "1-D sequence of integers")
    raises(lambda: bc.ref.quantize_grouped(x, "nvfp4", [[258, 258]]), "BC_ERR_ARG", "1-D sequence of integers")
    raises(lambda: bc.ref.quantize_grouped(x, "nvfp4", [True, 515]), "BC_ERR_ARG", "bool")
    raises(lambda: bc.ref.quantize_grouped(x, "nvfp4", []), "BC_ERR_ARG", "ref.quantize_grouped: group_rows is empty")
    assert bc.ref.quantize_grouped(x, "nvfp4", np.array([258, 258])).group_rows == (258, 258)


def test_load_spec():
    """a spec file loads into a new format usable at once; a bad one raises BC_ERR_SPEC with file:line"""
    with tempfile.TemporaryDirectory() as d:
        src = open(os.path.join(REPO, "specs", "mxfp8_e4m3.lua")).read()
        good = os.path.join(d, "mx_floor.lua")
        with open(good, "w") as fh:
            fh.write(src.replace('name        = "mxfp8_e4m3"', 'name        = "py_mxfp8_floor"').replace('"rceil"', '"floor"'))
        f = bc.load_spec(good)
        assert f.name == "py_mxfp8_floor" and f.scale_rule == "floor" and bc.format("py_mxfp8_floor") == f
        q = bc.ref.quantize(sample(32, 64), f)
        assert q.rowwise_data.shape == (32, 64)
        bad = os.path.join(d, "bad.lua")
        with open(bad, "w") as fh:
            fh.write('name = "x"\nbogus = 1\n')
        raises(lambda: bc.load_spec(bad), "BC_ERR_SPEC", f"{bad}:2", "unknown field 'bogus'")


def test_errors():
    """bad arguments raise BlockcastError carrying the status and the library's message"""
    x = sample(8, 64)
    raises(lambda: bc.format("fp9"), "BC_ERR_ARG", "no format named 'fp9'", "known formats", "mxfp8_e4m3")
    raises(lambda: bc.ref.quantize(x.astype(np.float64), "mxfp8_e4m3"), "BC_ERR_ARG", "float64", "expected float32 or float16")
    raises(lambda: bc.ref.quantize(x.astype(np.int32), "nvfp4"), "BC_ERR_ARG", "int32")
    # a shape the format cannot hold: an odd row of 4-bit elements (the library's own check)
    raises(lambda: bc.ref.quantize(sample(4, 33), "mxfp4"), "BC_ERR_ARG", "33")
    raises(lambda: bc.layout("nvfp4", 3, 7), "BC_ERR_ARG", "7")
    raises(lambda: bc.ref.quantize(sample(8, 64)[:, ::2], "mxfp8_e4m3"), "BC_ERR_ARG", "last dimension must be contiguous")
    raises(lambda: bc.ref.quantize(np.zeros((0, 64), np.float32), "mxfp8_e4m3"), "BC_ERR_ARG", "(0, 64), with no elements")
    raises(lambda: bc.ref.quantize(x, "mxfp8_e4m3", rowwise=False), "BC_ERR_ARG", "at least one direction")
    raises(lambda: bc.ref.quantize_cast(x, "fp8_e4m3_tensor"), "BC_ERR_ARG", "pass scale=")
    raises(lambda: bc.ref.dequantize(bc.ref.quantize(x, "mxfp8_e4m3"), "columnwise"), "BC_ERR_ARG", "no columnwise data")
    raises(lambda: bc.ref.decode("fp8_e4m3_tensor", 300), "BC_ERR_ARG", "[0, 255]")
    raises(lambda: bc.layout("mxfp4", 4, 64, "diagonal"), "BC_ERR_ARG", "'rowwise' or 'columnwise'")
    raises(lambda: bc.ref.quantize([[1.0]], "mxfp8_e4m3"), "BC_ERR_ARG", "expected a numpy array or a CPU torch tensor")
    # a strided 1D array is not contiguous either (it was read as if it were)
    raises(lambda: bc.ref.quantize(sample(1, 128).ravel()[::2], "mxfp8_e4m3"), "BC_ERR_ARG", "last dimension must be contiguous")
    raises(lambda: bc.ref.amax(sample(1, 64).ravel()[::-1]), "BC_ERR_ARG", "last dimension must be contiguous")
    assert bc.ref.quantize(sample(1, 128).ravel(), "mxfp8_e4m3").shape == (1, 128)
    # the error crosses process boundaries whole (multiprocessing, DataLoader workers pickle it)
    try:
        bc.format("fp9")
    except bc.BlockcastError as e:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is bc.BlockcastError and back.status == e.status and back.message == e.message and str(back) == str(e)
    # a star import does not hide the builtin format (blockcast.format stays)
    scope = {}
    exec("from blockcast import *", scope)
    assert "format" not in scope and scope["get_format"] is bc.format and "quantize" in scope


def test_nan_and_specials():
    """NaN stays NaN, out-of-range values saturate, -0 keeps its sign bit (fp8 with a given scale)"""
    x = np.array([[np.nan, np.inf, -np.inf, 1e30, -0.0, 1e-30, 448.0, 464.0]], dtype=np.float32)
    q = bc.ref.quantize_cast(x, "fp8_e4m3_tensor", scale=1.0)
    y = bc.ref.dequantize(q)
    assert math.isnan(y[0, 0])
    assert list(y[0, 1:4]) == [448.0, -448.0, 448.0] and list(y[0, 6:]) == [448.0, 448.0], y
    assert struct.pack("<f", y[0, 4]) == struct.pack("<f", -0.0) and y[0, 5] == 0.0


def test_torch_cpu():
    """CPU torch tensors in and out: the torch dtypes of the formats, bf16 input, the same bytes as numpy"""
    if torch is None:
        skip("torch is not installed (the GPU tier runs the torch path)")
    x = torch.from_numpy(sample(64, 128))
    for name in BUILTIN:
        f = bc.format(name)
        q = bc.ref.quantize(x, f, rowwise=True, columnwise=True)
        dt = lambda n: getattr(torch, n, torch.uint8)  # noqa: E731 - an older torch lacks the 8- and 4-bit dtypes
        want = {"e4m3": dt("float8_e4m3fn"), "e5m2": dt("float8_e5m2"), "e2m1": dt("float4_e2m1fn_x2"),
                "e2m3": torch.uint8, "e3m2": torch.uint8}[f.element]  # torch has no packed 6-bit dtype
        assert q.rowwise_data.dtype == want, (name, q.rowwise_data.dtype)
        sdt = {"fp32": torch.float32, "e8m0": dt("float8_e8m0fnu"), "ue4m3": dt("float8_e4m3fn")}[f.scale_type]
        assert q.rowwise_scale_inv.dtype == sdt, (name, q.rowwise_scale_inv.dtype)
        n = bc.ref.quantize(x.numpy(), f, rowwise=True, columnwise=True)
        for k in ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"):
            a = getattr(q, k).contiguous().view(torch.uint8).numpy().view(np.uint8).ravel()
            b = getattr(n, k).view(np.uint8).ravel()
            assert np.array_equal(a, b), (name, k)
        assert bc.ref.dequantize(q).dtype == torch.float32
    xb = x.to(torch.bfloat16)
    qb = bc.ref.quantize(xb, "fp8_block_1x128")
    assert torch.equal(bc.ref.dequantize(qb, dtype=torch.bfloat16).float(), bc.ref.dequantize(qb).to(torch.bfloat16).float())
    raises(lambda: bc.ref.quantize(x.to(torch.int32), "nvfp4"), "BC_ERR_ARG", "torch.int32")
    raises(lambda: bc.quantize(x, "nvfp4"), "BC_ERR_ARG", "is on cpu", "blockcast.ref.quantize")


def test_torch_fake_shapes():
    """the custom ops' fake implementations give the shapes and dtypes of the real outputs"""
    if torch is None:
        skip("torch is not installed")
    import blockcast.ops  # noqa: F401 - registers torch.ops.blockcast
    if not blockcast.ops._lib_ok:
        skip(f"torch {torch.__version__} has no torch.library.register_fake: the custom ops need torch >= 2.4")
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = torch.from_numpy(sample(130, 96))
    for name in BUILTIN:
        real = bc.ref.quantize(x, name, rowwise=True, columnwise=True)
        with FakeTensorMode():
            fx = torch.empty(130, 96, dtype=torch.float32)
            r = torch.ops.blockcast.quantize(fx, name, True, True, False, False, 0, 0)
            d = torch.ops.blockcast.dequantize(r[0], r[1], r[4], name, 130, 96, 1, False, torch.bfloat16)
        for got, want in zip(r[:4], (real.rowwise_data, real.rowwise_scale_inv, real.columnwise_data, real.columnwise_scale_inv)):
            assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype, (name, got.shape, want.shape)
        assert tuple(d.shape) == (130, 96) and d.dtype == torch.bfloat16


def test_pip_install():
    """pip installs build/python (the package with the library inside), which imports from anywhere"""
    if os.environ.get("BLOCKCAST_LIBRARY"):
        skip("BLOCKCAST_LIBRARY names the library: no build/python staged by ./build.sh here")
    build = os.environ.get("BC_BUILD", "build")
    src = os.path.join(build if os.path.isabs(build) else os.path.join(REPO, build), "python")
    if not os.path.isfile(os.path.join(src, "blockcast", "lib", "libblockcast.so.0")):
        raise AssertionError(f"{src} has no staged package: ./build.sh makes it")
    pys = [p for p in (sys.executable, shutil.which("python3")) if p and
           subprocess.run([p, "-m", "pip", "--version"], capture_output=True).returncode == 0]
    if not pys:
        skip("no python3 here has pip")
    env = {k: v for k, v in os.environ.items() if k not in ("BLOCKCAST_LIBRARY", "PYTHONPATH", "BC_BUILD")}
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([pys[0], "-m", "pip", "install", "-q", "--no-deps", "--target", d, src],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        env["PYTHONPATH"] = d
        r = subprocess.run([pys[0], "-c", "import blockcast as b; print(b.library_path); print(len(b.formats()))"],
                           capture_output=True, text=True, env=env, cwd=d)
        assert r.returncode == 0, r.stderr
        path, n = r.stdout.split()
        assert path.startswith(d) and int(n) == len(BUILTIN), r.stdout
        assert os.path.isfile(os.path.join(d, "blockcast", "torch", "linear.py")), "blockcast.torch was not installed"


def test_abi():
    """the ctypes structs match runtime/include/blockcast.h (sizes and every field's offset, from gcc)"""
    from blockcast import _capi as C
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        skip("no C compiler to read the header's layout")
    structs = {"bc_tensor": C.Tensor, "bc_qtensor": C.QTensor, "bc_format_info": C.FormatInfo, "bc_qlayout": C.QLayout,
               "bc_comm_info": C.CommInfo, "bc_shard": C.Shard, "bc_group_offsets": C.GroupOffsets}
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include \"blockcast.h\"", "int main(void) {"]
    for cname, cls in structs.items():
        lines.append(f'  printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for fname, _ in cls._fields_:
            lines.append(f'  printf("{cname} {fname} %zu\\n", offsetof({cname}, {fname}));')
    lines.append("  return 0;\n}")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "abi.c"), os.path.join(d, "abi")
        with open(src, "w") as fh:
            fh.write("\n".join(lines))
        r = subprocess.run([cc, "-I", os.path.join(REPO, "runtime", "include"), src, "-o", exe], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        out = subprocess.run([exe], capture_output=True, text=True).stdout.split("\n")
    for line in filter(None, out):
        cname, what, n = line.split()
        cls = structs[cname]
        have = ctypes.sizeof(cls) if what == "sizeof" else getattr(cls, what).offset
        assert have == int(n), f"{cname}.{what}: ctypes {have}, C {n}"


def test_comm_cpu():
    """communicators without a GPU: a local group's ranks, closing, and the collectives' argument errors"""
    if torch is None:
        skip("torch is not installed (the collectives take torch tensors)")
    comms = bc.Comm.local(3)
    assert [c.rank for c in comms] == [0, 1, 2] and all(c.size == 3 and c.transport == "local" for c in comms)
    assert comms[1].bytes_sent == 0 and comms[1].collectives == 0
    assert repr(comms[2]) == "Comm(local, rank 2 of 3)"
    for c in comms:
        c.close()
    assert repr(comms[0]) == "Comm(closed)"
    raises(lambda: comms[0].rank, "BC_ERR_ARG", "closed")
    raises(lambda: bc.Comm.local(0), "BC_ERR_ARG", "nranks is 0; expected 1 to 64 ranks")
    with bc.Comm.local(1)[0] as c:
        assert c.size == 1
    assert repr(c) == "Comm(closed)"
    (one,) = bc.Comm.local(1)
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    raises(lambda: bc.all_gather(x, "mxfp8_e4m3", one), "BC_ERR_ARG", "x is on cpu")
    raises(lambda: bc.all_gather(x, "mxfp8_e4m3", "comm"), "BC_ERR_ARG", "expected a blockcast.Comm")
    raises(lambda: bc.quantize_comm(x, "fp8_e4m3_tensor", one), "BC_ERR_ARG", "x is on cpu")
    raises(lambda: bc.amax_allreduce(torch.zeros(3), one), "BC_ERR_ARG", "amax is on cpu")
    raises(lambda: bc.shard_cast([(torch.zeros(8), 0, (4, 4), "mxfp8_e4m3")], one), "BC_ERR_ARG", "shard 0 data is on cpu")
    raises(lambda: bc.shard_cast([(torch.zeros(8), 0)], one), "BC_ERR_ARG", "shard 0", "(data, start, shape, fmt)")
    raises(lambda: bc.shard_cast([], one, scales=[None]), "BC_ERR_ARG", "0 shards but 1 scales")
    raises(lambda: bc.shard_cast([], "comm"), "BC_ERR_ARG", "expected a blockcast.Comm")
    raises(lambda: bc.Comm.nccl("env:BC_NO_SUCH_ID", 2, 0, device="cpu"), "BC_ERR_ARG", "device is cpu", "CUDA device")
    # out=: the output's format, shape and directions are checked before its buffers
    o = bc.empty("mxfp8_e4m3", 4, 64, device="cpu")
    assert o.shape == (4, 64) and o.columnwise_data is None and o.amax is None
    raises(lambda: bc.all_gather(x, "mxfp4", one, out=o), "BC_ERR_ARG", "x is on cpu")
    raises(lambda: bc.all_gather_quantized(o, one, out=bc.empty("nvfp4", 4, 64, device="cpu")), "BC_ERR_ARG",
           "q.rowwise_data is on cpu")
    e = bc.empty("fp8_e4m3_tensor", 8, 64, device="cpu")
    assert e.amax is not None and e.scale is not None and float(e.amax[0]) == 0.0
    raises(lambda: bc.empty("mxfp8_e4m3", 0, 64, device="cpu"), "BC_ERR_ARG", "shape (0, 64)")
    raises(lambda: bc.empty("fp8_e4m3_tensor", 4, 64, swizzled=True, device="cpu"), "BC_ERR_ARG", "empty: format", "per-tensor scale")
    raises(lambda: bc.empty("fp8_e4m3_tensor", 4, 64, rowwise=False, device="cpu"), "BC_ERR_ARG", "neither rowwise nor columnwise")
    from blockcast.ops import _qt_in
    f8 = bc.format("mxfp8_e4m3")
    raises(lambda: _qt_in("t", "out", (1, 2)), "BC_ERR_ARG", "out is a tuple", "QuantizedTensor")
    raises(lambda: _qt_in("t", "out", e, swizzled=True), "BC_ERR_ARG", "per-tensor scale")
    raises(lambda: _qt_in("t", "out", o, fmt=bc.format("mxfp4")), "BC_ERR_ARG", "out is in format 'mxfp8_e4m3'", "writes 'mxfp4'")
    raises(lambda: _qt_in("t", "out", o, shape=(8, 64)), "BC_ERR_ARG", "out has shape (4, 64)", "needs (8, 64)")
    raises(lambda: _qt_in("t", "out", o, dirs=(True, True)), "BC_ERR_ARG", "holds rowwise but the call asks for rowwise and columnwise")
    raises(lambda: _qt_in("t", "out", o, swizzled=True), "BC_ERR_ARG", "not swizzled", "swizzled=False")
    raises(lambda: _qt_in("t", "out", o._replace(rowwise_scale_inv=None)), "BC_ERR_ARG", "rowwise data but no scale_inv")
    raises(lambda: _qt_in("t", "out", e._replace(scale=None), tensor_scale=True), "BC_ERR_ARG", "out has no scale",
           "'fp8_e4m3_tensor' writes one")
    raises(lambda: _qt_in("t", "out", bc.empty("nvfp4", 4, 64, device="cpu")._replace(amax=None), tensor_scale=True),
           "BC_ERR_ARG", "out has no amax")
    raises(lambda: _qt_in("t", "out", o, fmt=f8), "BC_ERR_ARG", "out.rowwise_data is on cpu")
    try:
        h = bc.comm_id()
        assert len(h) == 256 and all(ch in "0123456789abcdef" for ch in h)
    except bc.BlockcastError as e:  # no NCCL or no GPU here: a clean failure with the reason
        assert e.status in ("BC_ERR_UNAVAILABLE", "BC_ERR_NCCL") and len(e.message) > 20, e
    one.close()


def test_delayed_ref():
    """delayed scaling in the CPU reference, in place on numpy arrays: amax picked, scale, history roll, errors"""
    h0 = np.array([[2.0, 1.0, 0.0, np.nan], [4.0, 8.0, 0.0, 1.0], [1.0, 0.5, 0.0, 2.0]], dtype=np.float32)
    h = h0.copy()
    scale = np.full(4, 7.0, np.float32)
    sinv = np.zeros(4, np.float32)
    bc.ref.delayed_scale_update("fp8_e4m3_tensor", h, scale, sinv, margin=1, algo="max")
    assert list(scale) == [56.0, 28.0, 7.0, 7.0], scale          # (448/4)/2, (448/8)/2, kept, kept (NaN)
    assert np.array_equal(sinv, np.float32(1) / scale)
    assert np.all(h[0] == 0) and np.array_equal(h[1], h0[2]) and np.array_equal(h[2][:3], h0[0][:3]) and np.isnan(h[2][3])
    h = h0.copy()
    bc.ref.delayed_scale_update("fp8_e4m3_tensor", h, scale, algo="most_recent")
    assert scale[0] == 224.0 and scale[1] == 448.0, scale
    raises(lambda: bc.ref.delayed_scale_update("mxfp8_e4m3", h, scale), "BC_ERR_UNSUPPORTED", "per-tensor formats")
    raises(lambda: bc.ref.delayed_scale_update("fp8_e4m3_tensor", h, scale, algo="mean"), "BC_ERR_ARG", "'max' or 'most_recent'")
    raises(lambda: bc.ref.delayed_scale_update("fp8_e4m3_tensor", h, scale[:3]), "BC_ERR_ARG", "float32 [4]")
    raises(lambda: bc.ref.delayed_scale_update("fp8_e4m3_tensor", h.astype(np.float64), scale), "BC_ERR_ARG", "history")
    raises(lambda: bc.ref.delayed_scale_update("fp8_e4m3_tensor", h, scale, margin=200), "BC_ERR_ARG", "0 <= margin <= 126")


if __name__ == "__main__":
    sys.exit(run(globals()))
