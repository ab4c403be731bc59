// templates/quantize_tile.cu: per-tensor scaled quantize through a tile, for the columnwise
// (transposed) output, and the rowwise output in the same read when BC_ROWWISE.
//   row_out[r, c] = encode(x[r, c] * scale)     [rows, cols]
//   col_out[c, r] = encode(x[r, c] * scale)     [cols, rows]
// One block per BC_TILE_ROWS x BC_TILE_COLS tile. Each thread holds BC_LOAD_PASSES runs of BC_VEC
// consecutive elements of a row: one 16-byte load each when the tile is whole and the rows are
// aligned (vec_ok), else element loads masked at the edges, all issued before the first use.
// Phase 1 encodes each element once, writes the rowwise codes and stages them transposed in
// shared memory; phase 2 writes each tile column as BC_COL_VEC-byte pieces of an output row; in
// whole tiles whose output rows are not 16-byte aligned, as aligned 16-byte pieces shifted out of
// the staged bytes (BC_TILE_SHIFTED); byte by byte (consecutive threads on consecutive bytes) at
// ragged edges.

#define BC_TILE_VECS (BC_TILE_COLS / BC_VEC)            /* runs per tile row */
#define BC_LOAD_ROWS (BC_THREADS / BC_TILE_VECS)         /* tile rows per pass */
#define BC_LOAD_PASSES (BC_TILE_ROWS / BC_LOAD_ROWS)
#define BC_COL_GROUPS (BC_TILE_ROWS / BC_COL_VEC)        /* threads per tile column in phase 2 */
#define BC_COL_PER_PASS (BC_THREADS / BC_COL_GROUPS)
/* codes[col][row ^ BC_SWZ(col)]: 16-byte granules of a staging row are XOR-swizzled by bits 3.. of
 * the column, so the phase-1 byte stores of a warp (8 columns apart) hit 8 different banks while
 * phase 2 still reads whole granules. */
#define BC_SWZ(c) ((((c) >> 3) & (BC_TILE_ROWS / 16 - 1)) << 4)

/* whole tiles of unaligned rows: element loads without bounds checks and the transposed rows as
 * shifted 16-byte pieces, in the columnwise-only kernel; the rowwise + columnwise one keeps the
 * masked loads and the byte path (with the pieces it ran slower on an H100: 8192x8193 cast both
 * 214.6 -> 236.1 us, not profiled; tests/bench/NOTES.md) */
#define BC_TILE_SHIFTED (!BC_ROWWISE)

#if BC_TILE_COLS % BC_VEC || BC_THREADS % BC_TILE_VECS || BC_TILE_ROWS % BC_LOAD_ROWS || \
    BC_TILE_ROWS % BC_COL_VEC || BC_THREADS % BC_COL_GROUPS || BC_TILE_ROWS % 16 ||         \
    (BC_TILE_ROWS / 16) & (BC_TILE_ROWS / 16 - 1)
#error "tile parameters do not divide evenly (gen/tuning)"
#endif

// Raw input bits of this thread's runs in tile (r0, c0): 16-byte loads (fast), element loads
// (whole tiles of unaligned rows), element loads masked at the edges (zeros outside the tensor).
static __device__ __forceinline__ void bc_tile_load(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld,
                                                    i64 r0, i64 c0, bool fast, bool whole, int vr, int vc,
                                                    uint4 (&v)[BC_LOAD_PASSES]) {
  if (fast) {
#pragma unroll
    for (int p = 0; p < BC_LOAD_PASSES; p++) v[p] = bc_load_vec<BC_LOAD_VEC>(in, rows, cols, ld, r0 + vr + p * BC_LOAD_ROWS, c0 + vc);
  } else if (whole) {
#pragma unroll
    for (int p = 0; p < BC_LOAD_PASSES; p++) v[p] = bc_load_vec<BC_LOAD_ELEMS>(in, rows, cols, ld, r0 + vr + p * BC_LOAD_ROWS, c0 + vc);
  } else {
#pragma unroll
    for (int p = 0; p < BC_LOAD_PASSES; p++) v[p] = bc_load_vec<BC_LOAD_MASKED>(in, rows, cols, ld, r0 + vr + p * BC_LOAD_ROWS, c0 + vc);
  }
}

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ scale_ptr,
          u8 *__restrict__ row_out, u8 *__restrict__ col_out, float *__restrict__ row_scale_inv,
          float *__restrict__ col_scale_inv, int vec_ok) {
  __shared__ __align__(16) u8 codes[BC_TILE_COLS][BC_TILE_ROWS];
  const float scale = *scale_ptr;
  if (BC_BID.x == 0 && threadIdx.x == 0) {
    float si = bc_rcp_rn(scale);
    if (row_scale_inv) *row_scale_inv = si;
    if (col_scale_inv) *col_scale_inv = si;
  }
  const int tid = threadIdx.x;
  const int vr = tid / BC_TILE_VECS, vc = (tid % BC_TILE_VECS) * BC_VEC;
  const i64 tiles_x = (cols + BC_TILE_COLS - 1) / BC_TILE_COLS;
  const i64 t = BC_BID.x;
  const i64 r0 = (t / tiles_x) * BC_TILE_ROWS, c0 = (t % tiles_x) * BC_TILE_COLS;
  const bool whole = r0 + BC_TILE_ROWS <= rows && c0 + BC_TILE_COLS <= cols;
  uint4 v[BC_LOAD_PASSES];
  bc_tile_load(in, rows, cols, ld, r0, c0, whole && vec_ok, BC_TILE_SHIFTED && whole, vr, vc, v);

  // ---- phase 1: encode once, rowwise out, stage codes[col][row]
#pragma unroll
  for (int p = 0; p < BC_LOAD_PASSES; p++) {
    const int tr = vr + p * BC_LOAD_ROWS;
    u32 w[(BC_VEC + 3) / 4];
    bc_encode_vec16(v[p], scale, w);
#pragma unroll
    for (int j = 0; j < BC_VEC; j++) codes[vc + j][tr ^ BC_SWZ(vc + j)] = (u8)(w[j >> 2] >> (8 * (j & 3)));
#if BC_ROWWISE
    const i64 r = r0 + tr;
    u8 *dst = row_out + r * cols + c0 + vc;
    if (whole && vec_ok) {
#if BC_VEC == 8
      bc_store8(dst, make_uint2(w[0], w[1]));
#else
      bc_store4(dst, w[0]);
#endif
    } else if (r < rows) {
#pragma unroll
      for (int j = 0; j < BC_VEC; j++)
        if (c0 + vc + j < cols) dst[j] = (u8)(w[j >> 2] >> (8 * (j & 3)));
    }
#endif
  }
  __syncthreads();

  // ---- phase 2: columnwise out
  if (whole && vec_ok && (rows % 16) == 0) {
    const int g = tid % BC_COL_GROUPS;
#pragma unroll
    for (int tc = tid / BC_COL_GROUPS; tc < BC_TILE_COLS; tc += BC_COL_PER_PASS) {
      u8 *dst = col_out + (c0 + tc) * rows + r0 + g * BC_COL_VEC;
      const u8 *src = &codes[tc][(g * BC_COL_VEC) ^ BC_SWZ(tc)];
#if BC_COL_VEC == 16
      bc_store16(dst, *(const uint4 *)src);
#elif BC_COL_VEC == 8
      bc_store8(dst, *(const uint2 *)src);
#elif BC_COL_VEC == 4
      bc_store4(dst, *(const u32 *)src);
#else
      *(u16 *)dst = *(const u16 *)src;
#endif
    }
  } else if (BC_TILE_SHIFTED && whole) {
    // output rows (tile columns) of any alignment: each aligned 16-byte piece of a row's
    // destination shifted out of the two staged granules that hold it (common.cuh: bc_bytes_at),
    // the row's first and last piece written in parts
    constexpr int NP = BC_TILE_ROWS / 16 + 1;  // pieces a row's bytes can touch
#pragma unroll 1
    for (int i = tid; i < BC_TILE_COLS * NP; i += BC_THREADS) {
      const int tc = i / NP, q = i % NP;
      u8 *dst = col_out + (c0 + tc) * rows + r0;
      const int m = (int)((unsigned long long)dst & 15u), o = 16 * q - m;  // o: the piece's offset in the row
      if (o >= BC_TILE_ROWS) continue;
      const int g = m ? q - 1 : q;  // the staged granule holding the piece's first byte (-1: before the row)
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      const uint4 lo = g >= 0 ? *(const uint4 *)&codes[tc][(16 * g) ^ BC_SWZ(tc)] : z;
      const uint4 hi = m && g + 1 < BC_TILE_ROWS / 16 ? *(const uint4 *)&codes[tc][(16 * (g + 1)) ^ BC_SWZ(tc)] : z;
      const uint4 d = bc_bytes_at(lo, hi, (16 - m) & 15);
      if (o >= 0 && o + 16 <= BC_TILE_ROWS) bc_store16(dst + o, d);
      else bc_store_part(dst + o, d, o < 0 ? -o : 0, o + 16 <= BC_TILE_ROWS ? 16 : BC_TILE_ROWS - o);
    }
  } else {
#pragma unroll 1
    for (int i = tid; i < BC_TILE_ROWS * BC_TILE_COLS; i += BC_THREADS) {
      const int tc = i / BC_TILE_ROWS, tr = i % BC_TILE_ROWS;
      const i64 r = r0 + tr, c = c0 + tc;
      if (r < rows && c < cols) col_out[c * rows + r] = codes[tc][tr ^ BC_SWZ(tc)];
    }
  }
}
