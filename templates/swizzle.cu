// templates/swizzle.cu: copy a block format's scale matrix from one layout to another (compact
// <-> the 128x4 GEMM swizzle). Every entry of the destination's padded logical matrix
// [dst.prows, dst.pcols] is written: the source entry inside the logical matrix, zero outside.
// Grid-stride, one entry per thread.

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const void *__restrict__ src, bc_sl s, void *__restrict__ dst, bc_sl d) {
  const i64 n = d.prows * d.pcols;
#pragma unroll 1
  for (i64 i = (i64)BC_BID.x * BC_THREADS + threadIdx.x; i < n; i += (i64)BC_GDIM.x * BC_THREADS) {
    const i64 r = i / d.pcols, c = i % d.pcols;
    const bool in = r < d.lrows && c < d.lcols;
#if BC_SCALE_BYTES == 4
    ((u32 *)dst)[bc_sl_offset(d, r, c)] = in ? ((const u32 *)src)[bc_sl_offset(s, r, c)] : 0u;
#else
    ((u8 *)dst)[bc_sl_offset(d, r, c)] = in ? ((const u8 *)src)[bc_sl_offset(s, r, c)] : (u8)0;
#endif
  }
}
