// templates/dequantize_elems.cu: per-tensor dequantize, element by element:
//   out[r, c] = dtype(decode(q[r, c]) * scale_inv)  for c0 <= c < cols    q: [rows, cols] codes,
// contiguous; out: row stride ld. The part of a launch the vector kernel (dequantize.cu) cannot
// take: a row's partial last slot (c0 = the whole slots' end), or all of it when the pointers or
// the stride are not aligned (c0 = 0). Compiled only when a launch needs it.

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const u8 *__restrict__ q, i64 rows, i64 cols, i64 ld, i64 c0, const float *__restrict__ scale_inv_ptr,
          BC_DTYPE_T *__restrict__ out) {
  const float si = *scale_inv_ptr;
  for (i64 r = BC_BID.y; r < rows; r += BC_GDIM.y)
#pragma unroll 1
    for (i64 c = c0 + (i64)BC_BID.x * BC_THREADS + threadIdx.x; c < cols; c += (i64)BC_GDIM.x * BC_THREADS) {
      float a, unused;
      bc_decode2(q[r * cols + c], &a, &unused);
      bc_store_hp(out + r * ld, c, __fmul_rn(a, si));
    }
}
