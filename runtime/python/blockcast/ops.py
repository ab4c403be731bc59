"""The GPU operations on torch CUDA tensors: amax, compute_scale, quantize, quantize_cast,
dequantize, scale_swizzle. Each runs on the tensor's device and the current CUDA stream,
allocates its outputs with torch, and raises BlockcastError with the library's message.

Every operation is also a torch custom op (torch.ops.blockcast.*, with fake implementations
that give the exact output shapes and dtypes), which is what torch.compile sees; in eager mode
the functions below call the library directly, without the dispatcher's overhead."""
import ctypes
import threading

import torch

from . import _capi as C
from ._capi import BlockcastError
from .core import (Format, QuantizedTensor, _TORCH_DT, _layout, check_dirs, data_shape, delayed_args, direction_code,
                   flat2d, get_format, grouped_out, grouped_ptrs, handle, scale_shape, sym_layout, torch_data_dtype,
                   torch_scale_dtype)

_EMPTY_SHAPE = (0,)


def _check_cuda(fn, arg, x):
    if not isinstance(x, torch.Tensor):
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is a {type(x).__name__}; expected a torch.Tensor on a CUDA device")
    if x.device.type != "cuda":
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is on {x.device}; blockcast.{fn} takes CUDA tensors "
                             f"(blockcast.ref.{fn} runs the CPU reference on CPU tensors)")


def _hp(fn, x):
    """ctypes bc_tensor of a high-precision CUDA tensor (leading dims flattened)."""
    _check_cuda(fn, "x", x)
    dt = _TORCH_DT.get(x.dtype)
    if dt is None:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: x has dtype {x.dtype}; expected torch.float32, torch.bfloat16 or torch.float16")
    rows, cols, ld = flat2d(x, fn, "x", True)
    return C.Tensor(x.data_ptr(), dt, rows, cols, ld)


def _same_device(fn, arg, t, dev):
    if dev is not None and t.device != dev:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is on {t.device} but the operation runs on {dev}; "
                             "pass tensors of one device")


def _fp32_1(fn, arg, t, dev=None):
    _check_cuda(fn, arg, t)
    _same_device(fn, arg, t, dev)
    if t.dtype != torch.float32 or t.numel() != 1:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is {t.dtype}[{t.numel()}]; expected a float32 CUDA tensor of one element")
    return t.data_ptr()


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(dev):
    """The current CUDA stream of dev as an integer handle (the private accessor triton uses
    costs a fraction of torch.cuda.current_stream(); the public one is the fallback)."""
    if _raw_stream is not None:
        return _raw_stream(dev.index if dev.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(dev).cuda_stream


_exchange = getattr(torch.cuda, "_exchange_device", None)
_maybe_exchange = getattr(torch.cuda, "_maybe_exchange_device", None)


class _on_device:
    """Make x's device current for the call (the library launches on the current context), and
    the previous one again after it, as torch.cuda.device does: without creating a context on
    the previous device where it had none (with CUDA 12, setting a device creates its context:
    a rank on GPU 3 would otherwise hold one on GPU 0)."""
    __slots__ = ("dev", "prev")

    def __init__(self, dev):
        self.dev = dev

    def __enter__(self):
        self.prev = None
        idx = self.dev.index
        if idx is None:
            return
        if _exchange is not None and _maybe_exchange is not None:
            prev = _exchange(idx)
            self.prev = prev if prev != idx else None
        elif idx != torch.cuda.current_device():
            self.prev = torch.cuda.current_device()
            torch.cuda.set_device(idx)

    def __exit__(self, *a):
        if self.prev is None:
            return
        if _maybe_exchange is not None:
            _maybe_exchange(self.prev)
        else:
            torch.cuda.set_device(self.prev)


_ndev = []


def _single_device():
    """One visible GPU: no device guard needed (checked once)."""
    if not _ndev:
        _ndev.append(torch.cuda.device_count())
    return _ndev[0] == 1


_tls = threading.local()
_cuda = []


def _current_context(index):
    """Make device `index`'s primary context (the one torch uses) current on this thread if the
    thread has none: threads that have not made a CUDA runtime call yet (autograd's backward
    workers, a user's threads) have no current context, and torch.cuda.set_device of the device
    torch thinks is current does not make one."""
    if not _cuda:
        lib = ctypes.CDLL("libcuda.so.1")
        for name, args in (("cuCtxGetCurrent", [ctypes.POINTER(ctypes.c_void_p)]),
                           ("cuDeviceGet", [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
                           ("cuDevicePrimaryCtxRetain", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]),
                           ("cuCtxSetCurrent", [ctypes.c_void_p])):
            getattr(lib, name).argtypes = args
        _cuda.append(lib)
    lib = _cuda[0]
    cur = ctypes.c_void_p()
    if lib.cuCtxGetCurrent(ctypes.byref(cur)) == 0 and cur.value:
        return
    d, pctx = ctypes.c_int(), ctypes.c_void_p()
    if lib.cuDeviceGet(ctypes.byref(d), index) != 0 or lib.cuDevicePrimaryCtxRetain(ctypes.byref(pctx), d) != 0 \
            or lib.cuCtxSetCurrent(pctx) != 0:
        raise BlockcastError("BC_ERR_CUDA", f"could not make device {index}'s primary CUDA context current on this thread")


def _launch(dev, fn, *args):
    """C.call with dev's context current (the library launches on the current context)."""
    if _single_device():
        if not getattr(_tls, "ready", False):
            _current_context(dev.index if dev.index is not None else torch.cuda.current_device())
            _tls.ready = True
        C.call(fn, *args)
    else:
        with _on_device(dev):
            _current_context(dev.index if dev.index is not None else torch.cuda.current_device())
            C.call(fn, *args)


# ---- implementations (eager) -----------------------------------------------------------------

def _amax_impl(x):
    t = _hp("amax", x)
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    _launch(x.device, C.bc_amax, ctypes.byref(t), out.data_ptr(), _stream(x.device))
    return out


def _compute_scale_impl(name, amax):
    f, h = handle(name)
    p = _fp32_1("compute_scale", "amax", amax)
    scale = torch.empty(1, dtype=torch.float32, device=amax.device)
    scale_inv = torch.empty(1, dtype=torch.float32, device=amax.device)
    _launch(amax.device, C.bc_compute_scale, h, p, scale.data_ptr(), scale_inv.data_ptr(), _stream(amax.device))
    return scale, scale_inv


def _alloc_dirs(f, rows, cols, rowwise, columnwise, swizzled, dev, placeholders=False):
    """data and scale_inv of each direction; an absent direction is None (placeholders: an empty
    tensor each, as the custom op, which returns tensors only, needs)."""
    out = []
    for want, d in ((rowwise, C.BC_ROWWISE), (columnwise, C.BC_COLUMNWISE)):
        if want:
            lay = _layout(f.name, rows, cols, d, swizzled)
            out.append(torch.empty(data_shape(f, lay), dtype=torch_data_dtype(f), device=dev))
            out.append(torch.empty(scale_shape(f, lay), dtype=torch_scale_dtype(f), device=dev))
        elif placeholders:
            out += [torch.empty(_EMPTY_SHAPE, dtype=torch.uint8, device=dev),
                    torch.empty(_EMPTY_SHAPE, dtype=torch.uint8, device=dev)]
        else:
            out += [None, None]
    return out


def _cast(fn, x, name, rowwise, columnwise, swizzled, sr, seed, offset, scale, amax, placeholders=False, out=None):
    """quantize (scale and amax None: computed here) or quantize_cast (given). Returns the four
    direction tensors, the amax / scale written here (else None) and the 2D shape. out: a
    QuantizedTensor written in place instead (its amax / scale: quantize's, or quantize_cast's
    given ones copied there)."""
    f, h = handle(name)
    t = _hp(fn, x)
    check_dirs(fn, f, rowwise, columnwise)
    dev = x.device
    if out is not None:
        q, _, _ = _qt_in(fn, "out", out, fmt=f, shape=(t.rows, t.cols), dirs=(rowwise, columnwise), swizzled=swizzled, dev=dev,
                         tensor_scale=fn == "quantize")
        q.format = h
        rd, rs, cd, cs = out.rowwise_data, out.rowwise_scale_inv, out.columnwise_data, out.columnwise_scale_inv
    else:
        rd, rs, cd, cs = _alloc_dirs(f, t.rows, t.cols, rowwise, columnwise, swizzled, dev, placeholders)
        q = C.QTensor(h, t.rows, t.cols, rd.data_ptr() if rowwise else None, rs.data_ptr() if rowwise else None,
                      cd.data_ptr() if columnwise else None, cs.data_ptr() if columnwise else None)
        q.scale_swizzled = 1 if swizzled else 0
    if sr:
        q.stochastic_rounding, q.sr_seed, q.sr_offset = 1, seed, offset
    new_amax = new_scale = None
    if fn == "quantize" and out is not None:
        new_amax, new_scale = out.amax, out.scale  # q's pointers are out's (_qt_in)
    elif fn == "quantize":
        if f.per_tensor and not placeholders:  # amax and scale: one allocation
            both = torch.empty(2, dtype=torch.float32, device=dev)
            new_amax, new_scale = both[0:1], both[1:2]
            q.amax, q.scale = both.data_ptr(), both.data_ptr() + 4
        elif f.per_tensor:  # a custom op's outputs may not share storage
            new_amax = torch.empty(1, dtype=torch.float32, device=dev)
            new_scale = torch.empty(1, dtype=torch.float32, device=dev)
            q.amax, q.scale = new_amax.data_ptr(), new_scale.data_ptr()
        elif f.two_level:
            new_amax = torch.empty(1, dtype=torch.float32, device=dev)
            q.amax = new_amax.data_ptr()
    else:
        if f.per_tensor:
            if scale is None:
                raise BlockcastError("BC_ERR_ARG", f"quantize_cast: format '{f.name}' is scaled per tensor: pass "
                                     "scale= (a float32 CUDA tensor of one element)")
            q.scale = _fp32_1(fn, "scale", scale, dev)
        if f.two_level:
            if amax is None:
                raise BlockcastError("BC_ERR_ARG", f"quantize_cast: format '{f.name}' has a per-tensor second "
                                     "level: pass amax= (the global amax, a float32 CUDA tensor of one element)")
            q.amax = _fp32_1(fn, "amax", amax, dev)
    _launch(dev, C.bc_quantize if fn == "quantize" else C.bc_quantize_cast, ctypes.byref(t), ctypes.byref(q),
            _stream(dev))
    if out is not None and fn != "quantize":  # the given scale / amax is out's too (what a gather of it copies)
        for given, mine in ((scale if f.per_tensor else None, out.scale), (amax if f.two_level else None, out.amax)):
            if given is not None and mine is not None and mine.data_ptr() != given.data_ptr():
                mine.copy_(given.reshape(1))
    return rd, rs, cd, cs, new_amax, new_scale, t.rows, t.cols


def _check_buf(fn, arg, t, nbytes, dev=None):
    _check_cuda(fn, arg, t)
    _same_device(fn, arg, t, dev)
    if not t.is_contiguous():
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is not contiguous; quantized buffers are dense (pass .contiguous())")
    have = t.numel() * t.element_size()
    if have < nbytes:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} holds {have} bytes; this format and shape need {nbytes} "
                             "(see blockcast.layout)")
    return t.data_ptr()


_DIR_NAMES = ((C.BC_ROWWISE, "rowwise"), (C.BC_COLUMNWISE, "columnwise"))


def _qt_in(fn, arg, q, *, fmt=None, shape=None, dirs=None, swizzled=None, dev=None, tensor_scale=False):
    """A QuantizedTensor's buffers as a bc_qtensor, each checked against the layout of its format
    and shape (CUDA, one device, dense, large enough). fmt / shape / dirs ((rowwise, columnwise))
    / swizzled: what the call needs q to be; tensor_scale: the call writes q's amax (per-tensor
    and two-level formats) and scale (per-tensor), which q must then have. Returns (bc_qtensor,
    Format, device or None)."""
    if not isinstance(q, QuantizedTensor):
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is a {type(q).__name__}; expected a blockcast.QuantizedTensor")
    f, h = handle(q.format)
    if fmt is not None and f.name != fmt.name:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is in format '{f.name}'; this call writes '{fmt.name}'")
    rows, cols = (int(v) for v in q.shape)
    if shape is not None and (rows, cols) != tuple(shape):
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has shape ({rows}, {cols}); this call needs ({shape[0]}, {shape[1]})")
    sw = bool(q.scale_swizzled)
    if swizzled and f.per_tensor:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: format '{f.name}' has one per-tensor scale; swizzled=True applies to block "
                             "formats only")
    if swizzled is not None and sw != bool(swizzled) and not f.per_tensor:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg}'s block scales are {'' if sw else 'not '}swizzled but the call "
                             f"asks swizzled={bool(swizzled)}; pass swizzled={sw}")
    have = (q.rowwise_data is not None, q.columnwise_data is not None)
    if dirs is not None and have != tuple(bool(v) for v in dirs):
        def names(p):
            return " and ".join(n for (_, n), on in zip(_DIR_NAMES, p) if on) or "no direction"
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} holds {names(have)} but the call asks for {names(dirs)}; pass "
                             f"rowwise={have[0]}, columnwise={have[1]} or an {arg} with those directions")
    if tensor_scale:
        for name, needed in (("amax", f.per_tensor or f.two_level), ("scale", f.per_tensor)):
            if needed and getattr(q, name) is None:
                raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has no {name}; format '{f.name}' writes one there "
                                     "(blockcast.empty makes it)")
    c = C.QTensor(h, rows, cols)
    c.scale_swizzled = 1 if sw else 0
    for (d, name), data, sc in zip(_DIR_NAMES, (q.rowwise_data, q.columnwise_data), (q.rowwise_scale_inv, q.columnwise_scale_inv)):
        if data is None and sc is None:
            continue
        if data is None or sc is None:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has {name} {'scale_inv' if data is None else 'data'} but no "
                                 f"{'data' if data is None else 'scale_inv'}; a direction needs both")
        if rows == 0:  # a rank without rows: nothing is read or written
            continue
        lay = _layout(f.name, rows, cols, d, sw)
        dp = _check_buf(fn, f"{arg}.{name}_data", data, lay.data_bytes, dev)
        dev = data.device
        sp = _check_buf(fn, f"{arg}.{name}_scale_inv", sc, 4 if f.per_tensor else lay.scale_bytes, dev)
        if d == C.BC_ROWWISE:
            c.rowwise_data, c.rowwise_scale_inv = dp, sp
        else:
            c.columnwise_data, c.columnwise_scale_inv = dp, sp
    for name in ("amax", "scale"):
        t = getattr(q, name)
        if t is not None:
            setattr(c, name, _fp32_1(fn, f"{arg}.{name}", t, dev))
            dev = t.device
    return c, f, dev


def empty(fmt, rows, cols, *, rowwise=True, columnwise=False, swizzled=False, device=None):
    """A QuantizedTensor of [rows, cols] in fmt with new, uninitialized buffers of the asked
    directions (and zeroed amax / scale where the format has them), on `device` (default: the
    current CUDA device): the out= of quantize, quantize_cast, all_gather and
    all_gather_quantized, reused from step to step; row_slice() of it gives a rank's rows."""
    f = get_format(fmt)
    check_dirs("empty", f, rowwise, columnwise)
    if swizzled and f.per_tensor:
        raise BlockcastError("BC_ERR_ARG", f"empty: format '{f.name}' has one per-tensor scale; swizzled=True applies to "
                             "block formats only")
    rows, cols = int(rows), int(cols)
    if rows < 1 or cols < 1:
        raise BlockcastError("BC_ERR_ARG", f"empty: shape ({rows}, {cols}); expected at least one row and one column")
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    rd, rs, cd, cs = _alloc_dirs(f, rows, cols, rowwise, columnwise, swizzled, dev)
    amax = torch.zeros(1, dtype=torch.float32, device=dev) if (f.per_tensor or f.two_level) else None
    scale = torch.zeros(1, dtype=torch.float32, device=dev) if f.per_tensor else None
    return QuantizedTensor(f, (rows, cols), rd, rs, cd, cs, amax, scale, bool(swizzled))


def _dequantize_impl(data, scale_inv, amax, name, rows, cols, d, swizzled, dtype):
    f, h = handle(name)
    if dtype not in _TORCH_DT:
        raise BlockcastError("BC_ERR_ARG", f"dequantize: dtype is {dtype}; expected torch.float32, torch.bfloat16 or torch.float16")
    lay = _layout(f.name, rows, cols, d, swizzled)
    q = C.QTensor(h, rows, cols)
    dp = _check_buf("dequantize", "data", data, lay.data_bytes)
    sp = _check_buf("dequantize", "scale_inv", scale_inv, 4 if f.per_tensor else lay.scale_bytes, data.device)
    if d == C.BC_ROWWISE:
        q.rowwise_data, q.rowwise_scale_inv = dp, sp
    else:
        q.columnwise_data, q.columnwise_scale_inv = dp, sp
    q.scale_swizzled = 1 if swizzled else 0
    if f.two_level:
        if amax is None:
            raise BlockcastError("BC_ERR_ARG", f"dequantize: format '{f.name}' needs the global amax (q.amax)")
        q.amax = _fp32_1("dequantize", "amax", amax, data.device)
    out = torch.empty((lay.data_rows, lay.data_cols), dtype=dtype, device=data.device)
    t = C.Tensor(out.data_ptr(), _TORCH_DT[dtype], lay.data_rows, lay.data_cols, lay.data_cols)
    _launch(data.device, C.bc_dequantize, ctypes.byref(q), d, ctypes.byref(t), _stream(data.device))
    return out


def _scale_swizzle_impl(src, name, rows, cols, d, from_swizzled):
    f, h = handle(name)
    if f.per_tensor:
        raise BlockcastError("BC_ERR_ARG", f"scale_swizzle: format '{f.name}' has one scale per tensor: nothing to swizzle")
    lay_in = _layout(f.name, rows, cols, d, bool(from_swizzled))
    lay_out = _layout(f.name, rows, cols, d, not from_swizzled)
    sp = _check_buf("scale_swizzle", "src", src, lay_in.scale_bytes)
    out = torch.empty(scale_shape(f, lay_out), dtype=src.dtype if src.element_size() == f.scale_bytes
                      else torch_scale_dtype(f), device=src.device)
    _launch(src.device, C.bc_scale_swizzle, h, rows, cols, d, sp, 1 if from_swizzled else 0, out.data_ptr(),
            _stream(src.device))
    return out


def _dense_f32_cuda(t):
    return isinstance(t, torch.Tensor) and t.device.type == "cuda" and t.dtype == torch.float32 and t.is_contiguous()


def _delayed_impl(fmt, history, scale, scale_inv, margin, algo):
    f, h, L, n, a = delayed_args("delayed_scale_update", fmt, history, scale, algo, _dense_f32_cuda)
    for arg, t in (("scale", scale), ("scale_inv", scale_inv)):
        if t is not None:
            _same_device("delayed_scale_update", arg, t, history.device)
    if scale_inv is not None and (not _dense_f32_cuda(scale_inv) or tuple(scale_inv.shape) != (n,)):
        raise BlockcastError("BC_ERR_ARG", f"delayed_scale_update: scale_inv must be a contiguous float32 [{n}] CUDA tensor or None")
    _launch(history.device, C.bc_delayed_scale_update, h, n, L, history.data_ptr(), scale.data_ptr(),
            scale_inv.data_ptr() if scale_inv is not None else None, int(margin), a, _stream(history.device))


# ---- torch custom ops (what torch.compile sees) ----------------------------------------------

def _fake_layout(f, rows, cols, d, swizzled):
    """The layout for a fake implementation: arithmetic on the (possibly symbolic) sizes, so that
    torch.compile with dynamic shapes does not specialize them; integers where the format's rule
    is not known."""
    lay = sym_layout(f, rows, cols, d, swizzled)
    return lay if lay is not None else _layout(f.name, int(rows), int(cols), d, bool(swizzled))


def _fake_dirs(x, name, rowwise, columnwise, swizzled):
    f = get_format(name)
    rows, cols, _ = flat2d(x, "quantize", "x", True)
    out = []
    for want, d in ((rowwise, C.BC_ROWWISE), (columnwise, C.BC_COLUMNWISE)):
        if want:
            lay = _fake_layout(f, rows, cols, d, swizzled)
            out += [x.new_empty(data_shape(f, lay), dtype=torch_data_dtype(f)),
                    x.new_empty(scale_shape(f, lay), dtype=torch_scale_dtype(f))]
        else:
            out += [x.new_empty(_EMPTY_SHAPE, dtype=torch.uint8), x.new_empty(_EMPTY_SHAPE, dtype=torch.uint8)]
    return out, f


def _op_quantize(x, fmt, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset):
    rd, rs, cd, cs, a, s, _, _ = _cast("quantize", x, fmt, rowwise, columnwise, swizzled, stochastic_rounding, seed,
                                       offset, None, None, placeholders=True)
    e = torch.empty(_EMPTY_SHAPE, dtype=torch.float32, device=x.device)
    return rd, rs, cd, cs, a if a is not None else e, s if s is not None else e.clone()


def _counter_needs_sr(fn, offset, sr):
    if isinstance(offset, torch.Tensor) and not sr:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: a counter offset (tensor) is for stochastic rounding; pass "
                             "stochastic_rounding=True or an integer offset")


def _take_offset(fn, counter):
    """The stochastic-rounding offset held by a counter (a CPU int64 tensor of one element), which
    the call then increments in place: a step counter that torch.compile carries as a tensor."""
    if counter.device.type != "cpu" or counter.dtype != torch.int64 or counter.numel() != 1:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: offset is a {counter.dtype} tensor of {counter.numel()} elements on "
                             f"{counter.device}; a counter offset is a CPU torch.int64 tensor of one element")
    off = int(counter.view(-1)[0])
    counter.add_(1)
    return off


def _op_quantize_counted(x, fmt, rowwise, columnwise, swizzled, seed, counter):
    return _op_quantize(x, fmt, rowwise, columnwise, swizzled, True, seed, _take_offset("quantize", counter))


def _fake_quantize(x, fmt, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset):
    (rd, rs, cd, cs), f = _fake_dirs(x, fmt, rowwise, columnwise, swizzled)
    return (rd, rs, cd, cs, x.new_empty(1 if (f.per_tensor or f.two_level) else 0, dtype=torch.float32),
            x.new_empty(1 if f.per_tensor else 0, dtype=torch.float32))


def _op_quantize_cast(x, fmt, scale, amax, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset):
    return tuple(_cast("quantize_cast", x, fmt, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset,
                       scale, amax, placeholders=True)[:4])


def _fake_quantize_cast(x, fmt, scale, amax, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset):
    return tuple(_fake_dirs(x, fmt, rowwise, columnwise, swizzled)[0])


def _fake_dequantize(data, scale_inv, amax, fmt, rows, cols, direction, swizzled, dtype):
    lay = _fake_layout(get_format(fmt), rows, cols, direction, swizzled)
    return data.new_empty((lay.data_rows, lay.data_cols), dtype=dtype)


def _fake_scale_swizzle(src, fmt, rows, cols, direction, from_swizzled):
    f = get_format(fmt)
    lay = _fake_layout(f, rows, cols, direction, not from_swizzled)
    return src.new_empty(scale_shape(f, lay), dtype=src.dtype if src.element_size() == f.scale_bytes
                         else torch_scale_dtype(f))


# The schemas, with the eager implementation and the fake one (exact output shapes and dtypes,
# for torch.compile). Registered through torch.library.Library rather than custom_op: the
# dispatcher then calls the implementation directly (custom_op's wrappers cost ~4x the call).
_OPS = {
    "amax": ("amax(Tensor x) -> Tensor", _amax_impl, lambda x: x.new_empty(1, dtype=torch.float32)),
    "compute_scale": ("compute_scale(str fmt, Tensor amax) -> (Tensor, Tensor)", _compute_scale_impl,
                      lambda fmt, amax: (amax.new_empty(1, dtype=torch.float32), amax.new_empty(1, dtype=torch.float32))),
    "quantize": ("quantize(Tensor x, str fmt, bool rowwise, bool columnwise, bool swizzled, bool stochastic_rounding, "
                 "int seed, int offset) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", _op_quantize, _fake_quantize),
    "quantize_counted": ("quantize_counted(Tensor x, str fmt, bool rowwise, bool columnwise, bool swizzled, int seed, "
                         "Tensor(a!) counter) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", _op_quantize_counted,
                         lambda x, fmt, r, c, sw, seed, counter: _fake_quantize(x, fmt, r, c, sw, True, seed, 0)),
    "quantize_cast": ("quantize_cast(Tensor x, str fmt, Tensor? scale, Tensor? amax, bool rowwise, bool columnwise, "
                      "bool swizzled, bool stochastic_rounding, int seed, int offset) -> (Tensor, Tensor, Tensor, Tensor)",
                      _op_quantize_cast, _fake_quantize_cast),
    "dequantize": ("dequantize(Tensor data, Tensor scale_inv, Tensor? amax, str fmt, SymInt rows, SymInt cols, int direction, "
                   "bool swizzled, ScalarType dtype) -> Tensor", _dequantize_impl, _fake_dequantize),
    "delayed_scale_update": ("delayed_scale_update(str fmt, Tensor(a!) history, Tensor(b!) scale, Tensor(c!)? scale_inv, "
                             "int margin, str algo) -> ()", _delayed_impl, lambda *a: None),
    "scale_swizzle": ("scale_swizzle(Tensor src, str fmt, SymInt rows, SymInt cols, int direction, bool from_swizzled) -> Tensor",
                      _scale_swizzle_impl, _fake_scale_swizzle),
}

_lib_ok = hasattr(torch, "library") and hasattr(torch.library, "register_fake") and hasattr(torch, "compiler")
_lib = None
if _lib_ok:
    _lib = torch.library.Library("blockcast", "DEF")
    for _name, (_schema, _impl, _fake) in _OPS.items():
        _lib.define(_schema)
        _lib.impl(_name, _impl, "CompositeExplicitAutograd")
        torch.library.register_fake("blockcast::" + _name, _fake, lib=_lib)


def _compiling():
    return _lib_ok and torch.compiler.is_compiling()


# ---- public functions --------------------------------------------------------------------------

def amax(x):
    """max |x| over the tensor (NaN ignored): a float32 CUDA tensor of one element."""
    return torch.ops.blockcast.amax(x) if _compiling() else _amax_impl(x)


def compute_scale(fmt, amax):
    """(scale, scale_inv) from a device amax by the format's per-tensor scale rule."""
    f = get_format(fmt)
    return torch.ops.blockcast.compute_scale(f.name, amax) if _compiling() else _compute_scale_impl(f.name, amax)


def _result(f, shape, r, rowwise, columnwise, swizzled, amax, scale):
    return QuantizedTensor(f, shape, r[0] if rowwise else None, r[1] if rowwise else None,
                           r[2] if columnwise else None, r[3] if columnwise else None, amax, scale, bool(swizzled))


def _no_out_compiled(fn, out):
    if out is not None and _compiling():
        raise BlockcastError("BC_ERR_UNSUPPORTED", f"{fn}: out= writes in place and is not traced by torch.compile; call "
                             "it outside the compiled region, or without out=")


def quantize(x, fmt, *, rowwise=True, columnwise=False, swizzled=False, stochastic_rounding=False, seed=0, offset=0, out=None):
    """Quantize x (a CUDA float32 / bfloat16 / float16 tensor, leading dims flattened into rows)
    into every asked direction in one read: current scaling for per-tensor formats (amax and
    scale computed here), block scales for block formats, the global amax for two-level
    formats (NVFP4). swizzled: block scales in the 128x4 GEMM layout. stochastic_rounding: keyed by
    (seed, offset); offset may be a counter (a CPU int64 tensor of one element) that the call reads
    and increments, which torch.compile carries from step to step. Returns a QuantizedTensor.
    out: a QuantizedTensor of x's 2D shape, this format, exactly the asked directions and
    swizzle (blockcast.empty, or a row_slice of a larger one) written in place and returned
    (eager only)."""
    f = get_format(fmt)
    _no_out_compiled("quantize", out)
    _counter_needs_sr("quantize", offset, stochastic_rounding)
    if out is not None:
        if isinstance(offset, torch.Tensor):
            offset = _take_offset("quantize", offset)
        _cast("quantize", x, f.name, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset, None, None, out=out)
        return out
    if isinstance(offset, torch.Tensor):
        if _compiling():
            r = torch.ops.blockcast.quantize_counted(x, f.name, rowwise, columnwise, swizzled, seed, offset)
            rows, cols, _ = flat2d(x, "quantize", "x", True)
            return _result(f, (rows, cols), r, rowwise, columnwise, swizzled,
                           r[4] if (f.per_tensor or f.two_level) else None, r[5] if f.per_tensor else None)
        offset = _take_offset("quantize", offset)
    if _compiling():
        r = torch.ops.blockcast.quantize(x, f.name, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset)
        rows, cols, _ = flat2d(x, "quantize", "x", True)
        return _result(f, (rows, cols), r, rowwise, columnwise, swizzled, r[4] if (f.per_tensor or f.two_level) else None,
                       r[5] if f.per_tensor else None)
    r = _cast("quantize", x, f.name, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset, None, None)
    return QuantizedTensor(f, (r[6], r[7]), r[0], r[1], r[2], r[3], r[4], r[5], bool(swizzled))


def quantize_cast(x, fmt, *, scale=None, amax=None, rowwise=True, columnwise=False, swizzled=False,
                  stochastic_rounding=False, seed=0, offset=0, out=None):
    """Quantize with a given scale (per-tensor formats: scale=, e.g. delayed scaling or an
    all-reduced amax) or a given global amax (two-level formats: amax=). Block formats compute
    their block scales as quantize does. out: as quantize's (eager only); the given scale /
    amax is also copied into out.scale / out.amax where out has them (a per-tensor out's amax
    is left as it was: no amax is computed here)."""
    f = get_format(fmt)
    _no_out_compiled("quantize_cast", out)
    if out is not None:
        if isinstance(offset, torch.Tensor):
            offset = _take_offset("quantize_cast", offset)
        _cast("quantize_cast", x, f.name, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset, scale, amax, out=out)
        return out
    if isinstance(offset, torch.Tensor):
        if _compiling():
            raise BlockcastError("BC_ERR_ARG", "quantize_cast: a counter offset (tensor) is not traced by torch.compile; "
                                 "pass an integer offset there (quantize takes a counter under compile)")
        offset = _take_offset("quantize_cast", offset)
    if _compiling():
        r = torch.ops.blockcast.quantize_cast(x, f.name, scale, amax, rowwise, columnwise, swizzled,
                                              stochastic_rounding, seed, offset)
        rows, cols, _ = flat2d(x, "quantize_cast", "x", True)
    else:
        r = _cast("quantize_cast", x, f.name, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset,
                  scale, amax)
        rows, cols = r[6], r[7]
    return _result(f, (rows, cols), r, rowwise, columnwise, swizzled, amax if f.two_level else None,
                   scale if f.per_tensor else None)


def dequantize(q, direction="rowwise", dtype=None):
    """One direction of a QuantizedTensor back to high precision (default bfloat16). Its shape
    is the direction's data shape: [rows, cols], or [cols, rows] for transposed columnwise data."""
    dtype = torch.bfloat16 if dtype is None else dtype
    d = direction_code(direction)
    data, sc = (q.rowwise_data, q.rowwise_scale_inv) if d == C.BC_ROWWISE else (q.columnwise_data, q.columnwise_scale_inv)
    if data is None or sc is None:
        raise BlockcastError("BC_ERR_ARG", f"dequantize: q has no {direction} data; quantize with "
                             f"{'rowwise' if d == C.BC_ROWWISE else 'columnwise'}=True")
    f = q.format
    rows, cols = q.shape
    if _compiling():
        return torch.ops.blockcast.dequantize(data, sc, q.amax, f.name, rows, cols, d, q.scale_swizzled, dtype)
    return _dequantize_impl(data, sc, q.amax, f.name, rows, cols, d, q.scale_swizzled, dtype)


def scale_swizzle(fmt, rows, cols, src, direction="rowwise", from_swizzled=False):
    """Convert one direction's block scales between the compact layout and the 128x4 GEMM
    swizzle (from_swizzled=False: compact -> swizzled). Padding is written as zeros."""
    f = get_format(fmt)
    d = direction_code(direction)
    if _compiling():
        return torch.ops.blockcast.scale_swizzle(src, f.name, rows, cols, d, bool(from_swizzled))
    return _scale_swizzle_impl(src, f.name, int(rows), int(cols), d, bool(from_swizzled))


def delayed_scale_update(fmt, history, scale, scale_inv=None, margin=0, algo="max"):
    """Delayed scaling of n per-tensor-scaled tensors in one launch, in place (TransformerEngine's
    rule): history is a float32 [L, n] CUDA tensor whose row 0 holds the amax of the step just
    done; scale (and scale_inv, if given) float32 [n]. Picks each tensor's amax ("max" over the
    history or "most_recent"), sets scale = (element_max / amax) / 2^margin (the old scale stays
    for an amax of 0, NaN or Inf), writes scale_inv and rolls the history (row 0 zeroed)."""
    f = get_format(fmt)
    if _compiling():
        torch.ops.blockcast.delayed_scale_update(f.name, history, scale, scale_inv, margin, algo)
    else:
        _delayed_impl(f.name, history, scale, scale_inv, margin, algo)


def _out(f, rows, cols, rowwise, columnwise, swizzled, dev):
    """A bc_qtensor (format unset) over new torch buffers of the asked directions, with the amax /
    scale the format needs: (q, (rd, rs, cd, cs, amax, scale)); absent ones are None."""
    rd, rs, cd, cs = _alloc_dirs(f, rows, cols, rowwise, columnwise, swizzled, dev)
    q = C.QTensor(None, rows, cols, rd.data_ptr() if rowwise else None, rs.data_ptr() if rowwise else None,
                  cd.data_ptr() if columnwise else None, cs.data_ptr() if columnwise else None)
    q.scale_swizzled = 1 if swizzled else 0
    amax = scale = None
    if f.per_tensor or f.two_level:
        amax = torch.empty(1, dtype=torch.float32, device=dev)
        q.amax = amax.data_ptr()
    if f.per_tensor:
        scale = torch.empty(1, dtype=torch.float32, device=dev)
        q.scale = scale.data_ptr()
    return q, (rd, rs, cd, cs, amax, scale)


def quantize_grouped(x, fmt, group_rows, *, rowwise=True, columnwise=False, swizzled=False, stochastic_rounding=False,
                     seed=0, offset=0):
    """Grouped quantize (mixture of experts; blockcast.h bc_quantize_grouped): x [sum(group_rows),
    cols] (a CUDA tensor) split along its rows into groups of any size (0 and 1 included: an expert
    without tokens), each quantized as a tensor of its own (its own amax / scale / block scales)
    into one set of buffers, in one launch per kernel. group_rows: the rows of each group (a list,
    or a tensor: a CUDA one is read back, which waits for the GPU). swizzled: every group's block
    scales in whole 128x4 tiles, the layout grouped GEMMs read. Stochastic rounding uses offset + g
    for group g. Returns a GroupedTensor (its group(g) is group g as a QuantizedTensor). Eager
    only (not traced by torch.compile)."""
    t = _hp("quantize_grouped", x)
    dev = x.device
    f = get_format(fmt)
    _counter_needs_sr("quantize_grouped", offset, stochastic_rounding)
    if isinstance(offset, torch.Tensor):
        offset = _take_offset("quantize_grouped", offset)

    def new(kind, shape):
        if kind == "f32":
            return torch.zeros(shape, dtype=torch.float32, device=dev)
        return torch.empty(shape, dtype=torch_data_dtype(f) if kind == "data" else torch_scale_dtype(f), device=dev)
    q, arr, gt = grouped_out("quantize_grouped", f, t.rows, t.cols, group_rows, rowwise, columnwise, swizzled, new)
    grouped_ptrs(q, gt, lambda a: a.data_ptr())
    if stochastic_rounding:
        q.stochastic_rounding, q.sr_seed, q.sr_offset = 1, seed, offset
    _launch(dev, C.bc_quantize_grouped, ctypes.byref(t), len(arr), arr, ctypes.byref(q), _stream(dev))
    return gt


def quantize_list(xs, fmts, *, rowwise=True, columnwise=False, swizzled=False):
    """quantize() of every tensor of xs (CUDA, one device) in one list launch per kernel family
    (bc_quantize_list): fmts is one format for all or one per tensor. Current scaling for
    per-tensor formats, the global amax for two-level formats. Returns a list of QuantizedTensor.
    Not traced by torch.compile (call it outside the compiled region, e.g. after the optimizer step)."""
    xs = list(xs)
    n = len(xs)
    if isinstance(fmts, (str, Format)):
        fmts = [fmts] * n
    fmts = list(fmts)
    if len(fmts) != n:
        raise BlockcastError("BC_ERR_ARG", f"quantize_list: {n} tensors but {len(fmts)} formats; pass one format or one per tensor")
    if n == 0:
        return []
    tens = (C.Tensor * n)()
    qs = (C.QTensor * n)()
    out = []
    dev = None
    for i, (x, fmt) in enumerate(zip(xs, fmts)):
        try:
            f, h = handle(fmt)
            check_dirs("quantize_list", f, rowwise, columnwise)
            t = _hp("quantize_list", x)
            _same_device("quantize_list", "x", x, dev)
        except BlockcastError as e:
            raise BlockcastError(e.status, f"quantize_list: tensor {i}: {e.message}") from None
        dev = x.device
        tens[i] = t
        q, (rd, rs, cd, cs, amax, scale) = _out(f, t.rows, t.cols, rowwise, columnwise, swizzled, dev)
        q.format = h
        qs[i] = q
        out.append(QuantizedTensor(f, (t.rows, t.cols), rd, rs, cd, cs, amax, scale, bool(swizzled)))
    _launch(dev, C.bc_quantize_list, n, tens, qs, _stream(dev))
    return out
