-- MXFP4: OCP MX e2m1 elements, 32-element blocks, e8m0 scales by the RCEIL rule. Two elements
-- per byte, element 2j in the low nibble. Columnwise data is transposed ([K, M/2] bytes), as the
-- 4-bit GEMMs need K-major operands.
-- scale_inv e8m0: rowwise [roundup(M,128), roundup(ceil(K/32),4)], columnwise
-- [roundup(K,128), roundup(ceil(M/32),4)].
name        = "mxfp4"
description = "MXFP4 e2m1, 32-element blocks, e8m0 scales (RCEIL)"
element     = "e2m1"
block       = { rows = 1, cols = 32 }
scale       = { type = "e8m0", rule = "rceil" }
packing     = "low_first"
rowwise    = { layout = "rowmajor",   scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4 } }
columnwise = { layout = "transposed", scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4 } }
