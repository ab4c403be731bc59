"""The explicit reference of blockcast.torch.Linear: every operand quantized and dequantized with
blockcast (each direction from the same quantization), the three GEMMs written out with torch
matmuls in float32. Shared by test_torch_cpu.py and test_gpu.py."""
import torch

import blockcast as bc
from blockcast import ref as bref


def _m(t):
    return bc if t.is_cuda else bref


def deq(q, direction):
    """Direction of q dequantized to float32 as the logical [rows, cols] matrix."""
    t = _m(q.data(direction)).dequantize(q, direction, dtype=torch.float32)
    if direction == "columnwise" and q.format.columnwise_transposed:
        t = t.t()
    return t


def quant(x, op, scale=None, seed=0, offset=0):
    m = _m(x)
    f = bc.format(op.format)
    if scale is not None:
        return m.quantize_cast(x, f, scale=scale, rowwise=True, columnwise=True,
                               stochastic_rounding=op.stochastic_rounding, seed=seed, offset=offset)
    return m.quantize(x, f, rowwise=True, columnwise=True, stochastic_rounding=op.stochastic_rounding, seed=seed,
                      offset=offset)


def linear(recipe, x, w, b, dy, scales=(None, None, None), seed=0, offset=0):
    """(y, dx, dw, db) of y = x @ w^T + b with quantized operands, in float32. scales: the
    per-tensor scales delayed scaling uses (None: current scaling)."""
    x2 = x.reshape(-1, x.shape[-1])
    dy2 = dy.reshape(-1, w.shape[0])
    qx, qw = quant(x2, recipe.input, scales[0]), quant(w, recipe.weight, scales[1])
    qdy = quant(dy2.contiguous(), recipe.grad_output, scales[2], seed, offset)
    y = deq(qx, "rowwise") @ deq(qw, "rowwise").t()
    if b is not None:
        y = y + b.float()
    dx = deq(qdy, "rowwise") @ deq(qw, "columnwise")
    dw = deq(qdy, "columnwise").t() @ deq(qx, "columnwise")
    db = dy2.float().sum(0) if b is not None else None
    return y.reshape(*x.shape[:-1], w.shape[0]), dx.reshape(x.shape), dw, db


def rel(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))
