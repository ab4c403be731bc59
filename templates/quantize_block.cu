// templates/quantize_block.cu: block-scaled quantize, every block format, rowwise and/or
// columnwise output from one read of the input. What differs between formats comes from the
// spec as constants: the block shape (BC_BR x BC_BC rowwise; columnwise BC_CBR x 1, or the same
// 2D block when BC_2D), the element (BC_ELEM_*, 8 or 4 bits, nibble order), the scale rule
// (BC_RULE, bc_block_scale), the columnwise data layout (BC_COL_TRANSPOSED) and the scale
// layouts (bc_sl, from the host).
//
// One CUDA block per BC_TR x BC_TC tile (whole blocks of every direction written):
//   load   the tile into shared memory as raw input bits (16-byte vectors when the tile is whole
//          and aligned, else masked element loads; zeros outside the tensor); 2D: block amaxes.
//   row    a task is a run of BC_RUN_R elements of one tile row (16 output bytes or one block,
//          whichever is longer): block amax -> scale (written) -> encode -> 16-byte stores.
//   col    a task is a run of BC_RUN_C elements of one tile column: the same, down the column;
//          transposed data is stored as 16-byte pieces of an output row, non-transposed data
//          byte by byte (consecutive threads on consecutive columns).
// CUDA blocks past the last tile zero the scale padding of both directions.
// Stochastic rounding (sr != 0, BC_SR_ALLOWED): element e of a direction's stream takes its
// random bits from Philox(e / 4, offset; seed); the rowwise stream is e = r * cols + c, the
// columnwise one e = rows * cols + c * rows + r, independent of tiles and launch shape.

#define BC_S BC_DTYPE_SIZE
#define BC_VE BC_VEC                                       /* elements per 16-byte vector */
#define BC_TS (BC_TC * BC_S + 16)                          /* staged row stride, bytes */
#define BC_VPR (BC_TC * BC_S / 16)                         /* vectors per tile row */
#define BC_NLOAD (BC_TR * BC_VPR / BC_THREADS)             /* vectors per thread */
#define BC_OUT_ELEMS (128 / BC_ELEM_BITS)                  /* elements in 16 output bytes */
#define BC_RUN_R BC_OUT_ELEMS                             /* rowwise run: 16 output bytes */
#define BC_LANES_R (BC_BC > BC_RUN_R ? BC_BC / BC_RUN_R : 1)  /* lanes sharing a rowwise block */
#define BC_RUN_C (BC_CBR > BC_OUT_ELEMS ? BC_CBR : BC_OUT_ELEMS)
#define BC_NBLK_R (BC_BC > BC_RUN_R ? 1 : BC_RUN_R / BC_BC)  /* blocks per row task */
#define BC_NBLK_C (BC_RUN_C / BC_CBR)                       /* blocks per column task */
#define BC_BMAX_COLS (BC_TC / BC_BC)

#if (BC_TR * BC_VPR) % BC_THREADS || (BC_ROWWISE && BC_TC % BC_RUN_R) || (BC_COLUMNWISE && BC_TR % BC_RUN_C) || \
    (BC_2D && (BC_TR % BC_BR || BC_TC % BC_BC))
#error "tile does not hold whole blocks or loads (gen/blockcast.lua: block_tile)"
#endif

// Put code q of element j of a run into the packed words w (8-bit: four codes per word, element 0
// in the low byte; 4-bit: eight per word in the spec's nibble order).
static __device__ __forceinline__ void bc_pack_code(u32 *w, int j, u32 q) {
#if BC_ELEM_BITS == 8
  w[j >> 2] |= q << (8 * (j & 3));
#else
  const int nib = BC_PACK_HIGH_FIRST ? (j ^ 1) : j;
  w[nib >> 3] |= q << (4 * (nib & 7));
#endif
}

// This thread's BC_NLOAD input vectors of tile (r0, c0), all loads issued before any use.
template <int MODE>
static __device__ __forceinline__ void bc_block_load(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, i64 r0,
                                                     i64 c0, int tid, uint4 (&v)[BC_NLOAD]) {
#pragma unroll
  for (int k = 0; k < BC_NLOAD; k++) {
    const int i = tid + k * BC_THREADS;
    v[k] = bc_load_vec<MODE>(in, rows, cols, ld, r0 + i / BC_VPR, c0 + (i % BC_VPR) * BC_VE);
  }
}

// Element j of staged tile row tr as fp32.
static __device__ __forceinline__ float bc_staged(const u8 *tile, int tr, int tc) {
  const BC_DTYPE_T *p = (const BC_DTYPE_T *)(tile + tr * BC_TS) + tc;
#if BC_DTYPE == 0
  return *p;
#elif BC_DTYPE == 1
  return bc_f32_from_bf16(*p);
#else
  return bc_f32_from_f16(*p);
#endif
}

static __device__ __forceinline__ u32 bc_encode_one(float v, int sr, bc_rng &rng, u64 e) {
#if BC_SR_ALLOWED
  if (sr) return bc_encode_sr_t<bc_elem>(v, rng.bits(e));
#endif
  return bc_encode1(v);
}

static __device__ __forceinline__ void bc_write_scale(void *scale, const bc_sl &sl, i64 r, i64 c, u32 stored) {
  const i64 off = bc_sl_offset(sl, r, c);
#if BC_SCALE_BYTES == 4
  ((u32 *)scale)[off] = stored;
#else
  ((u8 *)scale)[off] = (u8)stored;
#endif
}

// Store n = RUN * bits / 8 bytes of codes at dst: 16-byte stores when `vec`, else the first
// `valid` bytes one by one.
template <int N>
static __device__ __forceinline__ void bc_store_codes(u8 *dst, const u32 *w, bool vec, int valid) {
  if (vec) {
#pragma unroll
    for (int i = 0; i < N / 16; i++) bc_store16(dst + 16 * i, make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]));
  } else if (valid == N) {
#pragma unroll
    for (int i = 0; i < N; i++) dst[i] = (u8)(w[i >> 2] >> (8 * (i & 3)));
  } else {
#pragma unroll 1
    for (int i = 0; i < valid; i++) dst[i] = (u8)(w[i >> 2] >> (8 * (i & 3)));
  }
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ global_amax,
          u8 *__restrict__ row_data, void *__restrict__ row_scale, bc_sl row_sl,
          u8 *__restrict__ col_data, void *__restrict__ col_scale, bc_sl col_sl,
          u64 sr_seed, u64 sr_offset, int sr, int vec_in, int vec_row, int vec_col, i64 tiles_x, i64 tiles) {
  extern __shared__ __align__(16) u8 bc_smem[];
  u8 *tile = bc_smem;
  const int tid = threadIdx.x;
  const i64 t = blockIdx.x;

  if (t >= tiles) {  // scale padding, written as zeros
    const i64 stride = ((i64)gridDim.x - tiles) * BC_THREADS;
    const i64 i0 = (t - tiles) * BC_THREADS + tid;
#if BC_ROWWISE
    for (i64 i = i0, n = bc_sl_pad_count(row_sl); i < n; i += stride) bc_sl_pad_zero(row_sl, row_scale, BC_SCALE_BYTES, i);
#endif
#if BC_COLUMNWISE
    for (i64 i = i0, n = bc_sl_pad_count(col_sl); i < n; i += stride) bc_sl_pad_zero(col_sl, col_scale, BC_SCALE_BYTES, i);
#endif
    return;
  }

  const i64 r0 = (t / tiles_x) * BC_TR, c0 = (t % tiles_x) * BC_TC;
  const bool whole = r0 + BC_TR <= rows && c0 + BC_TC <= cols;
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
#if BC_2D
  float *bmax = (float *)(bc_smem + BC_TR * BC_TS);
  for (int i = tid; i < (BC_TR / BC_BR) * BC_BMAX_COLS; i += BC_THREADS) bmax[i] = 0.0f;
  __syncthreads();
#endif

  // ---- load: all loads issued before the first shared-memory store
  {
    uint4 v[BC_NLOAD];
    if (whole && vec_in) bc_block_load<BC_LOAD_VEC>(in, rows, cols, ld, r0, c0, tid, v);
    else if (whole) bc_block_load<BC_LOAD_ELEMS>(in, rows, cols, ld, r0, c0, tid, v);  // rows not 16-byte aligned
    else bc_block_load<BC_LOAD_MASKED>(in, rows, cols, ld, r0, c0, tid, v);
#pragma unroll
    for (int k = 0; k < BC_NLOAD; k++) {
      const int i = tid + k * BC_THREADS, tr = i / BC_VPR, vcol = i % BC_VPR;
      *(uint4 *)(tile + tr * BC_TS + vcol * 16) = v[k];
#if BC_2D
      float f[BC_VE];
      bc_unpack16(v[k], f);
      float m = 0.0f;
#pragma unroll
      for (int j = 0; j < BC_VE; j++) m = fmaxf(m, fabsf(f[j]));  // NaN ignored
      if (m > 0.0f)
        atomicMax((unsigned int *)&bmax[(tr / BC_BR) * BC_BMAX_COLS + (vcol * BC_VE) / BC_BC], __float_as_uint(m));
#endif
    }
  }
  __syncthreads();

  bc_rng rng;
  rng.init(sr_seed, sr_offset);
  (void)rng;

#if BC_ROWWISE
  // ---- rowwise: runs of BC_RUN_R elements along a tile row; a block of BC_LANES_R runs is
  // reduced across that many adjacent lanes (every lane takes part in the shuffles)
  {
    const i64 row_bytes = cols * BC_ELEM_BITS / 8;
    constexpr int ntask = BC_TR * (BC_TC / BC_RUN_R);
#pragma unroll 1
    for (int task0 = 0; task0 < ntask; task0 += BC_THREADS) {
      // past the last task: a valid index for the reads; the lanes of a block are all in or all out
      const int task = task0 + tid < ntask ? task0 + tid : (task0 + tid) % ntask;
      const int tr = task / (BC_TC / BC_RUN_R), tc0 = (task % (BC_TC / BC_RUN_R)) * BC_RUN_R;
      const i64 r = r0 + tr, c = c0 + tc0;
      const bool live = task0 + tid < ntask && r < rows && c < cols;
      float enc[BC_NBLK_R];
#pragma unroll
      for (int b = 0; b < BC_NBLK_R; b++) {
        float m = 0.0f;
#if BC_2D
        m = bmax[(tr / BC_BR) * BC_BMAX_COLS + (tc0 + b * BC_BC) / BC_BC];
#else
        const int len = BC_BC < BC_RUN_R ? BC_BC : BC_RUN_R;
#pragma unroll
        for (int j = 0; j < len; j += BC_VE) {
          float f[BC_VE];
          bc_unpack16(*(const uint4 *)(tile + tr * BC_TS + (tc0 + b * len + j) * BC_S), f);
#pragma unroll
          for (int q = 0; q < BC_VE; q++) m = fmaxf(m, fabsf(f[q]));
        }
#pragma unroll
        for (int o = 1; o < BC_LANES_R; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
#endif
        const bc_bscale s = bc_block_scale(m, ts);
        enc[b] = s.enc;
        const i64 sc = (c + b * BC_BC) / BC_BC;
        if (live && (tc0 / BC_RUN_R) % BC_LANES_R == 0 && sc < row_sl.lcols && (!BC_2D || row_sl.per_row || tr % BC_BR == 0))
          bc_write_scale(row_scale, row_sl, row_sl.per_row ? r : r / BC_BR, sc, s.stored);
      }
      if (!live) continue;
      // encode and store 16 output bytes
      u32 w[4] = { 0u, 0u, 0u, 0u };
#pragma unroll
      for (int j = 0; j < BC_OUT_ELEMS; j += BC_VE) {
        float f[BC_VE];
        bc_unpack16(*(const uint4 *)(tile + tr * BC_TS + (tc0 + j) * BC_S), f);
        const float e = enc[BC_NBLK_R == 1 ? 0 : j / BC_BC];
#if BC_SR_ALLOWED
        if (sr) {
#pragma unroll
          for (int q = 0; q < BC_VE; q++)
            bc_pack_code(w, j + q, bc_encode_one(__fmul_rn(f[q], e), 1, rng, (u64)(r * cols + c + j + q)));
          continue;
        }
#endif
#if BC_ELEM_BITS == 8
#pragma unroll
        for (int q = 0; q < BC_VE; q += 2) {
          u32 q2 = bc_encode2(__fmul_rn(f[q], e), __fmul_rn(f[q + 1], e));
          w[(j + q) >> 2] |= q2 << (8 * ((j + q) & 3));
        }
#else
#pragma unroll
        for (int q = 0; q < BC_VE; q++) bc_pack_code(w, j + q, bc_encode1(__fmul_rn(f[q], e)));
#endif
      }
      const i64 left = (cols - c) * BC_ELEM_BITS / 8;
      bc_store_codes<16>(row_data + r * row_bytes + c * BC_ELEM_BITS / 8, w, vec_row && left >= 16, left < 16 ? (int)left : 16);
    }
  }
#endif

#if BC_COLUMNWISE
  // ---- columnwise: runs of BC_RUN_C elements down a tile column
  {
#if BC_COL_TRANSPOSED
    const i64 out_row_bytes = rows * BC_ELEM_BITS / 8;
#endif
#pragma unroll 1
    for (int task = tid; task < BC_TC * (BC_TR / BC_RUN_C); task += BC_THREADS) {
      const int tc = task % BC_TC, tr0 = (task / BC_TC) * BC_RUN_C;
      const i64 c = c0 + tc, r = r0 + tr0;
      if (c >= cols || r >= rows) continue;
      float enc[BC_NBLK_C];
#pragma unroll
      for (int b = 0; b < BC_NBLK_C; b++) {
        float m = 0.0f;
#if BC_2D
        m = bmax[((tr0 + b * BC_CBR) / BC_BR) * BC_BMAX_COLS + tc / BC_BC];
#else
#pragma unroll 8
        for (int i = 0; i < BC_CBR; i++) m = fmaxf(m, fabsf(bc_staged(tile, tr0 + b * BC_CBR + i, tc)));
#endif
        const bc_bscale s = bc_block_scale(m, ts);
        enc[b] = s.enc;
        // view [cols, rows]: row c; block column (r / CBR + b); 2D blocks are BC_BC view rows tall
        const i64 sc = r / BC_CBR + b;
        if (sc < col_sl.lcols && (!BC_2D || col_sl.per_row || tc % BC_BC == 0))
          bc_write_scale(col_scale, col_sl, (col_sl.per_row || !BC_2D) ? c : c / BC_BC, sc, s.stored);
      }
#if BC_COL_TRANSPOSED
#pragma unroll 1
      for (int i0 = 0; i0 < BC_RUN_C; i0 += BC_OUT_ELEMS) {
        u32 w[4] = { 0u, 0u, 0u, 0u };
#pragma unroll
        for (int i = 0; i < BC_OUT_ELEMS; i++) {
          const float v = __fmul_rn(bc_staged(tile, tr0 + i0 + i, tc), enc[(i0 + i) / BC_CBR]);
          bc_pack_code(w, i, bc_encode_one(v, sr, rng, (u64)(rows * cols + c * rows + r + i0 + i)));
        }
        const i64 rr = r + i0;
        if (rr >= rows) break;
        const i64 left = (rows - rr) * BC_ELEM_BITS / 8;
        bc_store_codes<16>(col_data + c * out_row_bytes + rr * BC_ELEM_BITS / 8, w, vec_col && left >= 16,
                           left < 16 ? (int)left : 16);
      }
#else
#pragma unroll 4
      for (int i = 0; i < BC_RUN_C; i++) {
        if (r + i >= rows) break;
        const float v = __fmul_rn(bc_staged(tile, tr0 + i, tc), enc[i / BC_CBR]);
        col_data[(r + i) * cols + c] = (u8)bc_encode_one(v, sr, rng, (u64)(rows * cols + c * rows + r + i));
      }
#endif
    }
  }
#endif
}
