-- NVFP4: e2m1 elements, 16-element blocks (1x16 rowwise, 16x1 columnwise), ue4m3 block scales
-- under an fp32 per-tensor scale from the global amax (two-level, TransformerEngine's NVFP4
-- recipe). Two elements per byte, element 2j in the low nibble. Optional stochastic rounding.
-- Layouts as TransformerEngine: data [M, K/2] and transposed [K, M/2]; scale_inv ue4m3
-- [roundup(M,128), roundup(ceil(K/16),4)] and [roundup(K,128), roundup(ceil(M/16),4)].
name        = "nvfp4"
description = "NVFP4 e2m1, 16-element blocks, ue4m3 scales under an fp32 tensor scale"
element     = "e2m1"
block       = { rows = 1, cols = 16 }
scale       = { type = "ue4m3", rule = "two_level" }
packing     = "low_first"
stochastic_rounding = true
rowwise    = { layout = "rowmajor",   scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4 } }
columnwise = { layout = "transposed", scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4 } }
