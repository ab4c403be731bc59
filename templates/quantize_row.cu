// templates/quantize_row.cu: per-tensor scaled quantize, rowwise output only.
//   out[r, c] = encode(fp32(in[r, c]) * scale)      in: [rows, cols] with row stride ld
// The host flattens contiguous inputs to one row. Each thread converts BC_UNROLL vectors of
// BC_VEC elements (16 bytes of input), all loads issued before the first conversion; a vector
// that runs past the row end, or any vector when vec_ok is 0 (misaligned pointers or stride),
// goes element by element.

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ scale_ptr,
          u8 *__restrict__ out, float *__restrict__ scale_inv_out, int vec_ok) {
  const float scale = *scale_ptr;
  if (scale_inv_out && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *scale_inv_out = __frcp_rn(scale);
  const i64 slots = (cols + BC_VEC - 1) / BC_VEC;
  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    const BC_DTYPE_T *src = in + r * ld;
    u8 *dst = out + r * cols;
    const i64 base = (i64)blockIdx.x * BC_UNROLL * BC_THREADS + threadIdx.x;
    uint4 v[BC_UNROLL];
    bc_load_slots(src, base, slots, cols, vec_ok, v);
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      i64 s = base + (i64)u * BC_THREADS;
      i64 c0 = s * BC_VEC;
      if (vec_ok && s < slots && c0 + BC_VEC <= cols) {
        float f[BC_VEC];
        bc_unpack16(v[u], f);
        u32 w[(BC_VEC + 3) / 4];
        bc_encode_scaled(f, scale, w);
#if BC_VEC == 8
        *(uint2 *)(dst + c0) = make_uint2(w[0], w[1]);
#elif BC_VEC == 4
        *(u32 *)(dst + c0) = w[0];
#else
#error "BC_VEC must be 4 or 8"
#endif
      }
    }
    // the slots the vector path did not take: element by element, kept out of the unrolled loop
    if (!vec_ok || (base + (i64)(BC_UNROLL - 1) * BC_THREADS + 1) * BC_VEC > cols)  /* only near the row end */
#pragma unroll 1
    for (int u = 0; u < BC_UNROLL; u++) {
      i64 s = base + (i64)u * BC_THREADS;
      i64 c0 = s * BC_VEC;
      if (s >= slots || (vec_ok && c0 + BC_VEC <= cols)) continue;
#pragma unroll 1
      for (i64 c = c0; c < cols && c < c0 + BC_VEC; c++) dst[c] = (u8)bc_encode1(__fmul_rn(bc_load_hp(src, c), scale));
    }
  }
}
