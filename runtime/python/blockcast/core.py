"""Formats, layouts, quantized-tensor results and the array adapters shared by the GPU
operations (blockcast.ops) and the CPU reference (blockcast.ref)."""
import ctypes
import dataclasses
import functools
import operator
import typing

from . import _capi as C
from ._capi import BlockcastError

try:  # numpy and torch are both optional here: the reference works with either
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _s(b):
    return b.decode() if b is not None else None


@dataclasses.dataclass(frozen=True)
class Format:
    """A quantization format: an immutable, hashable value (a constant to torch.compile).
    It holds no stream, communicator or pointer; the library's format is found by name."""
    name: str
    element: str
    element_bits: int
    element_max: float
    block: str              # "tensor", "1d" or "2d"
    block_rows: int
    block_cols: int
    scale_type: str         # "fp32", "e8m0", "ue4m3": the type of the scale_inv entries
    scale_rule: str         # "amax", "rceil", "floor", "two_level"
    scale_bytes: int
    has_rowwise: bool
    has_columnwise: bool
    columnwise_transposed: bool
    two_level: bool
    stochastic_rounding: bool
    element_pack: int       # elements per packing group (data rows hold a multiple): 1, 2 (4-bit), 4 (6-bit)
    nan_policy: str         # "satfinite" or "scale_nan"
    spec_file: str
    description: str = dataclasses.field(compare=False, repr=False)

    @property
    def per_tensor(self):
        return self.block == "tensor"

    def __str__(self):
        return self.name


_handles = {}  # format name -> bc_format pointer in the process's context


def _format_from_handle(h):
    info = C.FormatInfo()
    C.call(C.bc_format_get_info, h, ctypes.byref(info))
    f = Format(name=_s(info.name), element=_s(info.element), element_bits=info.element_bits,
               element_max=float(info.element_max), block=C.BLOCK_KINDS[info.block], block_rows=info.block_rows,
               block_cols=info.block_cols, scale_type=_s(info.scale_type), scale_rule=_s(info.scale_rule),
               scale_bytes=info.scale_bytes, has_rowwise=bool(info.has_rowwise),
               has_columnwise=bool(info.has_columnwise), columnwise_transposed=bool(info.columnwise_transposed),
               two_level=bool(info.two_level), stochastic_rounding=bool(info.stochastic_rounding),
               element_pack=info.element_pack, nan_policy=_s(info.nan_policy),
               spec_file=_s(info.spec_file), description=_s(info.description))
    _handles[f.name] = h
    _by_name[f.name] = f
    return f


_by_name = {}  # name -> Format (a plain dict: torch.compile traces lookups in it)


def get_format(name):
    """The format called `name` (a built-in spec or one loaded earlier); a Format is returned as is."""
    if isinstance(name, Format):
        return name
    f = _by_name.get(name)
    if f is not None:
        return f
    if not isinstance(name, str):
        raise BlockcastError("BC_ERR_ARG", f"format: expected a format name (str) or a blockcast.Format, got {type(name).__name__}")
    h = ctypes.c_void_p()
    C.call(C.bc_format_get, name.encode(), ctypes.byref(h))
    return _format_from_handle(h)


def formats():
    """Every format the library knows, in load order."""
    n = C.bc_format_count(C.ctx)
    hs = [C.bc_format_at(C.ctx, i) for i in range(n)]
    return [_format_from_handle(h) for h in hs]


def load_spec(path):
    """Load a format spec file (validated now; its kernels are generated and compiled when first used)."""
    h = ctypes.c_void_p()
    C.call(C.bc_format_load, str(path).encode(), ctypes.byref(h))
    return _format_from_handle(h)


def handle(fmt):
    f = get_format(fmt)
    h = _handles.get(f.name)
    if h is None:  # a Format made by hand: find the library's format of that name
        h = _handles[get_format(f.name).name]
    return f, h


@dataclasses.dataclass(frozen=True)
class Layout:
    """The buffers of one direction of a quantized [rows, cols] tensor (bc_qtensor_layout)."""
    data_rows: int
    data_cols: int          # elements (a 4-bit row of data_cols elements is data_cols // 2 bytes)
    data_bytes: int
    scale_rows: int
    scale_cols: int
    scale_valid_rows: int
    scale_valid_cols: int
    scale_elem_bytes: int
    scale_bytes: int


def check_dirs(fn, f, rowwise, columnwise):
    """At least one direction asked for, and the format has each one asked for."""
    if not rowwise and not columnwise:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: neither rowwise nor columnwise asked for; ask for at least one direction")
    if rowwise and not f.has_rowwise:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: format '{f.name}' has no rowwise direction")
    if columnwise and not f.has_columnwise:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: format '{f.name}' has no columnwise direction")


def direction_code(direction):
    if direction in ("rowwise", C.BC_ROWWISE):
        return C.BC_ROWWISE
    if direction in ("columnwise", C.BC_COLUMNWISE):
        return C.BC_COLUMNWISE
    raise BlockcastError("BC_ERR_ARG", f"direction is {direction!r}; expected 'rowwise' or 'columnwise'")


@functools.lru_cache(maxsize=4096)
def _layout(name, rows, cols, d, swizzled):
    _, h = handle(name)
    out = C.QLayout()
    C.call(C.bc_qtensor_layout, h, rows, cols, d, 1 if swizzled else 0, ctypes.byref(out))
    return Layout(out.data_rows, out.data_cols, out.data_bytes, out.scale_rows, out.scale_cols,
                  out.scale_valid_rows, out.scale_valid_cols, out.scale_elem_bytes, out.scale_bytes)


# ---- the layout as arithmetic (torch.compile's dynamic shapes) ---------------------------------
# bc_qtensor_layout takes integers; a fake implementation given symbolic sizes (torch.compile with
# dynamic shapes) must not turn them into integers, or every new size recompiles. The layout is the
# same arithmetic for every format (fmt/bc_layout.c: bci_geom_get), with four numbers of the spec
# per direction (block scales one per data row or per block row; stored as is or transposed; rows
# and columns padded to multiples). Those four are read from the library once per format and
# direction: the one choice among the candidates that reproduces bc_qtensor_layout on a set of
# shapes; where none does, None, and the caller falls back to integers.

def _cdiv(a, b):
    return (a + b - 1) // b


def _rup(a, m):
    return _cdiv(a, m) * m


def _model(f, d, swizzled, rule, rows, cols):
    """Layout of [rows, cols] (ints or symbolic sizes) by bci_geom_get's arithmetic."""
    col = d == C.BC_COLUMNWISE
    vr, vc = (cols, rows) if col else (rows, cols)
    tr = f.columnwise_transposed if col else True
    dr, dc = (vr, vc) if tr else (vc, vr)
    data_bytes = dr * (dc * f.element_bits // 8)
    if f.per_tensor:
        return Layout(dr, dc, data_bytes, 1, 1, 1, 1, 4, 4)
    per_row, order, pr, pc = rule
    lr = vr if per_row else _cdiv(vr, f.block_rows)
    lc = _cdiv(vc, f.block_cols)
    if swizzled:
        sr, sc, vsr, vsc = _rup(lr, 128), _rup(lc, 4), lr, lc
    elif order == 0:
        sr, sc, vsr, vsc = _rup(lr, pr), _rup(lc, pc), lr, lc
    else:
        sr, sc, vsr, vsc = _rup(lc, pr), _rup(lr, pc), lc, lr
    return Layout(dr, dc, data_bytes, sr, sc, vsr, vsc, f.scale_bytes, sr * sc * f.scale_bytes)


_PROBES = [(r, c) for r in (1, 2, 3, 4, 5, 16, 20, 33, 128, 130, 257, 516) for c in (1, 2, 4, 8, 20, 36, 131, 132, 260, 1028)]
_PADS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@functools.lru_cache(maxsize=256)
def _layout_rule(name, d):
    """(per_row, order, pad_rows, pad_cols) of a direction's compact scales, or None."""
    f = get_format(name)
    if f.per_tensor:
        return (0, 0, 1, 1)
    seen = []
    for r, c in _PROBES:
        try:
            seen.append((r, c, _layout(name, r, c, d, False), _layout(name, r, c, d, True)))
        except BlockcastError:  # a shape this format cannot hold (packing)
            continue
    for per_row in (0, 1):
        for order in (0, 1):
            for pr in _PADS:
                for pc in _PADS:
                    rule = (per_row, order, pr, pc)
                    if seen and all(_model(f, d, False, rule, r, c) == lay and _model(f, d, True, rule, r, c) == lsw
                                    for r, c, lay, lsw in seen):
                        return rule
    return None


def sym_layout(f, rows, cols, d, swizzled):
    """The layout of [rows, cols] where rows / cols may be symbolic (torch.SymInt): arithmetic
    only, the packing rule checked as bc_qtensor_layout checks it; integers for the rest go
    through the library. None where the format's rule is not known."""
    col = d == C.BC_COLUMNWISE
    if not (f.has_columnwise if col else f.has_rowwise):
        raise BlockcastError("BC_ERR_ARG", f"format '{f.name}' has no {'columnwise' if col else 'rowwise'} direction")
    if isinstance(rows, int) and isinstance(cols, int) and (rows < 1 or cols < 1 or rows > (1 << 50) // cols):
        raise BlockcastError("BC_ERR_ARG", f"shape [{rows}, {cols}]; expected rows, cols >= 1 and at most 2^50 elements")
    rule = _layout_rule(f.name, d)
    if rule is None:
        return None
    if swizzled and f.per_tensor:
        raise BlockcastError("BC_ERR_ARG", f"format '{f.name}' has one per-tensor scale; swizzled applies to block formats only")
    lay = _model(f, d, swizzled, rule, rows, cols)
    if f.element_pack > 1 and lay.data_cols % f.element_pack != 0:
        raise BlockcastError("BC_ERR_ARG", f"format '{f.name}' packs {f.element_pack} {f.element_bits}-bit elements together: "
                             f"its data rows must hold whole groups (a multiple of {f.element_pack} elements)")
    return lay


def layout(fmt, rows, cols, direction="rowwise", swizzled=False):
    """The exact buffers of one direction: data [data_rows, data_cols] elements, scales
    [scale_rows, scale_cols] entries (swizzled: the 128x4 GEMM layout of the same entries)."""
    f = get_format(fmt)
    return _layout(f.name, int(rows), int(cols), direction_code(direction), bool(swizzled))


class QuantizedTensor(typing.NamedTuple):
    """The result of a quantize: an immutable named tuple; absent directions are None. Data and scale tensors
    carry the dtype that fits (torch.float8_e4m3fn / float8_e5m2 / float4_e2m1fn_x2 or uint8;
    scales float32 / float8_e8m0fnu / float8_e4m3fn), or uint8 / float32 numpy arrays in the
    CPU reference with numpy inputs."""
    format: Format
    shape: tuple            # the logical (rows, cols)
    rowwise_data: object = None
    rowwise_scale_inv: object = None
    columnwise_data: object = None
    columnwise_scale_inv: object = None
    amax: object = None     # per-tensor and two-level formats: fp32[1]
    scale: object = None    # per-tensor formats: fp32[1]
    scale_swizzled: bool = False

    def data(self, direction="rowwise"):
        return self.rowwise_data if direction_code(direction) == C.BC_ROWWISE else self.columnwise_data

    def scale_inv(self, direction="rowwise"):
        return self.rowwise_scale_inv if direction_code(direction) == C.BC_ROWWISE else self.columnwise_scale_inv

    def row_slice(self, start, count):
        """Rows [start, start + count) of the rowwise direction as a QuantizedTensor of their own
        whose data and block scales are views of this tensor's. The per-tensor scale_inv, amax
        and scale (per-tensor formats) and the global amax (two-level formats) are the slice's
        own copies: what a quantize of the slice computes for them (its rows' own amax) is not
        the tensor's, and all_gather_quantized(slice, ..., out=q) copies them into q. What a
        quantize writes into the slice's data and block scales lands in place here: a rank
        quantizes its rows straight into its piece of the all-gather's output
        (quantize_cast(..., out=q.row_slice(...)), then all_gather_quantized(..., out=q)). Raises where the rows' buffers are not a piece of this
        tensor's: swizzled block scales, scales not stored row by row (fp8_block_1x128's),
        rows that are not whole blocks, or compact scales whose padding rows (the layout rounds
        them up to 128) would cover the entries of the rows after the slice (count a multiple of
        128 rows, or the slice ends the tensor). The columnwise direction is not sliced (the
        result has none)."""
        f = get_format(self.format)
        rows, cols = (int(v) for v in self.shape)
        start, count = int(start), int(count)
        fn = "QuantizedTensor.row_slice"
        if self.rowwise_data is None or self.rowwise_scale_inv is None:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: the tensor has no rowwise data and scale_inv; only the rowwise direction is sliced")
        if start < 0 or count < 1 or start + count > rows:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: rows [{start}, {start + count}) of a tensor of {rows} rows; expected "
                                 f"0 <= start and 1 <= count <= {rows} - start")
        whole = _layout(f.name, rows, cols, C.BC_ROWWISE, bool(self.scale_swizzled))
        part = _layout(f.name, count, cols, C.BC_ROWWISE, bool(self.scale_swizzled))
        rb = whole.data_bytes // max(whole.data_rows, 1)
        if whole.data_rows != rows or part.data_bytes != count * rb:
            raise BlockcastError("BC_ERR_UNSUPPORTED", f"{fn}: format '{f.name}' does not store rows as equal pieces of its data")
        data = _piece(fn, "rowwise_data", self.rowwise_data, start * rb, count * rb, data_shape(f, part))
        if f.per_tensor:
            return QuantizedTensor(f, (count, cols), data, _own(self.rowwise_scale_inv), None, None, _own(self.amax),
                                   _own(self.scale), False)
        if self.scale_swizzled:
            raise BlockcastError("BC_ERR_UNSUPPORTED", f"{fn}: the block scales are swizzled (128x4 GEMM layout), where a "
                                 "band of rows is not a piece of the buffer; slice a compact tensor (swizzled=False) and "
                                 "swizzle after the gather (scale_swizzle)")
        bm = f.block_rows
        last = start + count == rows
        if start % bm or (count % bm and not last):
            raise BlockcastError("BC_ERR_ARG", f"{fn}: rows [{start}, {start + count}) are not whole blocks of format "
                                 f"'{f.name}''s {bm} block rows; start (and count, unless the slice ends the tensor) "
                                 f"must be multiples of {bm}")
        # scale rows by data rows (1D formats; nvfp4_2d repeats a block's entry on its rows) or by block rows
        rps = next((k for k in (1, bm) if whole.scale_valid_rows == -(-rows // k) and part.scale_valid_rows == -(-count // k)), None)
        if rps is None:
            raise BlockcastError("BC_ERR_UNSUPPORTED", f"{fn}: format '{f.name}' does not store its block scales row by row "
                                 f"([{whole.scale_valid_rows}, {whole.scale_valid_cols}] entries for {rows} rows), so a band "
                                 "of rows is no piece of them; quantize the rows into a tensor of their own")
        s0 = start // rps
        limit = whole.scale_rows if last else (start + count) // rps
        if part.scale_cols != whole.scale_cols or s0 + part.scale_rows > limit:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: rows [{start}, {start + count}) of format '{f.name}': the slice's "
                                 f"compact scales take {part.scale_rows} rows (rounded up by the layout) but only "
                                 f"{limit - s0} are its own; pick a count whose scale rows need no padding (e.g. a multiple "
                                 f"of {rps * 128} rows) or a slice that ends the tensor")
        es = part.scale_elem_bytes
        sc = _piece(fn, "rowwise_scale_inv", self.rowwise_scale_inv, s0 * whole.scale_cols * es,
                    part.scale_rows * part.scale_cols * es, (part.scale_rows, part.scale_cols))
        return QuantizedTensor(f, (count, cols), data, sc, None, None, _own(self.amax) if f.two_level else None, None, False)


_GFIELDS = ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv")


class GroupedTensor(typing.NamedTuple):
    """The result of quantize_grouped (mixture of experts): the groups of rows of one input, each
    quantized as a tensor of its own, in one set of buffers (blockcast.h bc_quantize_grouped):
    rowwise_data is the whole [sum(group_rows), cols] tensor's rowwise data (what a grouped GEMM
    reads with the groups' row offsets); the other buffers are 1-D, the groups' pieces one after
    another at `offsets` (bytes; offsets[g] is group g's (rowwise_data, rowwise_scale_inv,
    columnwise_data, columnwise_scale_inv), offsets[groups] the totals); per-tensor formats'
    scale_inv, amax and scale and NVFP4's amax are float32[groups] (a group without rows keeps
    0 there). group(g) is group g as a QuantizedTensor of views."""
    format: Format
    group_rows: tuple
    cols: int
    offsets: tuple
    rowwise_data: object = None
    rowwise_scale_inv: object = None
    columnwise_data: object = None
    columnwise_scale_inv: object = None
    amax: object = None
    scale: object = None
    scale_swizzled: bool = False

    def group(self, g):
        """Group g as a QuantizedTensor whose buffers are views of these (a group without rows:
        empty 1-D views)."""
        f = get_format(self.format)
        n = len(self.group_rows)
        g = int(g)
        if not 0 <= g < n:
            raise BlockcastError("BC_ERR_ARG", f"GroupedTensor.group: group {g} of {n}; expected 0 <= g < {n}")
        rows, cols = self.group_rows[g], self.cols
        bufs = []
        for i, (name, d) in enumerate((("rowwise", C.BC_ROWWISE), ("columnwise", C.BC_COLUMNWISE))):
            data, sc = getattr(self, name + "_data"), getattr(self, name + "_scale_inv")
            if data is None:
                bufs += [None, None]
                continue
            off_d, off_s = self.offsets[g][2 * i], self.offsets[g][2 * i + 1]
            if rows == 0:
                bufs += [_piece("group", name + "_data", data, off_d, 0, (0,)),
                         None if f.per_tensor else _piece("group", name + "_scale_inv", sc, off_s, 0, (0,))]
            else:
                lay = _layout(f.name, rows, cols, d, bool(self.scale_swizzled))
                bufs.append(_piece("group", name + "_data", data, off_d, lay.data_bytes, data_shape(f, lay)))
                if f.per_tensor:
                    bufs.append(None)
                else:
                    bufs.append(_piece("group", name + "_scale_inv", sc, off_s, lay.scale_bytes, scale_shape(f, lay)))
            if f.per_tensor:  # scale_inv: entry g of fp32[groups]
                bufs[-1] = _piece("group", name + "_scale_inv", sc, 4 * g, 4, (1,))
        amax = _piece("group", "amax", self.amax, 4 * g, 4, (1,)) if self.amax is not None else None
        scale = _piece("group", "scale", self.scale, 4 * g, 4, (1,)) if self.scale is not None else None
        return QuantizedTensor(f, (rows, cols), *bufs, amax, scale, bool(self.scale_swizzled))


def _group_rows(fn, group_rows):
    """group_rows as a list of ints: a sequence of integers or a 1-D integer array / tensor."""
    v = group_rows.tolist() if hasattr(group_rows, "tolist") else group_rows
    try:
        rows = [operator.index(r) for r in v]
    except TypeError:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: group_rows must be a 1-D sequence of integers (rows per group); got "
                             f"{type(group_rows).__name__} {str(group_rows)[:60]}") from None
    if any(isinstance(r, bool) for r in v):
        raise BlockcastError("BC_ERR_ARG", f"{fn}: group_rows holds a bool; expected integers (rows per group)")
    if not rows:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: group_rows is empty; expected one row count per group")
    return rows


def grouped_offsets(fmt, group_rows, cols, rowwise, columnwise, swizzled, fn="quantize_grouped"):
    """bc_grouped_layout: (int64 array of the rows, tuple of groups + 1 offset tuples)."""
    f, h = handle(fmt)
    rows = _group_rows(fn, group_rows)
    n = len(rows)
    arr = (ctypes.c_int64 * n)(*rows)
    offs = (C.GroupOffsets * (n + 1))()
    dirs = (C.BC_ROWWISE if rowwise else 0) | (C.BC_COLUMNWISE if columnwise else 0)
    C.call(C.bc_grouped_layout, h, n, arr, int(cols), dirs, 1 if swizzled else 0, offs)
    return arr, tuple(tuple(getattr(o, k) for k in _GFIELDS) for o in offs)


def grouped_out(fn, fmt, x_rows, cols, group_rows, rowwise, columnwise, swizzled, new):
    """The buffers of a grouped quantize: (bc_qtensor, group row array, GroupedTensor).
    new(kind, shape) allocates: kind "data", "scale" (the format's dtypes) or "f32" (zeroed)."""
    f, h = handle(fmt)
    check_dirs(fn, f, rowwise, columnwise)
    arr, offs = grouped_offsets(f, group_rows, cols, rowwise, columnwise, swizzled, fn)
    n = len(arr)
    total = sum(arr)
    if total != x_rows:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: group_rows sum to {total} but x has {x_rows} rows; pass one count per "
                             "group, summing to x's rows")
    q = C.QTensor(h, x_rows, cols)
    q.scale_swizzled = 1 if swizzled else 0
    end = offs[n]
    bufs = {}
    for i, (want, name) in enumerate(((rowwise, "rowwise"), (columnwise, "columnwise"))):
        if not want:
            continue
        data = new("data", (end[2 * i],))
        if name == "rowwise":  # the whole tensor's rowwise data, [sum, row bytes]
            data = data.reshape(data_shape(f, _layout(f.name, x_rows, cols, C.BC_ROWWISE, bool(swizzled))))
        es = 4 if f.per_tensor else f.scale_bytes
        sc = new("f32", (n,)) if f.per_tensor else new("scale", (end[2 * i + 1] // es,))
        bufs[name + "_data"], bufs[name + "_scale_inv"] = data, sc
    amax = new("f32", (n,)) if (f.per_tensor or f.two_level) else None
    scale = new("f32", (n,)) if f.per_tensor else None
    return q, arr, GroupedTensor(f, tuple(arr), int(cols), offs, bufs.get("rowwise_data"), bufs.get("rowwise_scale_inv"),
                                 bufs.get("columnwise_data"), bufs.get("columnwise_scale_inv"), amax, scale,
                                 bool(swizzled) and not f.per_tensor)


def grouped_ptrs(q, gt, ptr):
    """Point the bc_qtensor q at the GroupedTensor gt's buffers (ptr: an array's address)."""
    for k in _GFIELDS + ("amax", "scale"):
        v = getattr(gt, k)
        if v is not None:
            setattr(q, k, ptr(v))


# ---- element and scale dtypes ----------------------------------------------------------------

_TORCH_DT = {}
if torch is not None:
    _TORCH_DT = {torch.float32: C.BC_FP32, torch.bfloat16: C.BC_BF16, torch.float16: C.BC_FP16}


def torch_data_dtype(f):
    """The torch dtype of a format's data: fp8 elements as float8, e2m1 as float4_e2m1fn_x2, other sub-byte
    elements (6-bit: four in three bytes) as uint8."""
    if f.element == "e4m3" and hasattr(torch, "float8_e4m3fn"):
        return torch.float8_e4m3fn
    if f.element == "e5m2" and hasattr(torch, "float8_e5m2"):
        return torch.float8_e5m2
    if f.element == "e2m1" and hasattr(torch, "float4_e2m1fn_x2"):
        return torch.float4_e2m1fn_x2
    return torch.uint8


def torch_scale_dtype(f):
    if f.per_tensor or f.scale_type == "fp32":
        return torch.float32
    if f.scale_type == "e8m0" and hasattr(torch, "float8_e8m0fnu"):
        return torch.float8_e8m0fnu
    if f.scale_type == "ue4m3" and hasattr(torch, "float8_e4m3fn"):
        return torch.float8_e4m3fn
    return torch.uint8


def data_shape(f, lay):
    """Shape of the data buffer in its dtype's units: sub-byte data is bytes (two 4-bit elements a
    byte, four 6-bit elements in three)."""
    if f.element_bits < 8:
        return (lay.data_rows, lay.data_cols * f.element_bits // 8)
    return (lay.data_rows, lay.data_cols)


def scale_shape(f, lay):
    return (1,) if f.per_tensor else (lay.scale_rows, lay.scale_cols)


def _own(t):
    """A copy of a one-element fp32 array (None stays None)."""
    if t is None:
        return None
    return t.clone() if torch is not None and isinstance(t, torch.Tensor) else t.copy()


def _piece(fn, arg, t, off, nbytes, shape):
    """Bytes [off, off + nbytes) of the dense array t, as a view of `shape` in t's dtype."""
    is_torch = torch is not None and isinstance(t, torch.Tensor)
    dense = t.is_contiguous() if is_torch else bool(t.flags["C_CONTIGUOUS"])
    esize = t.element_size() if is_torch else t.itemsize
    have = (t.numel() if is_torch else t.size) * esize
    if not dense or off % esize or nbytes % esize or off + nbytes > have:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} holds {have} bytes (contiguous: {dense}); the slice needs bytes "
                             f"[{off}, {off + nbytes}) of a dense buffer")
    if is_torch:  # through bytes: slicing is plain for every dtype (float4_e2m1fn_x2 included)
        b = t.view(torch.uint8) if esize == 1 else t
        return b.reshape(-1)[off // esize:(off + nbytes) // esize].view(shape).view(t.dtype)
    return t.reshape(-1)[off // esize:(off + nbytes) // esize].reshape(shape)


def flat2d(x, fn, arg, is_torch):
    """(rows, cols, row_stride) of x seen as a 2D matrix: leading dims flattened (they must be
    collapsible without a copy), the last dim contiguous."""
    if is_torch and x.dim() == 2:  # the common case, without the general walk below
        rows, cols = x.shape
        s0, s1 = x.stride()
        if rows > 0 and cols > 0 and (s1 == 1 or cols == 1) and (rows == 1 or s0 >= cols):
            return rows, cols, (s0 if rows > 1 else cols)
    shape = tuple(x.shape)
    if len(shape) == 0:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} is a scalar; expected a tensor of at least one dimension")
    if is_torch:
        strides = x.stride()
        esize = 1
    else:
        esize = x.itemsize
        strides = tuple(s // esize for s in x.strides)
    cols = shape[-1]
    if 0 in shape:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has shape {shape}, with no elements; expected at least one "
                             "row and one column")
    if cols > 1 and strides[-1] != 1:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has strides {tuple(strides)}: its last dimension must be "
                             f"contiguous (stride 1); pass {arg}.contiguous()")
    rows = 1
    for s in shape[:-1]:
        rows *= s
    lead = [(shape[i], strides[i]) for i in range(len(shape) - 1) if shape[i] > 1]
    if not lead:
        return rows, cols, cols
    # leading dims must step by whole rows (outer stride == inner stride * inner size)
    for (n0, s0), (n1, s1) in zip(lead, lead[1:]):
        if s0 != s1 * n1:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has shape {shape} and strides {tuple(strides)}: its "
                                 f"leading dimensions cannot be flattened into rows without a copy; pass {arg}.contiguous()")
    ld = lead[-1][1]
    if ld < cols:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: {arg} has shape {shape} and strides {tuple(strides)}: its rows "
                             f"overlap (row stride {ld} < {cols} columns); pass {arg}.contiguous()")
    return rows, cols, ld


def delayed_args(fn, fmt, history, scale, algo, arrays_ok):
    """(format, handle, L, n, algo code) of a delayed-scaling update; arrays_ok(t) says whether t
    is a dense fp32 array of the right kind (device or host)."""
    f, h = handle(fmt)
    if algo not in C.AMAX_ALGOS:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: algo is {algo!r}; expected 'max' or 'most_recent'")
    if not arrays_ok(history) or len(history.shape) != 2:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: history must be a contiguous float32 [history_len, n] array")
    L, n = history.shape
    if not arrays_ok(scale) or tuple(scale.shape) != (n,):
        raise BlockcastError("BC_ERR_ARG", f"{fn}: scale must be a contiguous float32 [{n}] array (one per tensor)")
    return f, h, int(L), int(n), C.AMAX_ALGOS[algo]
