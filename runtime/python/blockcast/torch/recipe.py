"""Recipes: which format quantizes each operand of a Linear layer, and how it is scaled.

A recipe is a small immutable value (a constant to torch.compile). Each of the three operands
of a Linear layer (input x, weight w, output gradient dy) gets an Operand: a blockcast format,
its scaling ("current": the scale comes from this tensor's own amax; "delayed": from an amax
history of earlier steps, TransformerEngine's rule, per-tensor formats only) and whether it
rounds stochastically (formats whose spec allows it)."""
import dataclasses

from .._capi import BlockcastError
from ..core import get_format

SCALINGS = ("current", "delayed")


@dataclasses.dataclass(frozen=True)
class Operand:
    format: str
    scaling: str = "current"
    stochastic_rounding: bool = False

    def check(self, recipe, role):
        f = get_format(self.format)
        if self.scaling not in SCALINGS:
            raise BlockcastError("BC_ERR_ARG", f"recipe '{recipe}': {role} scaling is {self.scaling!r}; expected "
                                 "'current' or 'delayed'")
        if self.scaling == "delayed" and not f.per_tensor:
            raise BlockcastError("BC_ERR_ARG", f"recipe '{recipe}': {role} asks for delayed scaling but format "
                                 f"'{f.name}' scales per block (delayed scaling needs a per-tensor format)")
        if self.stochastic_rounding and not f.stochastic_rounding:
            raise BlockcastError("BC_ERR_ARG", f"recipe '{recipe}': {role} asks for stochastic rounding but format "
                                 f"'{f.name}' does not allow it (its spec has no stochastic_rounding = true)")
        if not (f.has_rowwise and f.has_columnwise):
            raise BlockcastError("BC_ERR_ARG", f"recipe '{recipe}': {role} format '{f.name}' needs both directions "
                                 "(a Linear reads each operand along two different dimensions)")
        return f


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A format per operand of y = x @ w^T (forward), dx = dy @ w (dgrad), dw = dy^T @ x (wgrad).
    history_len, margin and amax_algo apply to operands with delayed scaling."""
    name: str
    input: Operand
    weight: Operand
    grad_output: Operand
    history_len: int = 1024
    margin: int = 0
    amax_algo: str = "max"
    description: str = dataclasses.field(default="", compare=False)

    def __post_init__(self):
        for role in ("input", "weight", "grad_output"):
            op = getattr(self, role)
            if isinstance(op, str):  # a bare format name: current scaling
                object.__setattr__(self, role, Operand(op))
            elif not isinstance(op, Operand):
                raise BlockcastError("BC_ERR_ARG", f"recipe '{self.name}': {role} is a {type(op).__name__}; expected "
                                     "a blockcast.torch.Operand or a format name")
        if self.amax_algo not in ("max", "most_recent"):
            raise BlockcastError("BC_ERR_ARG", f"recipe '{self.name}': amax_algo is {self.amax_algo!r}; expected "
                                 "'max' or 'most_recent'")
        if not isinstance(self.history_len, int) or not 1 <= self.history_len <= 65536:
            raise BlockcastError("BC_ERR_ARG", f"recipe '{self.name}': history_len is {self.history_len!r}; expected "
                                 "an integer in [1, 65536]")

    def operands(self):
        return (self.input, self.weight, self.grad_output)

    @property
    def delayed(self):
        return any(op.scaling == "delayed" for op in self.operands())

    def check(self):
        """Resolve every format (loading nothing new) and check the operands; returns self."""
        for role in ("input", "weight", "grad_output"):
            getattr(self, role).check(self.name, role)
        return self


_E4, _E5 = "fp8_e4m3_tensor", "fp8_e5m2_tensor"

RECIPES = {r.name: r for r in (
    Recipe("fp8_current", _E4, _E4, _E5,
           description="FP8 per tensor, current scaling: e4m3 inputs and weights, e5m2 gradients "
                       "(TransformerEngine's Float8CurrentScaling, HYBRID)"),
    Recipe("fp8_delayed", Operand(_E4, "delayed"), Operand(_E4, "delayed"), Operand(_E5, "delayed"),
           description="FP8 per tensor, delayed scaling from a 1024-step amax history, 'max' "
                       "(TransformerEngine's DelayedScaling, HYBRID)"),
    Recipe("fp8_blockwise", "fp8_block_1x128", "fp8_block_128x128", "fp8_block_1x128",
           description="FP8 e4m3 in blocks: 1x128 inputs and gradients, 128x128 weights, power-of-2 scales "
                       "(DeepSeek-V3)"),
    Recipe("mxfp8", "mxfp8_e4m3", "mxfp8_e4m3", "mxfp8_e4m3",
           description="MXFP8 e4m3 for every operand, 32-element blocks, e8m0 scales (TransformerEngine's "
                       "MXFP8BlockScaling)"),
    Recipe("nvfp4", "nvfp4", "nvfp4_2d", Operand("nvfp4", stochastic_rounding=True),
           description="NVFP4: 1x16 inputs, 16x16 weights, 1x16 gradients with stochastic rounding "
                       "(NVIDIA's NVFP4 recipe without the random Hadamard transform)"),
    Recipe("mxfp4", "mxfp4", "mxfp4", "mxfp4",
           description="MXFP4 e2m1 for every operand, 32-element blocks, e8m0 scales"),
)}


def get_recipe(recipe):
    """A Recipe, or the built-in recipe of that name."""
    if isinstance(recipe, Recipe):
        return recipe.check()
    r = RECIPES.get(recipe) if isinstance(recipe, str) else None
    if r is None:
        raise BlockcastError("BC_ERR_ARG", f"recipe is {recipe!r}; expected a blockcast.torch.Recipe or one of "
                             f"{', '.join(RECIPES)}")
    return r.check()
