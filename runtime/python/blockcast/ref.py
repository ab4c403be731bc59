"""The CPU reference (the library's plain-C implementation of every rule, independent of the
kernels) on host arrays: numpy arrays (float32, float16) or CPU torch tensors (float32,
bfloat16, float16). Results have the array type of the input: numpy in, numpy out (data as
uint8, scales as float32 or uint8), torch in, torch out (the dtypes of blockcast.quantize)."""
import ctypes

from . import _capi as C
from ._capi import BlockcastError
from .core import (QuantizedTensor, _TORCH_DT, _layout, check_dirs, data_shape, delayed_args, direction_code, flat2d,
                   grouped_out, grouped_ptrs, handle, np, scale_shape, torch, torch_data_dtype, torch_scale_dtype)

_NP_DT = {}
if np is not None:
    _NP_DT = {np.dtype(np.float32): C.BC_FP32, np.dtype(np.float16): C.BC_FP16}


def _is_torch(x):
    return torch is not None and isinstance(x, torch.Tensor)


def _ptr(a):
    return a.data_ptr() if _is_torch(a) else a.ctypes.data


def _hp(fn, x, arg="x"):
    if _is_torch(x):
        if x.device.type != "cpu":
            raise BlockcastError("BC_ERR_ARG", f"ref.{fn}: {arg} is on {x.device}; the CPU reference takes CPU tensors "
                                 f"(blockcast.{fn} runs on CUDA tensors)")
        dt = _TORCH_DT.get(x.dtype)
        if dt is None:
            raise BlockcastError("BC_ERR_ARG", f"ref.{fn}: {arg} has dtype {x.dtype}; expected torch.float32, "
                                 "torch.bfloat16 or torch.float16")
        rows, cols, ld = flat2d(x, "ref." + fn, arg, True)
    elif np is not None and isinstance(x, np.ndarray):
        dt = _NP_DT.get(x.dtype)
        if dt is None:
            raise BlockcastError("BC_ERR_ARG", f"ref.{fn}: {arg} has dtype {x.dtype}; expected float32 or float16 "
                                 "(bfloat16: pass a CPU torch tensor)")
        rows, cols, ld = flat2d(x, "ref." + fn, arg, False)
    else:
        raise BlockcastError("BC_ERR_ARG", f"ref.{fn}: {arg} is a {type(x).__name__}; expected a numpy array or a CPU torch tensor")
    return C.Tensor(_ptr(x), dt, rows, cols, ld)


def _empty(like_torch, shape, kind, f):
    """kind: 'data', 'scale' or 'f32'."""
    if like_torch:
        dt = torch_data_dtype(f) if kind == "data" else torch_scale_dtype(f) if kind == "scale" else torch.float32
        return torch.empty(shape, dtype=dt)
    if kind == "f32" or (kind == "scale" and (f.per_tensor or f.scale_type == "fp32")):
        return np.empty(shape, dtype=np.float32)
    return np.empty(shape, dtype=np.uint8)


def _f32_host(fn, arg, v, like_torch):
    """A host fp32[1] holding v (a number, or an array / tensor of one float32)."""
    if isinstance(v, (int, float)):
        a = torch.tensor([float(v)], dtype=torch.float32) if like_torch else np.array([v], dtype=np.float32)
    else:
        a = v
        if _is_torch(a):
            ok = a.dtype == torch.float32 and a.device.type == "cpu" and a.numel() == 1
        else:
            ok = np is not None and isinstance(a, np.ndarray) and a.dtype == np.float32 and a.size == 1
        if not ok:
            raise BlockcastError("BC_ERR_ARG", f"ref.{fn}: {arg} must be a number or a host float32 array of one element")
    return a


def _cast(fn, x, fmt, rowwise, columnwise, swizzled, sr, seed, offset, scale, amax):
    f, h = handle(fmt)
    t = _hp(fn, x)
    check_dirs("ref." + fn, f, rowwise, columnwise)
    tt = _is_torch(x)
    q = C.QTensor(h, t.rows, t.cols)
    bufs = {}
    for want, d, name in ((rowwise, C.BC_ROWWISE, "rowwise"), (columnwise, C.BC_COLUMNWISE, "columnwise")):
        if not want:
            continue
        lay = _layout(f.name, t.rows, t.cols, d, bool(swizzled))
        bufs[name + "_data"] = _empty(tt, data_shape(f, lay), "data", f)
        bufs[name + "_scale_inv"] = _empty(tt, scale_shape(f, lay), "scale", f)
        setattr(q, name + "_data", _ptr(bufs[name + "_data"]))
        setattr(q, name + "_scale_inv", _ptr(bufs[name + "_scale_inv"]))
    q.scale_swizzled = 1 if swizzled else 0
    q.stochastic_rounding = 1 if sr else 0
    q.sr_seed, q.sr_offset = seed, offset
    a = s = None
    if fn == "quantize":
        if f.per_tensor or f.two_level:
            a = _empty(tt, (1,), "f32", f)
            q.amax = _ptr(a)
        if f.per_tensor:
            s = _empty(tt, (1,), "f32", f)
            q.scale = _ptr(s)
        C.call(C.bc_ref_quantize, ctypes.byref(t), ctypes.byref(q))
    else:
        if f.per_tensor:
            if scale is None:
                raise BlockcastError("BC_ERR_ARG", f"ref.quantize_cast: format '{f.name}' is scaled per tensor: pass scale=")
            s = _f32_host(fn, "scale", scale, tt)
            q.scale = _ptr(s)
        if f.two_level:
            if amax is None:
                raise BlockcastError("BC_ERR_ARG", f"ref.quantize_cast: format '{f.name}' needs the global amax: pass amax=")
            a = _f32_host(fn, "amax", amax, tt)
            q.amax = _ptr(a)
        C.call(C.bc_ref_quantize_cast, ctypes.byref(t), ctypes.byref(q))
    return QuantizedTensor(f, (t.rows, t.cols), bufs.get("rowwise_data"), bufs.get("rowwise_scale_inv"),
                           bufs.get("columnwise_data"), bufs.get("columnwise_scale_inv"), a, s, bool(swizzled))


def quantize(x, fmt, *, rowwise=True, columnwise=False, swizzled=False, stochastic_rounding=False, seed=0, offset=0):
    """CPU reference of blockcast.quantize."""
    return _cast("quantize", x, fmt, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset, None, None)


def quantize_cast(x, fmt, *, scale=None, amax=None, rowwise=True, columnwise=False, swizzled=False,
                  stochastic_rounding=False, seed=0, offset=0):
    """CPU reference of blockcast.quantize_cast (scale / amax: numbers or host float32[1])."""
    return _cast("quantize_cast", x, fmt, rowwise, columnwise, swizzled, stochastic_rounding, seed, offset, scale, amax)


def quantize_grouped(x, fmt, group_rows, *, rowwise=True, columnwise=False, swizzled=False, stochastic_rounding=False,
                     seed=0, offset=0):
    """CPU reference of blockcast.quantize_grouped."""
    t = _hp("quantize_grouped", x)
    tt = _is_torch(x)

    def new(kind, shape):
        a = _empty(tt, shape, kind, handle(fmt)[0])
        if kind == "f32":
            a[...] = 0
        return a
    q, arr, gt = grouped_out("ref.quantize_grouped", fmt, t.rows, t.cols, group_rows, rowwise, columnwise, swizzled, new)
    grouped_ptrs(q, gt, _ptr)
    q.stochastic_rounding = 1 if stochastic_rounding else 0
    q.sr_seed, q.sr_offset = seed, offset
    C.call(C.bc_ref_quantize_grouped, ctypes.byref(t), len(arr), arr, ctypes.byref(q))
    return gt


def dequantize(q, direction="rowwise", dtype=None):
    """CPU reference of blockcast.dequantize: float32 unless dtype says otherwise."""
    d = direction_code(direction)
    data, sc = (q.rowwise_data, q.rowwise_scale_inv) if d == C.BC_ROWWISE else (q.columnwise_data, q.columnwise_scale_inv)
    if data is None or sc is None:
        raise BlockcastError("BC_ERR_ARG", f"ref.dequantize: q has no {direction} data")
    f, h = handle(q.format)
    rows, cols = q.shape
    lay = _layout(f.name, rows, cols, d, bool(q.scale_swizzled))
    tt = _is_torch(data)
    if tt:
        dtype = torch.float32 if dtype is None else dtype
        if dtype not in _TORCH_DT:
            raise BlockcastError("BC_ERR_ARG", f"ref.dequantize: dtype is {dtype}; expected torch.float32, torch.bfloat16 or torch.float16")
        out = torch.empty((lay.data_rows, lay.data_cols), dtype=dtype)
        dt = _TORCH_DT[dtype]
        nbytes = [x.numel() * x.element_size() for x in (data, sc)]
    else:
        dtype = np.dtype(np.float32 if dtype is None else dtype)
        if dtype not in _NP_DT:
            raise BlockcastError("BC_ERR_ARG", f"ref.dequantize: dtype is {dtype}; expected float32 or float16")
        out = np.empty((lay.data_rows, lay.data_cols), dtype=dtype)
        dt = _NP_DT[dtype]
        nbytes = [x.nbytes for x in (data, sc)]
    need = [lay.data_bytes, 4 if f.per_tensor else lay.scale_bytes]
    for arg, have, n in zip(("data", "scale_inv"), nbytes, need):
        if have < n:
            raise BlockcastError("BC_ERR_ARG", f"ref.dequantize: {arg} holds {have} bytes; this format and shape need {n}")
    qt = C.QTensor(h, rows, cols)
    if d == C.BC_ROWWISE:
        qt.rowwise_data, qt.rowwise_scale_inv = _ptr(data), _ptr(sc)
    else:
        qt.columnwise_data, qt.columnwise_scale_inv = _ptr(data), _ptr(sc)
    qt.scale_swizzled = 1 if q.scale_swizzled else 0
    if f.two_level:
        qt.amax = _ptr(q.amax)
    t = C.Tensor(_ptr(out), dt, lay.data_rows, lay.data_cols, lay.data_cols)
    C.call(C.bc_ref_dequantize, ctypes.byref(qt), d, ctypes.byref(t))
    return out


def amax(x):
    """max |x| over the tensor (NaN ignored), a float."""
    t = _hp("amax", x)
    out = ctypes.c_float()
    C.call(C.bc_ref_amax, ctypes.byref(t), ctypes.byref(out))
    return out.value


def encode(fmt, x):
    """The element code of one fp32 value (round to nearest even, saturating)."""
    _, h = handle(fmt)
    out = ctypes.c_uint8()
    C.call(C.bc_ref_encode, h, float(x), ctypes.byref(out))
    return out.value


def decode(fmt, code):
    """The fp32 value of one element code."""
    _, h = handle(fmt)
    if not isinstance(code, int) or not 0 <= code <= 255:
        raise BlockcastError("BC_ERR_ARG", f"ref.decode: code is {code!r}; expected an integer in [0, 255]")
    out = ctypes.c_float()
    C.call(C.bc_ref_decode, h, code, ctypes.byref(out))
    return out.value


def scale(fmt, amax):
    """(scale, scale_inv) from an amax by the format's per-tensor scale rule."""
    _, h = handle(fmt)
    s, si = ctypes.c_float(), ctypes.c_float()
    C.call(C.bc_ref_scale, h, float(amax), ctypes.byref(s), ctypes.byref(si))
    return s.value, si.value


def _dense_f32_host(t):
    if _is_torch(t):
        return t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous()
    return np is not None and isinstance(t, np.ndarray) and t.dtype == np.float32 and t.flags["C_CONTIGUOUS"]


def delayed_scale_update(fmt, history, scale, scale_inv=None, margin=0, algo="max"):
    """CPU reference of blockcast.delayed_scale_update, in place on host float32 arrays."""
    f, h, L, n, a = delayed_args("ref.delayed_scale_update", fmt, history, scale, algo, _dense_f32_host)
    if scale_inv is not None and (not _dense_f32_host(scale_inv) or tuple(scale_inv.shape) != (n,)):
        raise BlockcastError("BC_ERR_ARG", f"ref.delayed_scale_update: scale_inv must be a contiguous float32 [{n}] array or None")
    C.call(C.bc_ref_delayed_scale_update, h, n, L, _ptr(history), _ptr(scale),
           _ptr(scale_inv) if scale_inv is not None else None, int(margin), a)
