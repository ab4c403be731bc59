-- Kernel parameters for sm_90 (H100, H200).
amax              = { threads = 512, unroll = 4, blocks_per_sm = 4 }
-- per-tensor row cast and dequantize: 2 vectors per thread at 8 blocks per SM keep as many bytes in
-- flight as 4 at 4, compile ~15% faster, and dequantize ran 92.5% -> 95.0% of the copy (16384^2;
-- 2026-11-23, tests/bench/NOTES.md)
quantize_row      = { threads = 256, unroll = 2, min_blocks = 8 }
quantize_tile     = { threads = 256, tile_rows = 128, tile_cols = 64, col_vec = 16, min_blocks = 4 }
dequantize        = { threads = 256, unroll = 2, min_blocks = 8 }
quantize_block    = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 4 }
-- 2D blocks of 64+ rows (128x128: a 128x128 tile): 3 blocks per SM leave the registers that keep it
-- from spilling (128x128 rowwise 70.5% -> 90.1% of the copy at 16384^2; nvfp4_2d's 16x16 blocks lost
-- 3 points with it, so they keep quantize_block; tests/bench/NOTES.md)
quantize_block_2d = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 3 }
-- 4-bit elements from bf16/fp16, one direction: registers for 6 (rowwise) / 5 (columnwise) blocks per
-- SM instead of 4 (fp32 inputs would spill 76-484 bytes there: they keep quantize_block)
-- (these kernels are latency-bound at 47% occupancy once their encode is cheap). H200, 16384^2 bf16,
-- min_blocks 4 / 5 / 6, % of the copy: rowwise mxfp4 78.8 / 83.2 / 88.6, nvfp4 63.7 / 68.4 / 70.5,
-- nvfp4_2d 57.5 / 61.8 / 61.2; columnwise mxfp4 68.5 / 72.3 / 70.7, nvfp4 52.6 / 54.7 / 54.3,
-- nvfp4_2d 50.8 / 50.5 / 48.0; both directions lose (nvfp4 47.3 / 42.9 / 35.9: spills), so they keep
-- quantize_block (2026-11-25, tests/bench/results/2026-11-25-h200-e2m1-bf16x2.md, run 19)
quantize_block_4bit_row = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 6 }
quantize_block_4bit_col = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 5 }
dequantize_block  = { threads = 256, unroll = 4, min_blocks = 4, blocks_per_sm = 8 }
