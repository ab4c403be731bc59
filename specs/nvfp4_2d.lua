-- NVFP4 for weights: as nvfp4, but with 16x16 blocks, one scale per block shared by both
-- directions (so the columnwise copy is the exact transpose of the rowwise one). The scale is
-- written into the 1D-shaped scale tensor of each direction, repeated over the block's 16 rows.
name        = "nvfp4_2d"
description = "NVFP4 e2m1, 16x16 blocks, ue4m3 scales under an fp32 tensor scale"
element     = "e2m1"
block       = { rows = 16, cols = 16 }
scale       = { type = "ue4m3", rule = "two_level" }
packing     = "low_first"
stochastic_rounding = true
rowwise    = { layout = "rowmajor",   scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4, index = "row" } }
columnwise = { layout = "transposed", scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4, index = "row" } }
