"""Low-precision training layers on blockcast: a drop-in Linear, recipes, and a helper that swaps
the Linear layers of a model.

    import blockcast.torch as bct
    bct.swap_linear(model, "fp8_current")      # or a bct.Recipe of your own
    loss = model(x).sum(); loss.backward()     # forward and backward GEMMs on quantized operands
    opt.step(); bct.quantize_weights(model)    # optional: every weight of the step in one launch

Recipes: blockcast.torch.RECIPES (fp8_current, fp8_delayed, fp8_blockwise, mxfp8, nvfp4, mxfp4)."""
from .recipe import RECIPES, Operand, Recipe, get_recipe
from .linear import Linear, gemm, gemm_paths, quantize_operand, quantize_weights, swap_linear

__all__ = ["RECIPES", "Operand", "Recipe", "get_recipe", "Linear", "gemm", "gemm_paths", "quantize_operand",
           "quantize_weights", "swap_linear"]
