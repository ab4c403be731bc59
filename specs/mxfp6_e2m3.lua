-- MXFP6 (E2M3): OCP MX e2m3 elements, 32-element blocks (1x32 rowwise, 32x1 columnwise), e8m0
-- scales by the RCEIL rule as the other MX formats (rule = "floor" is the spec's other option).
-- Four elements in three bytes: read a group's bytes as a little-endian 24-bit integer, element k
-- of the group is bits [6k, 6k + 6) (low_first). Rows hold whole groups (K a multiple of 4;
-- columnwise, M a multiple of 4). Columnwise data is transposed ([K, 3M/4] bytes), as 4-bit.
-- scale_inv e8m0: rowwise [roundup(M,128), roundup(ceil(K/32),4)], columnwise
-- [roundup(K,128), roundup(ceil(M/32),4)].
name        = "mxfp6_e2m3"
description = "MXFP6 e2m3, 32-element blocks, e8m0 scales (RCEIL)"
element     = "e2m3"
block       = { rows = 1, cols = 32 }
scale       = { type = "e8m0", rule = "rceil" }
packing     = "low_first"
rowwise    = { layout = "rowmajor",   scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4 } }
columnwise = { layout = "transposed", scale_layout = { order = "rowmajor", pad_rows = 128, pad_cols = 4 } }
