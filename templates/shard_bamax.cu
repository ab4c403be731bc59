// templates/shard_bamax.cu: a rank's partial block amaxes of the block bands its shard cuts
// (runtime/comm: bc_shard_cast). The shard `in` holds elements [s, e) of a [rows, cols] weight
// flattened row by row. For band t < nb (nb 1 or 2; rows [band_t, band_t + bh)) and column c:
// max |x| over the band's rows whose element (r, c) the shard holds, folded into
// amx[t * nbc + c / bw] with an integer atomicMax on the fp32 bits (bw: a block's columns, 1
// for N x 1 blocks). NaN is ignored (fmaxf) as the block quantize's amax ignores it, so a
// block's true amax is the max of its parts. Block 0's thread 0 writes the bands' ids (band + 1
// in three 16-bit pieces, exact in fp32) to ids[0 .. 3 nb): the other ranks match bands by them
// after the MAX all-reduce (the host zeroes both arrays first).

#define BC_BAMAX_ROWS 32

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 s, i64 e, i64 rows, i64 cols, i64 bh, i64 bw, i64 nbc, i64 band0, i64 band1,
          int nb, float *__restrict__ amx, float *__restrict__ ids) {
  if (BC_BID.x == 0 && threadIdx.x == 0) {
#pragma unroll
    for (int t = 0; t < 2; t++) {
      if (t >= nb) break;
      const u64 id = (u64)(t ? band1 : band0) + 1;
      ids[3 * t] = (float)(u32)(id & 0xFFFFu);
      ids[3 * t + 1] = (float)(u32)((id >> 16) & 0xFFFFu);
      ids[3 * t + 2] = (float)(u32)(id >> 32);
    }
  }
  // x: the two bands' columns; y: chunks of BC_BAMAX_ROWS rows of a band (more threads for tall
  // bands). The loop runs warp by warp (t0 the warp's first column), so whole warps fold their
  // maxima: lanes of one block column (contiguous, as a warp's columns are consecutive) combine
  // before one atomic per block column and warp (2D blocks: 128 columns on one word)
  const int lane = threadIdx.x & 31;
#pragma unroll 1
  for (i64 ch = BC_BID.y; ch * BC_BAMAX_ROWS < bh; ch += BC_GDIM.y) {
#pragma unroll 1
    for (i64 t0 = (i64)BC_BID.x * BC_THREADS + (threadIdx.x & ~31); t0 < nb * cols; t0 += (i64)BC_GDIM.x * BC_THREADS) {
      const i64 t = t0 + lane;
      const int valid = t < nb * cols;
      const int slot = t >= cols;
      const i64 c = t - (slot ? cols : 0);
      const i64 b = slot ? band1 : band0;
      const i64 lo = b + ch * BC_BAMAX_ROWS, hi = valid ? min(min(lo + BC_BAMAX_ROWS, b + bh), rows) : lo;
      // the chunk's rows unrolled: their loads in flight together (a rolled loop waited on each
      // load in turn: 46 us for 35 MB of 128-row bands on the H200; with the grid capped beside
      // the interiors, 8 rows a chunk took 15 us for 5.4 MB on an H100, 32 rows 11.6 us), the
      // shard index stepped a row at a time (one 64-bit add and compare an element)
      float m = 0.0f;
      const int nk = (int)(hi - lo);
      const u64 held = (u64)(e - s);
      i64 g = lo * cols + c - s; /* shard index of (lo + k, c) */
#pragma unroll
      for (int k = 0; k < BC_BAMAX_ROWS; k++, g += cols)
        if (k < nk && (u64)g < held) m = fmaxf(m, fabsf(bc_load_hp(in, g)));
      const i64 key = valid ? slot * nbc + c / bw : -1 - lane;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const float om = __shfl_down_sync(0xFFFFFFFFu, m, off);
        const i64 ok = __shfl_down_sync(0xFFFFFFFFu, key, off);
        if (lane + off < 32 && ok == key) m = fmaxf(m, om);
      }
      const i64 pk = __shfl_up_sync(0xFFFFFFFFu, key, 1);
      if (valid && (lane == 0 || pk != key) && m > 0.0f) atomicMax((unsigned int *)(amx + key), __float_as_uint(m));
    }
  }
}
