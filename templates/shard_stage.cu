// templates/shard_stage.cu: the high-precision slab a rank quantizes for the block bands its
// shard cuts (runtime/comm: bc_shard_cast). out is rows [r0, r0 + nr) of the [rows, cols]
// weight: the elements the shard holds (elements [s, e) flattened row by row) copied from `in`,
// every other element 0, except that a block holding elements of other ranks gets, at one
// element the shard does not hold, the block's amax over all ranks: its first element if the
// shard does not hold it, else its last (the shard holds a contiguous range, so a block whose
// first and last elements it holds is all its own). That amax is the max of the matching bands
// of the all-reduced tables (ids: [nslots][3] band ids, amx: [nslots][nbc], see
// shard_bamax.cu); it is |x| of an input element, exact in the dtype, so the block quantize sees
// the block's true amax and gives the codes and scale a quantize of the whole weight gives.
// The codes of elements the shard does not hold are never placed. nslots 0: no injection
// (per-tensor formats).
//
// A thread takes one column of BC_STAGE_ROWS slab rows at a time, their loads issued together
// (the grid is capped beside the interiors, so each thread loops: one load at a time left it
// waiting on each in turn, 34 us for 5.4 MB of 128-row bands on an H100); the block position of
// an element outside the shard comes from one division per column and row group.

#define BC_STAGE_ROWS 16

static __device__ __forceinline__ float bc_shard_band_amax(const float *__restrict__ ids, const float *__restrict__ amx, int nslots,
                                                           i64 nbc, i64 band, i64 j) {
  const u64 id = (u64)band + 1;
  const float p0 = (float)(u32)(id & 0xFFFFu), p1 = (float)(u32)((id >> 16) & 0xFFFFu), p2 = (float)(u32)(id >> 32);
  float m = 0.0f;
#pragma unroll 1
  for (int k = 0; k < nslots; k++)
    if (ids[3 * k] == p0 && ids[3 * k + 1] == p1 && ids[3 * k + 2] == p2) m = fmaxf(m, amx[(i64)k * nbc + j]);
  return m;
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 s, i64 e, i64 rows, i64 cols, i64 r0, i64 nr, i64 bh, i64 bw, i64 nbc,
          const float *__restrict__ ids, const float *__restrict__ amx, int nslots, BC_DTYPE_T *__restrict__ out) {
  // y: groups of BC_STAGE_ROWS slab rows, x: columns
#pragma unroll 1
  for (i64 y0 = (i64)BC_BID.y * BC_STAGE_ROWS; y0 < nr; y0 += (i64)BC_GDIM.y * BC_STAGE_ROWS) {
    const i64 ra = r0 + y0;                       /* the group's first weight row */
    const i64 rma = nslots > 0 ? ra % bh : 0;     /* its row within its block band */
#pragma unroll 1
    for (i64 c = (i64)BC_BID.x * BC_THREADS + threadIdx.x; c < cols; c += (i64)BC_GDIM.x * BC_THREADS) {
      float v[BC_STAGE_ROWS];
      const int nk = (int)min((i64)BC_STAGE_ROWS, nr - y0);
      const u64 held = (u64)(e - s);
      i64 g = ra * cols + c - s; /* shard index of (ra + k, c), stepped a row at a time */
#pragma unroll
      for (int k = 0; k < BC_STAGE_ROWS; k++, g += cols) v[k] = k < nk && (u64)g < held ? bc_load_hp(in, g) : 0.0f;
      const i64 cm = nslots > 0 ? c % bw : 0;     /* the column within its block */
      const int clast = cm == bw - 1 || c == cols - 1;
      g = ra * cols + c - s;
      i64 o = y0 * cols + c; /* the slab's element (y0 + k, c) */
#pragma unroll
      for (int k = 0; k < BC_STAGE_ROWS; k++, g += cols, o += cols) {
        if (k >= nk) break;
        const i64 r = ra + k;
        if (nslots > 0 && (u64)g >= held) {
          i64 rm = rma + k;
          rm = rm < bh ? rm : rm % bh;
          // the block's first element, not the shard's; or its last, the shard holding the first
          const i64 first = (r - rm) * cols + (c - cm);
          if ((rm == 0 && cm == 0) || ((rm == bh - 1 || r == rows - 1) && clast && first >= s && first < e))
            v[k] = bc_shard_band_amax(ids, amx, nslots, nbc, r - rm, c / bw);
        }
        bc_store_hp(out, o, v[k]);
      }
    }
  }
}
