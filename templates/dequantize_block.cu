// templates/dequantize_block.cu: block-scaled dequantize of one direction (BC_DEQ_ROWWISE or
// columnwise), every block format:
//   out[dr, dc] = dtype(decode(q[dr, dc]) * scale)         (two-level: (q * s) * S_dec)
// q is the stored data matrix [drows, dcols] (4-bit elements two per byte, nibble order from
// the spec); out has the same shape with row stride ld. The view (whose rows hold the blocks) is
// the data itself (BC_DATA_IS_VIEW) or its transpose (MXFP8 columnwise); the element's block in
// the view is BC_VBR x BC_VBC and its scale entry is found through the scale layout bc_sl.
// A thread converts the run of 16 data bytes (BC_RUN elements) at one column of BC_DQ_ROWS data
// rows at a time, loads first; x covers a row's runs, y strides over the rows.

#define BC_RUN (128 / BC_ELEM_BITS)

static __device__ __forceinline__ float bc_dq_factor(const void *scale, const bc_sl &sl, i64 dr, i64 dc) {
  const i64 vr = BC_DATA_IS_VIEW ? dr : dc, vc = BC_DATA_IS_VIEW ? dc : dr;
  const i64 off = bc_sl_offset(sl, sl.per_row ? vr : vr / BC_VBR, vc / BC_VBC);
#if BC_SCALE_BYTES == 4
  const u32 stored = ((const u32 *)scale)[off];
#else
  const u32 stored = ((const u8 *)scale)[off];
#endif
  return bc_scale_dec(stored);
}

static __device__ __forceinline__ float bc_dq_value(float decoded, float f, const bc_tensor_scale &ts) {
#if BC_RULE == 3
  return __fmul_rn(__fmul_rn(decoded, f), ts.dec);
#else
  return __fmul_rn(decoded, f);
#endif
}

static __device__ __forceinline__ u32 bc_code_at(const u32 *w, int j) {
#if BC_ELEM_BITS == 8
  return (w[j >> 2] >> (8 * (j & 3))) & 0xFFu;
#else
  const int nib = BC_PACK_HIGH_FIRST ? (j ^ 1) : j;
  return (w[nib >> 3] >> (4 * (nib & 7))) & 0xFu;
#endif
}

// Decode, scale and store one run of codes w at data (dr, dc0).
static __device__ __forceinline__ void bc_dq_run(const u32 *w, i64 dr, i64 dc0, i64 dcols, const void *scale, const bc_sl &sl,
                                                 const bc_tensor_scale &ts, BC_DTYPE_T *dst, bool whole, int vec_ok) {
  float f[BC_RUN];
#if BC_ELEM_BITS == 8
#pragma unroll
  for (int j = 0; j < BC_RUN; j += 2) bc_decode2((w[j >> 2] >> (8 * (j & 3))) & 0xFFFFu, &f[j], &f[j + 1]);
#else
#pragma unroll
  for (int j = 0; j < BC_RUN; j++) f[j] = bc_decode(bc_code_at(w, j));
#endif
#if BC_DATA_IS_VIEW && BC_VBC >= BC_RUN
  // one block covers the run: one scale lookup
  const float fac = bc_dq_factor(scale, sl, dr, dc0);
#pragma unroll
  for (int j = 0; j < BC_RUN; j++) f[j] = bc_dq_value(f[j], fac, ts);
#elif BC_DATA_IS_VIEW
#pragma unroll
  for (int b = 0; b < BC_RUN / BC_VBC; b++) {
    const float fac = (dc0 + b * BC_VBC < dcols) ? bc_dq_factor(scale, sl, dr, dc0 + b * BC_VBC) : 0.0f;
#pragma unroll
    for (int j = 0; j < BC_VBC; j++) f[b * BC_VBC + j] = bc_dq_value(f[b * BC_VBC + j], fac, ts);
  }
#else
#pragma unroll
  for (int j = 0; j < BC_RUN; j++)
    f[j] = (dc0 + j < dcols) ? bc_dq_value(f[j], bc_dq_factor(scale, sl, dr, dc0 + j), ts) : 0.0f;
#endif
  if (whole && vec_ok) {
#if BC_DTYPE == 0
#pragma unroll
    for (int j = 0; j < BC_RUN; j += 4)
      *(uint4 *)(dst + j) = make_uint4(bc_f32_bits_canonical(f[j]), bc_f32_bits_canonical(f[j + 1]),
                                       bc_f32_bits_canonical(f[j + 2]), bc_f32_bits_canonical(f[j + 3]));
#else
#pragma unroll
    for (int j = 0; j < BC_RUN; j += 8)
      *(uint4 *)(dst + j) = make_uint4(bc_pack2_hp(f[j], f[j + 1]), bc_pack2_hp(f[j + 2], f[j + 3]),
                                       bc_pack2_hp(f[j + 4], f[j + 5]), bc_pack2_hp(f[j + 6], f[j + 7]));
#endif
  } else if (whole) {
#pragma unroll
    for (int j = 0; j < BC_RUN; j++) bc_store_hp(dst, j, f[j]);
  } else {
#pragma unroll 1
    for (int j = 0; j < BC_RUN && dc0 + j < dcols; j++) bc_store_hp(dst, j, f[j]);
  }
}

#define BC_DQ_ROWS 4 /* data rows per thread, all loads issued before the first conversion */

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const u8 *__restrict__ q, i64 drows, i64 dcols, const void *__restrict__ scale, bc_sl sl,
          const float *__restrict__ global_amax, BC_DTYPE_T *__restrict__ out, i64 ld, int vec_ok) {
  const bc_tensor_scale ts = bc_tensor_scale_from_amax(global_amax);
  const i64 row_bytes = dcols * BC_ELEM_BITS / 8;
  const i64 runs_per_row = (dcols + BC_RUN - 1) / BC_RUN;
  const i64 run = (i64)blockIdx.x * BC_THREADS + threadIdx.x;
  if (run >= runs_per_row) return;
  const i64 dc0 = run * BC_RUN;
  const bool whole = dc0 + BC_RUN <= dcols;
#pragma unroll 1
  for (i64 dr0 = blockIdx.y; dr0 < drows; dr0 += (i64)gridDim.y * BC_DQ_ROWS) {
    u32 w[BC_DQ_ROWS][4];
#pragma unroll
    for (int k = 0; k < BC_DQ_ROWS; k++) {
      const i64 dr = dr0 + (i64)k * gridDim.y;
      w[k][0] = w[k][1] = w[k][2] = w[k][3] = 0u;
      if (dr >= drows) continue;
      const u8 *src = q + dr * row_bytes + dc0 * BC_ELEM_BITS / 8;
      if (whole && vec_ok) {
        const uint4 v = *(const uint4 *)src;
        w[k][0] = v.x; w[k][1] = v.y; w[k][2] = v.z; w[k][3] = v.w;
      } else if (whole) {
#pragma unroll
        for (int i = 0; i < 16; i++) w[k][i >> 2] |= (u32)src[i] << (8 * (i & 3));
      } else {
        const i64 nb = ((dcols - dc0) * BC_ELEM_BITS + 7) / 8;
#pragma unroll 1
        for (i64 i = 0; i < nb; i++) w[k][i >> 2] |= (u32)src[i] << (8 * (i & 3));
      }
    }
#pragma unroll
    for (int k = 0; k < BC_DQ_ROWS; k++) {
      const i64 dr = dr0 + (i64)k * gridDim.y;
      if (dr < drows) bc_dq_run(w[k], dr, dc0, dcols, scale, sl, ts, out + dr * ld + dc0, whole, vec_ok);
    }
  }
}
