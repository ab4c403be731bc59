// templates/comm_bamax.cu: partial block amaxes of the rows a rank holds of the block rows that
// straddle ranks (runtime/comm: the all-gather's boundary exchange). For slot s in {0, 1} and
// column c of in[rows, cols] (row stride ld): max |x| over rows [lo_s, hi_s) of column c, folded
// into out[s * nbc + c / group] (a block's columns: 1 for N x 1 columnwise blocks, N for N x N
// blocks) with an integer atomicMax on the fp32 bits. NaN is ignored (fmaxf) exactly as the
// block quantize's amax ignores it, so the true block amax is the max of the parts. The host
// zeroes out[2 * nbc] first.

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const BC_DTYPE_T *__restrict__ in, i64 ld, i64 cols, i64 group, i64 nbc, i64 lo0, i64 hi0, i64 lo1, i64 hi1,
          float *__restrict__ out) {
#pragma unroll 1
  for (i64 t = (i64)BC_BID.x * BC_THREADS + threadIdx.x; t < 2 * cols; t += (i64)BC_GDIM.x * BC_THREADS) {
    const int s = t >= cols;
    const i64 c = t - (s ? cols : 0);
    const i64 lo = s ? lo1 : lo0, hi = s ? hi1 : hi0;
    float m = 0.0f;
#pragma unroll 1
    for (i64 r = lo; r < hi; r++) m = fmaxf(m, fabsf(bc_load_hp(in + r * ld, c)));
    if (m > 0.0f) atomicMax((unsigned int *)(out + s * nbc + c / group), __float_as_uint(m));
  }
}
