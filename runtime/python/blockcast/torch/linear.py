"""blockcast.torch.Linear: a drop-in torch.nn.Linear whose three GEMMs read quantized operands.

    forward  y  = x  @ w^T    x rowwise,     w rowwise      (both read along K)
    dgrad    dx = dy @ w      dy rowwise,    w columnwise   (read along N)
    wgrad    dw = dy^T @ x    dy columnwise, x columnwise   (read along M)

Each operand is quantized once, into both of its directions from one read (the input keeps only
its columnwise copy for the backward). A GEMM runs through torch._scaled_mm where torch takes the
format on this GPU (FP8 per tensor; 1x128 x 128x128 blocks), checked once per kind of GEMM against
the emulation; otherwise it is emulated: both operands dequantized with blockcast and multiplied
by torch (the same numbers the format holds, labelled as emulation: no speed claim).
On CPU tensors every step runs through the CPU reference (blockcast.ref)."""
import itertools

import torch
from torch import nn

import blockcast as _bc
from .. import ref as _ref
from .._capi import BlockcastError
from ..core import get_format
from .recipe import get_recipe

_IN, _W, _DY = 0, 1, 2
_ROLES = ("input", "weight", "grad_output")
_ROW, _COL = "rowwise", "columnwise"
_seeds = itertools.count(0x5EED)


def _compiling():
    c = getattr(torch, "compiler", None)
    return c is not None and c.is_compiling()


# ---- one operand -------------------------------------------------------------------------------

def _quantize(x, f, op, rowwise, columnwise, scale=None, amax=None, seed=0, offset=0):
    sr = op.stochastic_rounding
    if not sr:
        offset = 0
    elif isinstance(offset, torch.Tensor) and not x.is_cuda:  # the CPU reference takes the counter's value
        offset, _ = int(offset[0]), offset.add_(1)
    given = scale is not None or amax is not None
    m = _bc if x.is_cuda else _ref
    if given:
        return m.quantize_cast(x, f, scale=scale, amax=amax, rowwise=rowwise, columnwise=columnwise,
                               stochastic_rounding=sr, seed=seed, offset=offset)
    return m.quantize(x, f, rowwise=rowwise, columnwise=columnwise, stochastic_rounding=sr, seed=seed, offset=offset)


def _amax(x):
    if x.is_cuda:
        return _bc.amax(x)
    return torch.tensor([_ref.amax(x)], dtype=torch.float32)


def _reduce(a, comm):
    if comm is not None:
        if not a.is_cuda:
            raise BlockcastError("BC_ERR_ARG", "blockcast.torch.Linear: an amax communicator needs CUDA tensors "
                                 "(the CPU reference has no collectives)")
        _bc.amax_allreduce(a, comm)
    return a


def quantize_operand(x, recipe, slot, rowwise, columnwise, *, comm=None, state=None, update=False, seed=0, offset=0):
    """Quantize operand `slot` (0 input, 1 weight, 2 grad_output) of `recipe` into the asked
    directions. Delayed scaling reads the scale in state (history [3, L, 1], scale [3, 1],
    scale_inv [3, 1]); update: first refresh the scale from the history, then record this
    tensor's amax (reduced over comm) as the newest entry. Current scaling with comm: per-tensor
    and two-level formats scale by the amax reduced over comm; block formats need none."""
    op = recipe.operands()[slot]
    f = get_format(op.format)
    if op.scaling == "delayed":
        if state is None:
            raise BlockcastError("BC_ERR_ARG", f"recipe '{recipe.name}': {_ROLES[slot]} uses delayed scaling and needs "
                                 "its amax history (a blockcast.torch.Linear holds one)")
        hist, scale, scale_inv = state[0][slot], state[1][slot], state[2][slot]
        if update:
            m = _bc if hist.is_cuda else _ref
            m.delayed_scale_update(f, hist, scale, scale_inv, margin=recipe.margin, algo=recipe.amax_algo)
            hist[0].copy_(_reduce(_amax(x), comm))
        return _quantize(x, f, op, rowwise, columnwise, scale=scale, seed=seed, offset=offset)
    if comm is not None and (f.per_tensor or f.two_level):
        a = _reduce(_amax(x), comm)
        if f.per_tensor:
            s, _ = _bc.compute_scale(f, a)
            return _quantize(x, f, op, rowwise, columnwise, scale=s)._replace(amax=a)
        return _quantize(x, f, op, rowwise, columnwise, amax=a, seed=seed, offset=offset)
    return _quantize(x, f, op, rowwise, columnwise, seed=seed, offset=offset)


# ---- GEMMs -------------------------------------------------------------------------------------

def _operand(q, d, dtype):
    """Direction d of q dequantized, as [rows, contraction] (MXFP8's columnwise copy is stored
    untransposed: its transpose is a view)."""
    t = (_bc if q.data(d).is_cuda else _ref).dequantize(q, d, dtype=dtype)
    if d == _COL and not q.format.columnwise_transposed:
        t = t.t()
    return t


def _emulated(qa, da, qb, db, dtype):
    return _operand(qa, da, dtype) @ _operand(qb, db, dtype).t()


def _scaled_view(q, d, rows, k):
    """The scale_inv of direction d of q as torch._scaled_mm reads it: per tensor as is; 1x128
    blocks [rows, K/128] (M-major); 128x128 blocks [rows/128, K/128]."""
    s = q.scale_inv(d)
    f = q.format
    if f.per_tensor:
        return s
    kb = -(-k // 128)
    if f.block_rows == 1:
        return s[:kb, :rows].t()
    return s[:-(-rows // 128), :kb]


def _scaled(qa, da, qb, db, dtype):
    a, b = qa.data(da), qb.data(db)
    m, k = a.shape
    n = b.shape[0]
    sa = _scaled_view(qa, da, m, k)
    sb = _scaled_view(qb, db, n, k)
    if not qb.format.per_tensor:
        sb = sb.t()
    return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=dtype)


# (format A, direction A, format B, direction B, dtype, shape class) -> True: torch._scaled_mm,
# False: emulation; decided on first use by one scaled product checked against the emulation.
_PATHS = {}
_PATH_NOTES = {}


_CAPS = {}


def _capability(dev):
    """The device's compute capability, asked once per device in eager mode (every GEMM needs it)."""
    if _compiling():
        return torch.cuda.get_device_capability(dev)
    c = _CAPS.get(dev)
    if c is None:
        c = _CAPS[dev] = torch.cuda.get_device_capability(dev)
    return c


def _scaled_key(qa, da, qb, db, dtype):
    fa, fb = qa.format, qb.format
    if not (qa.data(da).is_cuda and hasattr(torch, "_scaled_mm") and fa.element_bits == 8 and fb.element_bits == 8):
        return None
    if _capability(qa.data(da).device) < (8, 9):
        return None
    for q, d in ((qa, da), (qb, db)):
        if d == _COL and not q.format.columnwise_transposed:
            return None
    if fa.element == "e5m2" and fb.element == "e5m2":
        return None  # no e5m2 x e5m2 product on these GPUs
    pair = (fa.block, fa.block_rows, fa.block_cols, fb.block, fb.block_rows, fb.block_cols)
    if not (fa.per_tensor and fb.per_tensor) and pair != ("1d", 1, 128, "2d", 128, 128):
        return None  # the other block pairs: emulated
    m, k = qa.data(da).shape
    n = qb.data(db).shape[0]
    if m % 16 or n % 16 or k % 16:
        return None
    if not fa.per_tensor and (k % 128 or m % 4 or (k // 128) % 4):
        return None  # the padded scale matrices are views torch takes only in these shapes
    return (fa.name, da, fb.name, db, dtype)


def _decide(key, qa, da, qb, db, dtype):
    try:
        got = _scaled(qa, da, qb, db, dtype).float()
    except Exception as e:  # noqa: BLE001 - torch says which shapes and layouts it takes
        _PATHS[key] = False
        _PATH_NOTES[key] = f"emulated: torch._scaled_mm refused it ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        return False
    ref = _emulated(qa, da, qb, db, torch.float32)
    rel = float((got - ref).norm() / ref.norm().clamp_min(1e-30))
    ok = rel < 2e-2
    _PATHS[key] = ok
    _PATH_NOTES[key] = (f"torch._scaled_mm (relative difference from the emulation {rel:.1e} on first use)" if ok else
                        f"emulated: torch._scaled_mm differed from the emulation by {rel:.1e}")
    return ok


def gemm(qa, da, qb, db, dtype):
    """A @ B^T from direction da of qa ([m, k]) and direction db of qb ([n, k]), both read along k."""
    key = _scaled_key(qa, da, qb, db, dtype)
    if key is not None:
        ok = _PATHS.get(key)
        if ok is None and not _compiling():
            ok = _decide(key, qa, da, qb, db, dtype)
        if ok:
            return _scaled(qa, da, qb, db, dtype)
    return _emulated(qa, da, qb, db, dtype)


def gemm_paths():
    """How each kind of GEMM met so far ran: {(format A, direction, format B, direction, dtype): note}."""
    return dict(_PATH_NOTES)


# ---- the layer ---------------------------------------------------------------------------------

_QFIELDS = ("rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax", "scale")


def _pack(q):
    return [getattr(q, n) for n in _QFIELDS] if q is not None else [None] * 6


def _unpack(f, shape, t, swizzled=False):
    return _bc.QuantizedTensor(f, shape, *t, swizzled)


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, hist, scale, scale_inv, recipe, qweight, amax_comm, grad_comm, update, seed,
                offset):
        k = x.shape[-1]
        x2 = x.reshape(-1, k)
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        state = (hist, scale, scale_inv) if hist is not None else None
        qx = quantize_operand(x2, recipe, _IN, True, need_dw, comm=amax_comm, state=state, update=update, seed=seed,
                              offset=offset)
        qw = qweight
        if qw is None:
            qw = quantize_operand(weight, recipe, _W, True, need_dx, comm=amax_comm, state=state, update=update,
                                  seed=seed, offset=offset)
        y = gemm(qx, _ROW, qw, _ROW, x.dtype)
        if bias is not None:
            y = y + bias.to(y.dtype)
        ctx.recipe, ctx.grad_comm, ctx.update, ctx.seed, ctx.offset = recipe, grad_comm, update, seed, offset
        ctx.state = state  # module buffers updated in place every step: kept by reference, not saved
        ctx.shapes = (tuple(x.shape), x2.shape, tuple(weight.shape), weight.dtype, bias is not None,
                      bias.dtype if bias is not None else None)
        ctx.fmts = (qx.format, qw.format)
        keep_x = [None, None, qx.columnwise_data, qx.columnwise_scale_inv, qx.amax, None] if need_dw else [None] * 6
        keep_w = [None, None, qw.columnwise_data, qw.columnwise_scale_inv, qw.amax, None] if need_dx else [None] * 6
        ctx.save_for_backward(*keep_x, *keep_w)
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, dy):
        saved = ctx.saved_tensors
        xshape, x2shape, wshape, wdtype, has_bias, bdtype = ctx.shapes
        fx, fw = ctx.fmts
        state = ctx.state
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dy2 = dy.reshape(-1, wshape[0])
        if not dy2.is_contiguous():
            dy2 = dy2.contiguous()
        dx = dw = db = None
        if need_dx or need_dw:
            qdy = quantize_operand(dy2, ctx.recipe, _DY, need_dx, need_dw, comm=ctx.grad_comm, state=state,
                                   update=ctx.update, seed=ctx.seed, offset=ctx.offset)
            if need_dx:
                qw = _unpack(fw, wshape, saved[6:12])
                dx = gemm(qdy, _ROW, qw, _COL, dy.dtype).reshape(xshape)
            if need_dw:
                qx = _unpack(fx, tuple(x2shape), saved[0:6])
                dw = gemm(qdy, _COL, qx, _COL, dy.dtype).to(wdtype)
        if has_bias and ctx.needs_input_grad[2]:
            db = dy2.sum(0).to(bdtype)
        return dx, dw, db, None, None, None, None, None, None, None, None, None, None


def _autocast_dtype(x):
    if x.is_cuda and torch.is_autocast_enabled():
        get = getattr(torch, "get_autocast_dtype", None)
        return get("cuda") if get is not None else torch.get_autocast_gpu_dtype()
    return None


class Linear(nn.Linear):
    """torch.nn.Linear with quantized GEMMs (see the module's doc). recipe: a blockcast.torch.Recipe
    or the name of a built-in one (blockcast.torch.RECIPES). The recipe's delayed-scaling state
    (amax_history [3, L, 1], scale and scale_inv [3, 1]: input, weight, grad_output) is kept in
    buffers, saved and restored with the model's state_dict.

    forward(x, *, amax_comm=None, grad_amax_comm=None): the communicators (blockcast.Comm) over
    which this call's amaxes are reduced, the forward's (input and weight) and the backward's
    (output gradient), e.g. the tensor- or sequence-parallel group; given per call, never kept
    beyond the step's graph."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, *, recipe="fp8_current"):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._setup(recipe)

    def _setup(self, recipe):
        self.recipe = get_recipe(recipe)
        self.sr_seed = next(_seeds)
        self.sr_counter = torch.zeros(1, dtype=torch.int64)  # stochastic rounding's offset: +1 per such quantize
        self._sr = any(op.stochastic_rounding for op in self.recipe.operands())
        self._wcache = None
        if self.recipe.delayed:
            dev = self.weight.device
            L = self.recipe.history_len
            self.register_buffer("amax_history", torch.zeros(3, L, 1, dtype=torch.float32, device=dev))
            self.register_buffer("scale", torch.ones(3, 1, dtype=torch.float32, device=dev))
            self.register_buffer("scale_inv", torch.ones(3, 1, dtype=torch.float32, device=dev))
        else:
            self.amax_history = self.scale = self.scale_inv = None

    @classmethod
    def from_linear(cls, lin, recipe="fp8_current"):
        """A blockcast Linear sharing lin's weight and bias (no copy)."""
        if not isinstance(lin, nn.Linear):
            raise BlockcastError("BC_ERR_ARG", f"Linear.from_linear: expected a torch.nn.Linear, got {type(lin).__name__}")
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        m.in_features, m.out_features = lin.in_features, lin.out_features
        m.weight = lin.weight
        m.bias = lin.bias
        m._setup(recipe)
        return m

    def extra_repr(self):
        return super().extra_repr() + f", recipe={self.recipe.name}"

    def get_extra_state(self):
        return {"recipe": self.recipe.name, "sr_step": int(self.sr_counter[0])}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or state.get("recipe") != self.recipe.name:
            got = state.get("recipe") if isinstance(state, dict) else state
            raise BlockcastError("BC_ERR_ARG", f"blockcast.torch.Linear: the checkpoint was saved with recipe {got!r} "
                                 f"but this layer uses '{self.recipe.name}'; build the model with the checkpoint's recipe")
        self.sr_counter.fill_(int(state.get("sr_step", 0)))

    def _cached_weight(self, need_columnwise):
        c = self._wcache
        if c is None or _compiling():
            return None
        version, ptr, q = c
        if version != self.weight._version or ptr != self.weight.data_ptr():
            self._wcache = None
            return None
        if need_columnwise and q.columnwise_data is None:
            return None
        return q

    def forward(self, x, *, amax_comm=None, grad_amax_comm=None):
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != self.in_features:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise BlockcastError("BC_ERR_ARG", f"blockcast.torch.Linear: input has shape {shape}; expected [..., "
                                 f"{self.in_features}]")
        dt = _autocast_dtype(x)
        if dt is not None and x.dtype != dt:
            x = x.to(dt)
        if not x.is_contiguous():
            x = x.contiguous()
        grad = torch.is_grad_enabled()
        update = self.training and grad and self.recipe.delayed
        # stochastic rounding: every such quantization takes the next offset from the counter
        counter = self.sr_counter if self._sr else 0
        qw = self._cached_weight(grad and x.requires_grad)
        return _LinearFn.apply(x, self.weight, self.bias, self.amax_history, self.scale, self.scale_inv, self.recipe,
                               qw, amax_comm, grad_amax_comm, update, self.sr_seed, counter)


# ---- models ------------------------------------------------------------------------------------

def swap_linear(model, recipe="fp8_current", *, include=None):
    """Replace every torch.nn.Linear in model (in place; the parameters are shared, not copied)
    by a blockcast.torch.Linear with recipe, except where include(name, module) says False.
    Returns the names of the layers swapped."""
    recipe = get_recipe(recipe)
    swapped = []
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if type(child) is not nn.Linear:
                continue
            if include is not None and not include(full, child):
                continue
            setattr(parent, child_name, Linear.from_linear(child, recipe))
            swapped.append(full)
    return swapped


def quantize_weights(model):
    """Quantize the weights of every blockcast.torch.Linear of model (CUDA, current scaling or block
    formats) in one list launch (blockcast.quantize_list) and keep them for the forward: call it once per
    step, after the optimizer step. A weight changed after it (its version moves) is quantized again
    in the forward. Returns the number of weights quantized."""
    mods = [m for m in model.modules() if isinstance(m, Linear) and m.weight.is_cuda
            and m.recipe.weight.scaling == "current" and not m.recipe.weight.stochastic_rounding]
    if not mods:
        return 0
    qs = _bc.quantize_list([m.weight.detach() for m in mods], [m.recipe.weight.format for m in mods],
                           rowwise=True, columnwise=True)
    for m, q in zip(mods, qs):
        m._wcache = (m.weight._version, m.weight.data_ptr(), q)
    return len(mods)
