// templates/quantize_thin.cu: block quantize of a thin tensor (a few rows or a few columns, where
// the tiles of quantize_block.cu would be mostly empty: a [4096, 1] tensor fills 64 tiles of
// 64x128 with 64 elements each), one direction of a 1D-block format. The view is [rows, cols]
// rowwise, [cols, rows] columnwise, its blocks 1 x BC_TB along view rows. A team of `tl` adjacent
// lanes (a power of two up to 32, from the host: about as many as a block has packing groups of
// BC_PACK_GE elements) takes a block, lane l its groups l, l + tl, ...: their amax (NaN ignored as
// fmaxf does, kept under BC_NAN_SCALE: bc_bmax, as the tile kernel), reduced across the team by
// shuffles, the scale from bc_block_scale, then each code from bc_encode1 of the element times
// its factor: the functions of the tile kernel, so the same bits. Teams walk the blocks
// grid-stride, a warp's lanes in step (the loop bound is the warp's); then the threads zero the
// direction's scale padding. Round to nearest only: the host sends stochastic rounding, 2D blocks
// and tensors that fill their tiles to quantize_block.cu (runtime/ops/bc_ops.c: block_cast_launch).
// Stored data rows are dld bytes apart (the dense row, or a wider buffer's: see quantize_block.cu).

#if BC_2D || BC_ROWWISE == BC_COLUMNWISE
#error "quantize_thin: one direction of a format with 1D blocks"
#endif
#define BC_TB (BC_ROWWISE ? BC_BC : BC_CBR) /* elements of a block */
/* codes stored along the view rows (rowwise data; transposed columnwise data), else at
   [tensor row][tensor col] (MXFP8's columnwise data, 8-bit) */
#define BC_DATA_VIEW (BC_ROWWISE || BC_COL_TRANSPOSED)
#if BC_THREADS % 32 || BC_TB % BC_PACK_GE
#error "quantize_thin: whole warps, blocks of whole packing groups"
#endif
#if !BC_DATA_VIEW && BC_ELEM_BITS != 8
#error "quantize_thin: untransposed columnwise data of elements narrower than a byte"
#endif

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ global_amax,
          u8 *__restrict__ data, i64 dld, void *__restrict__ scale, bc_sl sl, i64 nblocks, int tl) {
  const i64 vcols = BC_ROWWISE ? cols : rows;
  const i64 bpr = (vcols + BC_TB - 1) / BC_TB;  // blocks per view row
  const i64 tid = (i64)BC_BID.x * BC_THREADS + threadIdx.x, nthreads = (i64)BC_GDIM.x * BC_THREADS;
  const int wl = threadIdx.x % 32, lane = wl % tl;
  const i64 teams = nthreads / tl, warp_team0 = (tid - wl) / tl;
  const i64 step = BC_ROWWISE ? 1 : ld;  // between consecutive elements of a view row
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
#pragma unroll 1
  for (i64 base = warp_team0; base < nblocks; base += teams) {
    const i64 b = base + wl / tl;
    const bool live = b < nblocks;
    const i64 v = !live ? 0 : bpr == 1 ? b : b / bpr, u0 = !live ? vcols : bpr == 1 ? 0 : (b % bpr) * BC_TB;
    const int n = vcols - u0 < BC_TB ? (int)(vcols - u0) : BC_TB;  // the block's elements (0: no block)
    // element u of view row v: tensor (v, u) rowwise, (u, v) columnwise
    const BC_DTYPE_T *p = BC_ROWWISE ? in + v * ld + u0 : in + u0 * ld + v;
    float m = 0.0f;
#pragma unroll 1
    for (int g = lane * BC_PACK_GE; g < n; g += tl * BC_PACK_GE)
#pragma unroll
      for (int k = 0; k < BC_PACK_GE; k++) m = bc_bmax(m, fabsf(bc_load_hp(p, (g + k) * step)));
#pragma unroll 1
    for (int o = 1; o < tl; o <<= 1) m = bc_bmax(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
    if (!live) continue;
    const bc_bscale s = bc_block_scale(m, ts);
    if (lane == 0) bc_write_scale(scale, sl, v, u0 / BC_TB, s.stored);
#pragma unroll 1
    for (int g = lane * BC_PACK_GE; g < n; g += tl * BC_PACK_GE) {
      u32 w = 0u;
#pragma unroll
      for (int k = 0; k < BC_PACK_GE; k++) w |= bc_encode1(__fmul_rn(bc_load_hp(p, (g + k) * step), s.enc)) << bc_code_pos(k);
      if (BC_DATA_VIEW) {
        u8 *o = data + v * dld + (u0 + g) / BC_PACK_GE * BC_PACK_GB;
#pragma unroll
        for (int i = 0; i < BC_PACK_GB; i++) o[i] = (u8)(w >> (8 * i));
      } else {
        data[(u0 + g) * dld + v] = (u8)w;
      }
    }
  }
  const i64 npad = bc_sl_pad_count(sl);
#pragma unroll 1
  for (i64 i = tid; i < npad; i += nthreads) bc_sl_pad_zero(sl, scale, BC_SCALE_BYTES, i);
}
