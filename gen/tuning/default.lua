-- Kernel parameters for archs without a tuning file of their own.
amax              = { threads = 512, unroll = 4, blocks_per_sm = 4 }
quantize_row      = { threads = 256, unroll = 4 }
quantize_tile     = { threads = 256, tile_rows = 128, tile_cols = 64, col_vec = 16, min_blocks = 4 }
dequantize        = { threads = 256, unroll = 4, min_blocks = 4 }
quantize_block    = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 4 }
dequantize_block  = { threads = 256, unroll = 4, min_blocks = 4, blocks_per_sm = 8 }
