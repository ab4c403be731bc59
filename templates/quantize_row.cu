// templates/quantize_row.cu: per-tensor scaled quantize, rowwise output only.
//   out[r, c] = encode(fp32(in[r, c]) * scale)      in: [rows, cols] with row stride ld
// The host flattens contiguous inputs to one row. Each thread converts BC_UNROLL whole vectors of
// BC_VEC elements (16 bytes of input), all loads issued before the first conversion. The host
// launches this kernel only where the pointers and the stride are 16-byte aligned; a row's
// partial last vector, and every element of a misaligned launch, go to quantize_elems.cu (its own
// kernel: the element-wise code compiled into this one cost ~10 ms of every cold compile).

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, const float *__restrict__ scale_ptr,
          u8 *__restrict__ out, float *__restrict__ scale_inv_out) {
  const float scale = *scale_ptr;
  if (scale_inv_out && BC_BID.x == 0 && BC_BID.y == 0 && threadIdx.x == 0) *scale_inv_out = bc_rcp_rn(scale);
  const i64 full = cols / BC_VEC;
  // one row per (y, z) block: no row loop (it cost ~4 ms of every cold compile; tests/bench/NOTES.md)
  const i64 r = BC_BID.y + (i64)BC_BID.z * BC_GDIM.y;
  if (r < rows) {
    const BC_DTYPE_T *src = in + r * ld;
    u8 *dst = out + r * cols;
    const i64 base = (i64)BC_BID.x * BC_UNROLL * BC_THREADS + threadIdx.x;
    uint4 v[BC_UNROLL];
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      i64 s = base + (i64)u * BC_THREADS;
      if (s < full) v[u] = *(const uint4 *)(src + s * BC_VEC);
    }
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      i64 s = base + (i64)u * BC_THREADS;
      if (s >= full) break;
      u32 w[(BC_VEC + 3) / 4];
      bc_encode_vec16(v[u], scale, w);
#if BC_VEC == 8
      *(uint2 *)(dst + s * BC_VEC) = make_uint2(w[0], w[1]);
#elif BC_VEC == 4
      *(u32 *)(dst + s * BC_VEC) = w[0];
#else
#error "BC_VEC must be 4 or 8"
#endif
    }
  }
}
