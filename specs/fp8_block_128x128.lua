-- FP8 e4m3 with 128x128 blocks and fp32 power-of-2 block scales: DeepSeek-V3 style weights
-- (TransformerEngine's Float8BlockScaling, 2D). One scale per block, shared by both directions.
-- Layouts as TransformerEngine: rowwise scale_inv fp32 [ceil(M/128), roundup(ceil(K/128),4)],
-- columnwise (data transposed [K, M]) scale_inv fp32 [ceil(K/128), roundup(ceil(M/128),4)].
name        = "fp8_block_128x128"
description = "FP8 e4m3, 128x128 blocks, fp32 power-of-2 scales"
element     = "e4m3"
block       = { rows = 128, cols = 128 }
scale = {
  type      = "fp32",
  rule      = "amax",
  eps       = 0,
  pow2      = true,
  inf_value = "dtype_max",
}
rowwise    = { layout = "rowmajor",   scale_layout = { order = "rowmajor", pad_rows = 1, pad_cols = 4 } }
columnwise = { layout = "transposed", scale_layout = { order = "rowmajor", pad_rows = 1, pad_cols = 4 } }
