// templates/quantize_tile.cu: per-tensor scaled quantize through a tile, for the columnwise
// (transposed) output, and the rowwise output in the same read when BC_ROWWISE.
//   row_out[r, c] = encode(x[r, c] * scale)     [rows, cols]
//   col_out[c, r] = encode(x[r, c] * scale)     [cols, rows]
// One block takes a BC_TILE_ROWS x BC_TILE_COLS tile. Phase 1 reads it once (16-byte vectors
// when the tile is whole and vec_ok, else one element per thread, consecutive threads on
// consecutive columns), writes the rowwise codes straight from registers, and stages the scaled
// values in shared memory. Phase 2 writes the transposed codes, BC_COL_VEC bytes per thread.

#define BC_TILE_VECS (BC_TILE_COLS / BC_VEC)            /* vectors per tile row */
#define BC_LOAD_ROWS (BC_THREADS / BC_TILE_VECS)         /* tile rows per vector pass */
#define BC_LOAD_PASSES (BC_TILE_ROWS / BC_LOAD_ROWS)

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ scale_ptr,
          u8 *__restrict__ row_out, u8 *__restrict__ col_out, float *__restrict__ row_scale_inv,
          float *__restrict__ col_scale_inv, int vec_ok) {
  __shared__ float tile[BC_TILE_ROWS][BC_TILE_COLS + 1];
  const float scale = *scale_ptr;
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    float si = __frcp_rn(scale);
    if (row_scale_inv) *row_scale_inv = si;
    if (col_scale_inv) *col_scale_inv = si;
  }
  const i64 c0 = (i64)blockIdx.x * BC_TILE_COLS;
  const int tid = threadIdx.x;
  const i64 tiles_y = (rows + BC_TILE_ROWS - 1) / BC_TILE_ROWS;
  for (i64 by = blockIdx.y; by < tiles_y; by += gridDim.y) {
  const i64 r0 = by * BC_TILE_ROWS;
  const bool whole = r0 + BC_TILE_ROWS <= rows && c0 + BC_TILE_COLS <= cols;

  if (whole && vec_ok) {
    uint4 v[BC_LOAD_PASSES];
    const int vr = tid / BC_TILE_VECS, vc = (tid % BC_TILE_VECS) * BC_VEC;
#pragma unroll
    for (int p = 0; p < BC_LOAD_PASSES; p++)
      v[p] = *(const uint4 *)(in + (r0 + vr + p * BC_LOAD_ROWS) * ld + c0 + vc);
#pragma unroll
    for (int p = 0; p < BC_LOAD_PASSES; p++) {
      const int tr = vr + p * BC_LOAD_ROWS;
      float f[BC_VEC];
      bc_unpack16(v[p], f);
#pragma unroll
      for (int j = 0; j < BC_VEC; j++) {
        f[j] = __fmul_rn(f[j], scale);
        tile[tr][vc + j] = f[j];
      }
#if BC_ROWWISE
      u32 w[(BC_VEC + 3) / 4];
#pragma unroll
      for (int j = 0; j < BC_VEC; j += 2) {
        u32 q = bc_encode2(f[j], f[j + 1]);
        if ((j & 3) == 0) w[j >> 2] = q; else w[j >> 2] |= q << 16;
      }
      u8 *dst = row_out + (r0 + tr) * cols + c0 + vc;
#if BC_VEC == 8
      *(uint2 *)dst = make_uint2(w[0], w[1]);
#else
      *(u32 *)dst = w[0];
#endif
#endif
    }
  } else {
    for (int i = tid; i < BC_TILE_ROWS * BC_TILE_COLS; i += BC_THREADS) {
      const int tr = i / BC_TILE_COLS, tc = i % BC_TILE_COLS;
      const i64 r = r0 + tr, c = c0 + tc;
      float f = 0.0f;
      if (r < rows && c < cols) {
        f = __fmul_rn(bc_load_hp(in + r * ld, c), scale);
#if BC_ROWWISE
        row_out[r * cols + c] = (u8)bc_encode1(f);
#endif
      }
      tile[tr][tc] = f;
    }
  }
  __syncthreads();

  // Phase 2: columnwise. Thread -> (tile column tc, BC_COL_VEC consecutive tile rows).
#define BC_COL_GROUPS (BC_TILE_ROWS / BC_COL_VEC)
#define BC_COL_PER_PASS (BC_THREADS / BC_COL_GROUPS)
  const int g = tid % BC_COL_GROUPS;
  const int tr = g * BC_COL_VEC;
  const bool col_vec_ok = whole && vec_ok && (rows % BC_COL_VEC) == 0;
  for (int tc = tid / BC_COL_GROUPS; tc < BC_TILE_COLS; tc += BC_COL_PER_PASS) {
    const i64 c = c0 + tc;
    if (c >= cols) break;
    u8 *dst = col_out + c * rows + r0 + tr;
    if (col_vec_ok) {
      u32 w[(BC_COL_VEC + 3) / 4];
#pragma unroll
      for (int j = 0; j < BC_COL_VEC; j += 2) {
        u32 q = bc_encode2(tile[tr + j][tc], tile[tr + j + 1][tc]);
        if ((j & 3) == 0) w[j >> 2] = q; else w[j >> 2] |= q << 16;
      }
#if BC_COL_VEC == 16
      *(uint4 *)dst = make_uint4(w[0], w[1], w[2], w[3]);
#elif BC_COL_VEC == 8
      *(uint2 *)dst = make_uint2(w[0], w[1]);
#elif BC_COL_VEC == 4
      *(u32 *)dst = w[0];
#elif BC_COL_VEC == 2
      *(u16 *)dst = (u16)w[0];
#endif
    } else {
#pragma unroll
      for (int j = 0; j < BC_COL_VEC; j++)
        if (r0 + tr + j < rows) dst[j] = (u8)bc_encode1(tile[tr + j][tc]);
    }
  }
  __syncthreads();  // the next tile overwrites the staging buffer
  }
}
