// templates/quantize_elems.cu: per-tensor scaled quantize, rowwise output, element by element:
//   out[r, c] = encode(fp32(in[r, c]) * scale)  for c0 <= c < cols    in: [rows, cols], row stride ld
// The part of a launch the vector kernel (quantize_row.cu) cannot take: a row's partial last
// vector (c0 = the whole vectors' end), or all of it when the pointers or the stride are not
// aligned (c0 = 0). Compiled only when a launch needs it. scale_inv_out: set when the vector
// kernel is not launched.

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, i64 c0, const float *__restrict__ scale_ptr,
          u8 *__restrict__ out, float *__restrict__ scale_inv_out) {
  const float scale = *scale_ptr;
  if (scale_inv_out && BC_BID.x == 0 && BC_BID.y == 0 && threadIdx.x == 0) *scale_inv_out = bc_rcp_rn(scale);
  for (i64 r = BC_BID.y; r < rows; r += BC_GDIM.y)
#pragma unroll 1
    for (i64 c = c0 + (i64)BC_BID.x * BC_THREADS + threadIdx.x; c < cols; c += (i64)BC_GDIM.x * BC_THREADS)
      out[r * cols + c] = (u8)bc_encode1(__fmul_rn(bc_load_hp(in + r * ld, c), scale));
}
