// templates/dequantize.cu: per-tensor dequantize, out[r, c] = dtype(decode(q[r, c]) * scale_inv)
// q: [rows, cols] codes, contiguous; out: [rows, cols] with row stride ld. NaN codes give the
// canonical NaN of the output dtype. The host flattens contiguous outputs to one row. Each thread
// converts BC_UNROLL whole slots of 8 codes, BC_THREADS apart, loads first. The host launches this
// kernel only where the pointers and the stride are aligned; a row's partial last slot, and every
// element of a misaligned launch, go to dequantize_elems.cu (its own kernel, compiled on demand).

extern "C" __global__ void __launch_bounds__(BC_THREADS, BC_MIN_BLOCKS)
${KERNEL}(const u8 *__restrict__ q, i64 rows, i64 cols, i64 ld, const float *__restrict__ scale_inv_ptr,
          BC_DTYPE_T *__restrict__ out) {
  const float si = *scale_inv_ptr;
  const i64 full = cols / 8;
  // one row per (y, z) block: no row loop (it cost ~4 ms of every cold compile; tests/bench/NOTES.md)
  const i64 r = BC_BID.y + (i64)BC_BID.z * BC_GDIM.y;
  if (r < rows) {
    const u8 *src = q + r * cols;
    BC_DTYPE_T *dst = out + r * ld;
    const i64 base = (i64)BC_BID.x * BC_UNROLL * BC_THREADS + threadIdx.x;
    uint2 v[BC_UNROLL];
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      i64 s = base + (i64)u * BC_THREADS;
      if (s < full) v[u] = *(const uint2 *)(src + s * 8);
    }
#pragma unroll
    for (int u = 0; u < BC_UNROLL; u++) {
      i64 s = base + (i64)u * BC_THREADS;
      if (s >= full) break;
      i64 c0 = s * 8;
#if BC_DTYPE == 0
      u32 h[8];
      bc_decode_scaled8(v[u], si, h);
      *(uint4 *)(dst + c0) = make_uint4(h[0], h[1], h[2], h[3]);
      *(uint4 *)(dst + c0 + 4) = make_uint4(h[4], h[5], h[6], h[7]);
#else
      u32 h[4];
      bc_decode_scaled8(v[u], si, h);
      *(uint4 *)(dst + c0) = make_uint4(h[0], h[1], h[2], h[3]);
#endif
    }
  }
}
