"""blockcast: low-precision formats for training (FP8 per tensor and in blocks, MXFP8, MXFP4,
NVFP4, and any format written as a spec) on torch tensors.

    import torch, blockcast as bc
    fmt = bc.format("mxfp8_e4m3")
    q = bc.quantize(x, fmt, rowwise=True, columnwise=True)   # x: a CUDA bf16/fp16/fp32 tensor
    y = bc.dequantize(q, "rowwise")                           # bf16, same shape as x's 2D view

GPU operations take CUDA tensors and run on the current stream; blockcast.Comm and the
collectives (amax_allreduce, quantize_comm, all_gather, all_gather_quantized) take a communicator
at each call; blockcast.ref runs the CPU
reference on numpy arrays or CPU tensors. A failed call raises BlockcastError with the
library's status and message.
"""
from ._capi import BlockcastError, library_path
from .core import Format, GroupedTensor, Layout, QuantizedTensor, formats, get_format, layout, load_spec
from .core import get_format as format  # blockcast.format(name); not in __all__ (a star import would hide the builtin)
from . import ref

__version__ = "0.1.0"
__all__ = ["BlockcastError", "Format", "GroupedTensor", "Layout", "QuantizedTensor", "get_format", "formats", "layout", "load_spec", "ref",
           "amax", "compute_scale", "empty", "quantize", "quantize_cast", "quantize_grouped", "quantize_list", "dequantize", "scale_swizzle", "delayed_scale_update",
           "library_path", "Comm", "comm_id", "amax_allreduce", "quantize_comm", "all_gather", "all_gather_quantized",
           "shard_cast", "shard_finish"]

try:
    import torch as _torch
except ImportError:  # the CPU reference with numpy needs no torch
    _torch = None

if _torch is not None:
    from .ops import (amax, compute_scale, delayed_scale_update, dequantize, empty, quantize, quantize_cast, quantize_grouped,
                      quantize_list, scale_swizzle)
    from .comm import (Comm, all_gather, all_gather_quantized, amax_allreduce, comm_id, quantize_comm, shard_cast,
                       shard_finish)
else:
    def _needs_torch(*a, **k):
        raise ImportError("blockcast's GPU operations take torch tensors: install torch (blockcast.ref works with numpy)")
    amax = compute_scale = delayed_scale_update = dequantize = empty = quantize = quantize_cast = quantize_list = _needs_torch
    quantize_grouped = _needs_torch
    scale_swizzle = _needs_torch
    Comm = all_gather = all_gather_quantized = amax_allreduce = comm_id = quantize_comm = _needs_torch
    shard_cast = shard_finish = _needs_torch
