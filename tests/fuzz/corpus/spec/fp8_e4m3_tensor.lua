-- FP8 e4m3 with one fp32 scale per tensor, current scaling
-- (TransformerEngine's Float8CurrentScaling with fp8_format E4M3).
name        = "fp8_e4m3_tensor"
description = "FP8 e4m3, per-tensor fp32 scale, current scaling"
element     = "e4m3"
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
