-- FP8 e5m2 with one fp32 scale per tensor, current scaling
-- (TransformerEngine's Float8CurrentScaling with fp8_format HYBRID for gradients, E5M2).
name        = "fp8_e5m2_tensor"
description = "FP8 e5m2, per-tensor fp32 scale, current scaling"
element     = "e5m2"
block       = "tensor"
scale = {
  type      = "fp32",
  rule      = "amax",      -- scale_from_amax: fmax / amax
  eps       = 0,
  pow2      = false,
  inf_value = "flt_max",
}
rowwise    = { layout = "rowmajor" }
columnwise = { layout = "transposed" }
