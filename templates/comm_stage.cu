// templates/comm_stage.cu: the pad rows of the block-aligned slab a rank quantizes when the rows
// it holds cut blocks that straddle ranks (runtime/comm: the all-gather). out is
// [slab_rows, cols], row-major:
//   rows [0, pad_top)                 pad rows of the first block row: zeros, and in row 0 the
//                                     other ranks' partial block amaxes of that block row;
//   rows [pad_top, pad_top + rows)    the rank's own rows (copied by the copy engine, not here);
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
${KERNEL}(i64 rows, i64 cols, i64 slab_rows, i64 pad_top, BC_DTYPE_T *__restrict__ out, const float *__restrict__ amax, i64 nbc,
          i64 group, bc_stage_parts pp) {
  // the part lists into shared memory, each word read from the parameters at a constant offset
  // (an indexed parameter array would be copied to every thread's local memory)
  __shared__ bc_stage_parts parts;
  {
    const int *from = &pp.ntop;
    int *to = &parts.ntop;
    constexpr int words = sizeof(bc_stage_parts) / sizeof(int);
#pragma unroll
    for (int i = 0; i < words; i++)
      if (i % BC_THREADS == (int)threadIdx.x) to[i] = from[i];
  }
  __syncthreads();
  // a 2D grid: pad rows along y, columns along x
  const i64 npad = slab_rows - rows;
#pragma unroll 1
  for (i64 pr = BC_BID.y; pr < npad; pr += BC_GDIM.y) {
    const i64 r = pr < pad_top ? pr : pr + rows;
    BC_DTYPE_T *o = out + r * cols;
    const int top = r == 0 && pad_top > 0;
    const int *idx = top ? parts.top : parts.bot;
    const int np = top ? parts.ntop : (r == pad_top + rows ? parts.nbot : 0);
#pragma unroll 1
    for (i64 c = (i64)BC_BID.x * BC_THREADS + threadIdx.x; c < cols; c += (i64)BC_GDIM.x * BC_THREADS) {
      float v = 0.0f;
      if (np && c % group == 0) v = bc_stage_part_max(amax, nbc, idx, np, c / group);
      bc_store_hp(o, c, v);
    }
  }
}
