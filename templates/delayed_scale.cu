// templates/delayed_scale.cu: delayed scaling of n per-tensor-scaled tensors, one thread each
// (TransformerEngine's rule; the CPU reference is bc_ref_delayed_scale_update):
//   history [L, n] fp32, row 0 the amax of the step just done;
//   a = max over the L rows (algo 0; a NaN wins, as torch.max) or row 0 (algo 1);
//   a > 0 and finite: scale = (elem_max / a) / 2^margin, each step rounded once, an Inf scale
//   becomes FLT_MAX, pow2 keeps sign+exponent; otherwise the old scale stays;
//   scale_inv = 1 / scale (if asked); then the history rolls: row j takes row j+1, row L-1 the
//   old row 0, row 0 is zeroed for the next step's amax.

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(float *__restrict__ history, i64 n, int hlen, float *__restrict__ scale, float *__restrict__ scale_inv,
          float margin_div, int algo) {
  const i64 i = (i64)blockIdx.x * BC_THREADS + threadIdx.x;
  if (i >= n) return;
  const float first = history[i];
  float a = first;
  if (algo == 0) {
    for (int j = 1; j < hlen; j++) {
      const float h = history[(i64)j * n + i];
      if (h > a || h != h) a = (a != a) ? a : h;
    }
  }
  float s = scale[i];
  if (a > 0.0f && a != __uint_as_float(0x7F800000u)) {  // false for NaN, 0, negatives and Inf
    s = __fdiv_rn(__fdiv_rn(BC_ELEM_MAX_FINITE, a), margin_div);
    if (s == __uint_as_float(0x7F800000u)) s = 3.40282346638528859812e+38f;
#if BC_SCALE_POW2
    s = __uint_as_float(__float_as_uint(s) & 0xFF800000u);
#endif
    scale[i] = s;
  }
  if (scale_inv) scale_inv[i] = bc_rcp_rn(s);
  for (int j = 0; j + 1 < hlen; j++) history[(i64)j * n + i] = history[(i64)(j + 1) * n + i];
  if (hlen > 1) history[(i64)(hlen - 1) * n + i] = first;
  history[i] = 0.0f;
}
