// templates/comm_stage.cu: the block-aligned slab a rank quantizes when the rows it holds cut
// blocks that straddle ranks (runtime/comm: the all-gather). out is [slab_rows, cols], row-major:
//   rows [0, pad_top)                 pad rows of the first block row: zeros, and in row 0 the
//                                     other ranks' partial block amaxes of that block row;
//   rows [pad_top, pad_top + rows)    the rank's own rows, copied bit for bit from in (stride ld);
//   rows [pad_top + rows, slab_rows)  pad rows of the last block row: zeros, and in the first of
//                                     them the other ranks' partial amaxes of that block row.
// A partial amax (the max of slots part[i] of table `amax`, each a [nbc] vector of |x| maxima)
// goes to the block's first column (group: the block's columns; 1 for N x 1 blocks). Each is the
// absolute value of an input element, so it is exact in the dtype, and the block quantize then
// sees the block's true amax: max(own part, other parts). The pad rows' codes are never sent.

#define BC_STAGE_MAX_PARTS 128
struct bc_stage_parts {
  int ntop, nbot;
  int top[BC_STAGE_MAX_PARTS], bot[BC_STAGE_MAX_PARTS];
};

static __device__ __forceinline__ float bc_stage_part_max(const float *__restrict__ amax, i64 nbc, const int *idx, int n, i64 j) {
  float m = 0.0f;
#pragma unroll 1
  for (int i = 0; i < n; i++) m = fmaxf(m, amax[(i64)idx[i] * nbc + j]);
  return m;
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 ld, i64 rows, i64 cols, i64 slab_rows, i64 pad_top,
          BC_DTYPE_T *__restrict__ out, const float *__restrict__ amax, i64 nbc, i64 group, bc_stage_parts parts) {
  const i64 n = slab_rows * cols;
#pragma unroll 1
  for (i64 i = (i64)BC_BID.x * BC_THREADS + threadIdx.x; i < n; i += (i64)BC_GDIM.x * BC_THREADS) {
    const i64 r = i / cols, c = i - r * cols;
    if (r >= pad_top && r < pad_top + rows) {
      out[i] = in[(r - pad_top) * ld + c];
      continue;
    }
    float v = 0.0f;
    if (c % group == 0) {
      if (r == 0 && pad_top > 0) v = bc_stage_part_max(amax, nbc, parts.top, parts.ntop, c / group);
      else if (r == pad_top + rows) v = bc_stage_part_max(amax, nbc, parts.bot, parts.nbot, c / group);
    }
    bc_store_hp(out, i, v);
  }
}
