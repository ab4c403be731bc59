// templates/quantize_thin.cu: block quantize of a thin tensor (a few rows or a few columns, where
// the tiles of quantize_block.cu would be mostly empty: a [4096, 1] tensor fills 64 tiles of
// 64x128 with 64 elements each), one direction of a 1D-block format. The view is [rows, cols]
// rowwise, [cols, rows] columnwise, its blocks 1 x BC_TB along view rows. A team of `tl` adjacent
// lanes (a power of two up to 32, from the host: about as many as a block has packing groups of
// BC_PACK_GE elements) takes a block, lane l its groups l, l + tl, ...: their amax (NaN ignored as
// fmaxf does, kept under BC_NAN_SCALE: bc_bmax, as the tile kernel), reduced across the team by
// shuffles, the scale from bc_block_scale, then each code from bc_encode1 of the element times
// its factor: the functions of the tile kernel, so the same bits. Teams walk the blocks
// grid-stride, a warp's lanes in step (the loop bound is the warp's), BC_THIN_U blocks a team at
// a time with all their loads issued first (the host sizes the grid for one such step: a tensor
// of one-element blocks, [4096, 1], pays the list's lookup and the set-up once per 4 elements and
// its load latency once per 4 blocks). The scale padding: the writer of a stored row's last
// valid entry zeroes the padding after it (with the entry in one 32-bit store where the two fill
// an aligned word: bc_sl_side4), the threads the stored rows past the valid ones in 16-byte
// pieces (bc_sl_zero_side, bc_sl_zero_tail_piece: no division per entry). Round to
// nearest only: the host sends stochastic rounding, 2D blocks and tensors that fill their tiles
// to quantize_block.cu (runtime/ops/bc_ops.c: block_cast_launch).
// Stored data rows are dld bytes apart (the dense row, or a wider buffer's: see quantize_block.cu).

#if BC_2D || BC_ROWWISE == BC_COLUMNWISE
#error "quantize_thin: one direction of a format with 1D blocks"
#endif
#define BC_TB (BC_ROWWISE ? BC_BC : BC_CBR) /* elements of a block */
#define BC_GPL ((BC_TB / BC_PACK_GE + 31) / 32) /* packing groups of a block a lane holds, at most */
#define BC_THIN_U BC_UNROLL                     /* blocks a team has in flight (tuning: unroll) */
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
  const int wl = threadIdx.x % 32, lane = wl & (tl - 1), ltl = __ffs(tl) - 1;  // tl: a power of two
  const i64 teams = nthreads >> ltl, warp_team0 = (tid - wl) >> ltl;
  const i64 step = BC_ROWWISE ? 1 : ld;  // between consecutive elements of a view row
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
  // U blocks a team in flight: their elements loaded (into registers) before any is used, so a
  // thread's latency chain (load, amax, scale, encode, store) is paid once for U blocks
#pragma unroll 1
  for (i64 base = warp_team0; base < nblocks; base += (i64)BC_THIN_U * teams) {
    float x[BC_THIN_U][BC_GPL][BC_PACK_GE], m[BC_THIN_U];
    i64 v[BC_THIN_U], j[BC_THIN_U];
    int n[BC_THIN_U];
    const BC_DTYPE_T *p[BC_THIN_U];
    // the blocks first (their index arithmetic branches), then every load, without a branch
    // between them (ncu: with both in one loop the loads went out one block at a time)
#pragma unroll
    for (int t = 0; t < BC_THIN_U; t++) {
      const i64 b = base + t * teams + (wl >> ltl);
      const bool live = b < nblocks;
      v[t] = live ? b : 0;
      j[t] = 0;
      if (bpr != 1 && live) bc_divmod(b, bpr, v[t], j[t]);
      const i64 u0 = j[t] * BC_TB;
      n[t] = !live ? 0 : vcols - u0 < BC_TB ? (int)(vcols - u0) : BC_TB;  // the block's elements (0: no block)
      // element u of view row v: tensor (v, u) rowwise, (u, v) columnwise
      p[t] = BC_ROWWISE ? in + v[t] * ld + u0 : in + u0 * ld + v[t];
    }
#pragma unroll
    for (int t = 0; t < BC_THIN_U; t++)
#pragma unroll
      for (int q = 0; q < BC_GPL; q++) {
        const int g = (lane + q * tl) * BC_PACK_GE;
#pragma unroll
        for (int k = 0; k < BC_PACK_GE; k++) x[t][q][k] = g < n[t] ? bc_load_hp(p[t], (g + k) * step) : 0.0f;
      }
#pragma unroll
    for (int t = 0; t < BC_THIN_U; t++) {
      m[t] = 0.0f;
#pragma unroll
      for (int q = 0; q < BC_GPL; q++)
#pragma unroll
        for (int k = 0; k < BC_PACK_GE; k++) m[t] = bc_bmax(m[t], fabsf(x[t][q][k]));
    }
#pragma unroll 1
    for (int o = 1; o < tl; o <<= 1)
#pragma unroll
      for (int t = 0; t < BC_THIN_U; t++) m[t] = bc_bmax(m[t], __shfl_xor_sync(0xFFFFFFFFu, m[t], o));
#pragma unroll
    for (int t = 0; t < BC_THIN_U; t++) {
      if (!n[t]) continue;
      const bc_bscale s = bc_block_scale(m[t], ts);
      const bool last = bc_sl_last(sl, v[t], j[t]), side4 = last && bc_sl_side4(sl, scale, v[t], j[t]);
      if (lane == 0) {
        if (side4) bc_write_scale_side4(scale, sl, v[t], j[t], s.stored);  // the entry and its row's side
        else bc_write_scale(scale, sl, v[t], j[t], s.stored);
      }
      if (last && !side4) bc_sl_zero_side(sl, scale, BC_SCALE_BYTES, v[t], j[t], lane, tl);
      const i64 u0 = j[t] * BC_TB;
#pragma unroll
      for (int q = 0; q < BC_GPL; q++) {
        const int g = (lane + q * tl) * BC_PACK_GE;
        if (g >= n[t]) continue;
        u32 w = 0u;
#pragma unroll
        for (int k = 0; k < BC_PACK_GE; k++) w |= bc_encode1(__fmul_rn(x[t][q][k], s.enc)) << bc_code_pos(k);
        if (BC_DATA_VIEW) {
          u8 *o = data + v[t] * dld + (u0 + g) / BC_PACK_GE * BC_PACK_GB;
#pragma unroll
          for (int i = 0; i < BC_PACK_GB; i++) o[i] = (u8)(w >> (8 * i));
        } else {
          data[(u0 + g) * dld + v[t]] = (u8)w;
        }
      }
    }
  }
  const i64 npieces = bc_sl_tail_pieces(sl, scale, BC_SCALE_BYTES);
#pragma unroll 1
  for (i64 i = tid; i < npieces; i += nthreads) bc_sl_zero_tail_piece(sl, scale, BC_SCALE_BYTES, i);
}
