-- MXFP8 (e4m3): OCP MX, 32-element blocks (1x32 rowwise, 32x1 columnwise), e8m0 scales by the
-- RCEIL rule (TransformerEngine's MXFP8BlockScaling). Columnwise data is not transposed.
-- Layouts as TransformerEngine: rowwise scale_inv e8m0 [roundup(M,128), roundup(ceil(K/32),4)],
-- columnwise scale_inv e8m0 [roundup(ceil(M/32),4), roundup(K,128)].
name        = "mxfp8_e4m3"
description = "MXFP8 e4m3, 32-element blocks, e8m0 scales (RCEIL)"
element     = "e4m3"
block       = { rows = 1, cols = 32 }
scale       = { type = "e8m0", rule = "rceil" }
rowwise    = { layout = "rowmajor", scale_layout = { order = "rowmajor",   pad_rows = 128, pad_cols = 4 } }
columnwise = { layout = "rowmajor", scale_layout = { order = "transposed", pad_rows = 4,   pad_cols = 128 } }
