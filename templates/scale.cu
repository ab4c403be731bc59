// templates/scale.cu: per-tensor scale from amax (one thread).
//   amax < eps -> eps; amax 0, Inf or NaN -> scale 1; scale = fmax / amax (IEEE);
//   Inf scale -> BC_SCALE_INF_VALUE; pow2 keeps sign+exponent; scale_inv = 1 / scale.

extern "C" __global__ void __launch_bounds__(32)
${KERNEL}(const float *__restrict__ amax_ptr, float *__restrict__ scale_out, float *__restrict__ scale_inv_out) {
  if (threadIdx.x != 0 || BC_BID.x != 0) return;
  const float scale = bc_scale_from_amax(*amax_ptr, BC_SCALE_INF_VALUE);
  *scale_out = scale;
  if (scale_inv_out) *scale_inv_out = bc_rcp_rn(scale);
}
