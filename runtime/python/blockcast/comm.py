"""Collectives over a communicator (blockcast.h: bc_comm): the amax all-reduce, quantize with the
amax reduced over the group, and the exact quantized all-gather along the first dimension.

A Comm is passed to each call that communicates; a Format never holds one, so forward and
backward may reduce over different groups. Two transports, the same calls and results:

    comms = blockcast.Comm.local(4)          # 4 ranks for 4 threads of this process (one GPU is fine)
    comm = blockcast.Comm.nccl("/shared/run.id", world_size, rank)   # one process per GPU, NCCL

Calls are asynchronous on the current CUDA stream (no call waits for the GPU). Every rank makes
the same calls in the same order; the local transport's threads wait for each other inside the
library (the GIL is released there), so each rank needs a thread of its own. An argument error
found by the library fails every rank of the call; one raised here in Python, before the call
(not a Comm, a closed Comm, a CPU tensor, a rows list of the wrong length), fails this rank only,
and the others then wait until $BLOCKCAST_COMM_TIMEOUT (local) or forever (NCCL).
"""
import ctypes

import torch

from . import _capi as C
from ._capi import BlockcastError
from .core import _TORCH_DT, QuantizedTensor, check_dirs, handle
from .ops import _check_cuda, _current_context, _hp, _launch, _no_out_compiled, _on_device, _out, _qt_in, _stream

__all__ = ["Comm", "comm_id", "amax_allreduce", "quantize_comm", "all_gather", "all_gather_quantized", "shard_cast",
           "shard_finish"]


class Comm:
    """One rank's communicator. Comm.local(n) makes the n ranks of a local group, Comm.nccl(...)
    an NCCL one from an id file or environment variable, Comm.from_nccl(ptr) wraps an ncclComm_t
    made elsewhere. close() (or leaving a `with` block, or garbage collection) releases it."""

    __slots__ = ("_h", "_dev", "__weakref__")

    def __init__(self, handle, device=None):
        self._h = handle
        self._dev = device  # an NCCL communicator's CUDA device (None: any, or not known)

    @classmethod
    def local(cls, nranks):
        """The nranks ranks of a new local group: a list, entry r for the thread of rank r."""
        n = int(nranks)
        arr = (ctypes.c_void_p * max(n, 1))()
        C.call(C.bc_comm_create_local, n, arr)
        return [cls(ctypes.c_void_p(arr[i])) for i in range(n)]

    @classmethod
    def nccl(cls, where, world_size, rank, timeout=60.0, device=None):
        """where: "env:NAME" (the id's hex in $NAME, e.g. from `blockcast comm-id` or comm_id()) or a
        file path (rank 0 writes a fresh id there; the others wait up to `timeout` seconds).
        device: this rank's GPU (an index, "cuda:N" or a torch.device; default torch's current
        device, which a process that never called torch.cuda.set_device has at 0 on every rank).
        The collectives then take tensors on that device only. torch's current device is left as
        it was (tensors made with device="cuda" land there: call torch.cuda.set_device too)."""
        if device is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        else:
            dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
            if dev.type != "cuda":
                raise BlockcastError("BC_ERR_ARG", f"Comm.nccl: device is {dev}; an NCCL communicator is made on a CUDA device")
            if dev.index is None:
                dev = torch.device("cuda", torch.cuda.current_device())
        h = ctypes.c_void_p()
        with _on_device(dev):  # NCCL takes the current device; the library the current context
            _current_context(dev.index)
            C.call(C.bc_comm_bootstrap, str(where).encode(), int(world_size), int(rank), float(timeout), ctypes.byref(h))
        return cls(h, dev)

    def _check_device(self, fn, dev):
        if self._dev is not None and dev is not None and dev != self._dev:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: the tensors are on {dev} but the communicator was made on {self._dev}; "
                                 "pass tensors of the communicator's device")

    @classmethod
    def from_nccl(cls, nccl_comm):
        """Wrap an ncclComm_t (an integer pointer, e.g. from another NCCL binding); closing the Comm
        leaves it to its owner. Its device is not known here, so tensors are not checked against it."""
        h = ctypes.c_void_p()
        C.call(C.bc_comm_wrap_nccl, ctypes.c_void_p(int(nccl_comm)), ctypes.byref(h))
        return cls(h)

    def _info(self):
        if self._h is None:
            raise BlockcastError("BC_ERR_ARG", "Comm: this communicator was closed")
        info = C.CommInfo()
        C.call(C.bc_comm_get_info, self._h, ctypes.byref(info))
        return info

    rank = property(lambda self: self._info().rank, doc="this rank")
    size = property(lambda self: self._info().size, doc="the number of ranks")
    transport = property(lambda self: C.BC_TRANSPORTS.get(self._info().transport, "?"), doc='"nccl" or "local"')
    bytes_sent = property(lambda self: self._info().bytes_sent, doc="bytes this rank has contributed to collectives")
    collectives = property(lambda self: self._info().collectives, doc="collectives this rank has issued")

    def close(self):
        if self._h is not None:
            C.bc_comm_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._h is None:
            return "Comm(closed)"
        i = self._info()
        return f"Comm({C.BC_TRANSPORTS.get(i.transport, '?')}, rank {i.rank} of {i.size})"


def _comm(fn, comm):
    if not isinstance(comm, Comm):
        raise BlockcastError("BC_ERR_ARG", f"{fn}: comm is a {type(comm).__name__}; expected a blockcast.Comm")
    if comm._h is None:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: the communicator was closed")
    return comm._h


def comm_id():
    """A fresh NCCL unique id as 256 hex digits (for an environment variable read by Comm.nccl("env:NAME", ...))."""
    buf = ctypes.create_string_buffer(128)
    C.call(C.bc_comm_id_create, buf)
    out = ctypes.create_string_buffer(257)
    C.call(C.bc_comm_id_to_string, buf, out)
    return out.value.decode()


def amax_allreduce(amax, comm):
    """amax (a float32 CUDA tensor, contiguous) = its MAX over the ranks, in place: one collective
    for all its elements. Returns amax."""
    h = _comm("amax_allreduce", comm)
    _check_cuda("amax_allreduce", "amax", amax)
    comm._check_device("amax_allreduce", amax.device)
    if amax.dtype != torch.float32 or not amax.is_contiguous():
        raise BlockcastError("BC_ERR_ARG", f"amax_allreduce: amax is {amax.dtype} (contiguous: {amax.is_contiguous()}); "
                             "expected a contiguous float32 CUDA tensor")
    _launch(amax.device, C.bc_amax_allreduce, h, amax.data_ptr(), amax.numel(), _stream(amax.device))
    return amax


def _rows_of(fn, comm, rows, m):
    n = Comm.size.fget(comm)
    if rows is None:
        rows = [m] * n
    rows = [int(r) for r in rows]
    if len(rows) != n:
        raise BlockcastError("BC_ERR_ARG", f"{fn}: rows has {len(rows)} entries but the communicator has {n} ranks; "
                             "pass every rank's row count")
    return (ctypes.c_int64 * n)(*rows), sum(rows)


def _hp_rows(fn, x):
    """bc_tensor of x, which may have no rows (a rank holding nothing)"""
    if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == 0 and x.numel() == 0:
        _check_cuda(fn, "x", x)
        cols = x.shape[-1] if x.dim() > 1 else 0
        dt = _TORCH_DT.get(x.dtype)
        if dt is None:
            raise BlockcastError("BC_ERR_ARG", f"{fn}: x has dtype {x.dtype}; expected torch.float32, torch.bfloat16 or torch.float16")
        return C.Tensor(None, dt, 0, cols, cols)
    return _hp(fn, x)


def quantize_comm(x, fmt, comm, *, rowwise=True, columnwise=False, swizzled=False):
    """quantize() with the amax reduced over comm (per-tensor formats: current scaling with the
    group's amax; NVFP4: the group's global amax); other block formats need no communication.
    Every rank calls it with its own x (which may have 0 rows: it still takes part)."""
    h = _comm("quantize_comm", comm)
    f, fh = handle(fmt)
    check_dirs("quantize_comm", f, rowwise, columnwise)
    t = _hp_rows("quantize_comm", x)
    comm._check_device("quantize_comm", x.device)
    if t.rows:
        q, (rd, rs, cd, cs, amax, scale) = _out(f, t.rows, t.cols, rowwise, columnwise, swizzled, x.device)
    else:  # nothing to write but the group's amax (and scale)
        q, (rd, rs, cd, cs, amax, scale) = _out(f, 0, t.cols, False, False, False, x.device)
    q.format = fh
    _launch(x.device, C.bc_quantize_comm, h, ctypes.byref(t), ctypes.byref(q), _stream(x.device))
    return QuantizedTensor(f, (t.rows, t.cols), rd, rs, cd, cs, amax, scale, bool(swizzled))


def _gather_out(fn, f, out, total, cols, rowwise, columnwise, swizzled, dev):
    """(bc_qtensor, result, device) of the gathered tensor: new buffers, or out's (checked)."""
    if out is None:
        q, (rd, rs, cd, cs, amax, scale) = _out(f, total, cols, rowwise, columnwise, swizzled, dev)
        return q, QuantizedTensor(f, (total, cols), rd, rs, cd, cs, amax, scale, bool(swizzled)), dev
    q, _, odev = _qt_in(fn, "out", out, fmt=f, shape=(total, cols), dirs=(rowwise, columnwise), swizzled=swizzled, dev=dev,
                        tensor_scale=True)
    return q, out, odev or dev


def all_gather(x, fmt, comm, *, rows=None, rowwise=True, columnwise=False, swizzled=False, out=None):
    """The quantized all-gather along the first dimension: x is this rank's rows (leading dims
    flattened; may have 0 rows), rows every rank's row count, the same list on every rank (None:
    every rank has this rank's count; for unequal splits pass the list: over NCCL a rank cannot
    see the others' counts, and ranks that disagree corrupt the gather or wait).
    Returns the whole tensor's QuantizedTensor, bit-identical to quantize() of the concatenated
    rows on one GPU (per-tensor and NVFP4 formats with the whole tensor's amax).
    out: a QuantizedTensor of the whole shape, this format, exactly the asked directions and
    swizzle (blockcast.empty) written in place and returned."""
    h = _comm("all_gather", comm)
    _no_out_compiled("all_gather", out)
    f, fh = handle(fmt)
    check_dirs("all_gather", f, rowwise, columnwise)
    t = _hp_rows("all_gather", x)
    comm._check_device("all_gather", x.device)
    r, total = _rows_of("all_gather", comm, rows, t.rows)
    q, res, _ = _gather_out("all_gather", f, out, total, t.cols, rowwise, columnwise, swizzled, x.device)
    q.format = fh
    _launch(x.device, C.bc_all_gather, h, ctypes.byref(t), r, ctypes.byref(q), _stream(x.device))
    return res


def all_gather_quantized(q, comm, *, rows=None, rowwise=True, columnwise=False, swizzled=False, out=None):
    """The all-gather of this rank's already quantized rows q (a QuantizedTensor, e.g. from
    quantize_comm); see blockcast.h bc_all_gather_quantized for when it is exact and when it
    dequantizes first. out: as all_gather's. Where q is out.row_slice(this rank's first row,
    its count) (quantize_cast(..., out=that slice) wrote the rank's rows in place) the gather
    moves nothing of the rank's own: the fastest path (delayed scaling's cast + gather)."""
    h = _comm("all_gather_quantized", comm)
    _no_out_compiled("all_gather_quantized", out)
    xq, f, dev = _qt_in("all_gather_quantized", "q", q)
    fh = xq.format
    check_dirs("all_gather_quantized", f, rowwise, columnwise)
    m, cols = (int(v) for v in q.shape)
    # (a rank without rows may have no tensor at all: the current device)
    if dev is None:
        dev = out.rowwise_data.device if out is not None and out.rowwise_data is not None else \
            comm._dev or torch.device("cuda", torch.cuda.current_device())
    r, total = _rows_of("all_gather_quantized", comm, rows, m)
    comm._check_device("all_gather_quantized", dev)
    oq, res, dev = _gather_out("all_gather_quantized", f, out, total, cols, rowwise, columnwise, swizzled, dev)
    comm._check_device("all_gather_quantized", dev)
    oq.format = fh
    _launch(dev, C.bc_all_gather_quantized, h, ctypes.byref(xq), r, ctypes.byref(oq), _stream(dev))
    return res


def shard_cast(shards, comm, *, columnwise=False, swizzled=False, scales=None):
    """The sharded cast of master weights (ZeRO / FSDP; blockcast.h bc_shard_cast): shards is a
    list of (data, start, shape, fmt): data this rank's master elements [start, start + len) of
    the weight of `shape` flattened row by row (a 1D CUDA float32 / bfloat16 / float16 tensor;
    empty: the rank holds nothing of it and still takes part). One all-reduce for the list.
    Returns one QuantizedTensor per weight: the whole weight's buffers, zeroed, with only what
    this rank owns written (its codes, the scales of the blocks whose first element it holds;
    per-tensor and two-level formats: amax and scale, the group's). The ranks' data and block
    scale buffers summed byte by byte (torch.distributed.all_reduce of uint8 views, SUM) are
    bit-identical to quantize() of the whole weight; not the per-tensor formats' scale_inv, amax
    and scale, which every rank already holds (summed, they would be W times too large).
    columnwise: 1D-block formats cast both directions here; per-tensor and 2D formats build theirs
    after the gather (shard_finish).
    scales: None (current scaling) or, per weight, None or a float32 CUDA tensor of one element
    holding a given scale (delayed scaling, per-tensor formats)."""
    h = _comm("shard_cast", comm)
    shards = list(shards)
    n = len(shards)
    if scales is not None and len(scales) != n:
        raise BlockcastError("BC_ERR_ARG", f"shard_cast: {n} shards but {len(scales)} scales; pass one per weight (or None)")
    arr = (C.Shard * max(n, 1))()
    qs = (C.QTensor * max(n, 1))()
    out = []
    dev = None
    for i, sh in enumerate(shards):
        try:
            data, start, shape, fmt = sh
        except (TypeError, ValueError):
            raise BlockcastError("BC_ERR_ARG", f"shard_cast: shard {i} is {type(sh).__name__}; expected (data, start, shape, fmt)") from None
        f, fh = handle(fmt)
        _check_cuda("shard_cast", f"shard {i} data", data)
        dt = _TORCH_DT.get(data.dtype)
        if dt is None or not data.is_contiguous():
            raise BlockcastError("BC_ERR_ARG", f"shard_cast: shard {i} data is {data.dtype} (contiguous: {data.is_contiguous()}); "
                                 "expected a contiguous float32, bfloat16 or float16 CUDA tensor")
        rows, cols = (int(v) for v in shape)
        if dev is not None and data.device != dev:
            raise BlockcastError("BC_ERR_ARG", f"shard_cast: shard {i} data is on {data.device} but shard 0's on {dev}; "
                                 "pass the shards of one device")
        dev = data.device
        col = bool(columnwise) and f.block == "1d"
        q, tens = _out(f, rows, cols, True, col, swizzled, dev)
        for t in tens[:4]:
            if t is not None:
                t.view(torch.uint8).zero_()
        q.format = fh
        given = 0
        if scales is not None and scales[i] is not None:
            if not f.per_tensor:
                raise BlockcastError("BC_ERR_ARG", f"shard_cast: weight {i}: a given scale is for per-tensor formats; '{f.name}' scales blocks")
            tens[5].copy_(scales[i].reshape(1))
            given = 1
        arr[i] = C.Shard(data.data_ptr() if data.numel() else None, dt, int(start), int(data.numel()), given)
        qs[i] = q
        out.append(QuantizedTensor(f, (rows, cols), *tens, bool(swizzled)))
    if dev is None:
        dev = comm._dev or torch.device("cuda", torch.cuda.current_device())
    comm._check_device("shard_cast", dev)
    _launch(dev, C.bc_shard_cast, h, n, arr, qs, _stream(dev))
    return out


def shard_finish(qs):
    """After the gather: the columnwise copies of per-tensor and 2D-block formats from the gathered
    rowwise data of each QuantizedTensor in qs (blockcast.h bc_shard_finish; others are returned as
    they are). Returns the list with those copies added."""
    qs = list(qs)
    arr = (C.QTensor * max(len(qs), 1))()
    res, dev, m = [], None, 0
    for q in qs:
        f, fh = handle(q.format)
        if f.block == "1d" or not f.has_columnwise:
            res.append(q)
            continue
        rows, cols = q.shape
        dev = q.rowwise_data.device
        _, tens = _out(f, rows, cols, False, True, q.scale_swizzled, dev)
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        arr[m] = C.QTensor(fh, rows, cols, ptr(q.rowwise_data), ptr(q.rowwise_scale_inv), tens[2].data_ptr(), tens[3].data_ptr())
        arr[m].scale_swizzled = 1 if q.scale_swizzled else 0
        m += 1
        res.append(q._replace(columnwise_data=tens[2], columnwise_scale_inv=tens[3]))
    if m:
        _launch(dev, C.bc_shard_finish, m, arr, _stream(dev))
    return res
