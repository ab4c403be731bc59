-- FP8 e4m3 with 1x128 blocks (128x1 for the columnwise copy) and fp32 power-of-2 block scales:
-- DeepSeek-V3 style activations and gradients (TransformerEngine's Float8BlockScaling, 1D).
-- Layouts as TransformerEngine: rowwise scale_inv fp32 [ceil(K/128), roundup(M,4)], columnwise
-- (data transposed [K, M]) scale_inv fp32 [ceil(M/128), roundup(K,4)].
name        = "fp8_block_1x128"
description = "FP8 e4m3, 1x128 blocks, fp32 power-of-2 scales"
element     = "e4m3"
block       = { rows = 1, cols = 128 }
scale = {
  type      = "fp32",
  rule      = "amax",
  eps       = 0,
  pow2      = true,
  inf_value = "dtype_max",   -- an Inf scale becomes the input dtype's largest finite value
}
rowwise    = { layout = "rowmajor",   scale_layout = { order = "transposed", pad_rows = 1, pad_cols = 4 } }
columnwise = { layout = "transposed", scale_layout = { order = "transposed", pad_rows = 1, pad_cols = 4 } }
