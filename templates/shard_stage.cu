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
  // y: the slab's rows, x: columns
#pragma unroll 1
  for (i64 y = BC_BID.y; y < nr; y += BC_GDIM.y) {
    const i64 r = r0 + y;
#pragma unroll 1
    for (i64 c = (i64)BC_BID.x * BC_THREADS + threadIdx.x; c < cols; c += (i64)BC_GDIM.x * BC_THREADS) {
      const i64 f = r * cols + c;
      float v = 0.0f;
      if (f >= s && f < e) {
        v = bc_load_hp(in, f - s);
      } else if (nslots > 0) {
        const i64 br = r / bh * bh, j = c / bw;
        const i64 first = br * cols + j * bw;
        const i64 lr = min(br + bh, rows) - 1, lc = min((j + 1) * bw, cols) - 1;
        const int first_own = first >= s && first < e, last_own = lr * cols + lc >= s && lr * cols + lc < e;
        if ((f == first) || (first_own && !last_own && r == lr && c == lc)) v = bc_shard_band_amax(ids, amx, nslots, nbc, br, j);
      }
      bc_store_hp(out, y * cols + c, v);
    }
  }
}
