// templates/scale.cu: per-tensor scale from amax (one thread).
//   amax < eps -> eps; amax 0, Inf or NaN -> scale 1; scale = fmax / amax (IEEE);
//   Inf scale -> BC_SCALE_INF_VALUE; pow2 keeps sign+exponent; scale_inv = 1 / scale.

extern "C" __global__ void __launch_bounds__(32)
${KERNEL}(const float *__restrict__ amax_ptr, float *__restrict__ scale_out, float *__restrict__ scale_inv_out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  float amax = *amax_ptr;
  if (amax < BC_SCALE_EPS) amax = BC_SCALE_EPS;
  float scale;
  if (amax == 0.0f || amax != amax || amax == __uint_as_float(0x7F800000u)) {
    scale = 1.0f;
  } else {
    scale = __fdiv_rn(BC_ELEM_MAX_FINITE, amax);
    if (scale == __uint_as_float(0x7F800000u)) scale = BC_SCALE_INF_VALUE;
#if BC_SCALE_POW2
    scale = __uint_as_float(__float_as_uint(scale) & 0xFF800000u);
#endif
  }
  *scale_out = scale;
  if (scale_inv_out) *scale_inv_out = __frcp_rn(scale);
}
