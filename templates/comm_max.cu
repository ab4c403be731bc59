// templates/comm_max.cu: out[i] = max over w < nranks of in[w * n + i] (fp32, NaN ignored as
// fmaxf does; amaxes are never NaN). The local transport's all-reduce MAX, after each rank has
// pulled every rank's vector into `in` (runtime/comm/bc_transport.c).

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const float *__restrict__ in, i64 nranks, i64 n, float *__restrict__ out) {
#pragma unroll 1
  for (i64 i = (i64)BC_BID.x * BC_THREADS + threadIdx.x; i < n; i += (i64)BC_GDIM.x * BC_THREADS) {
    float m = in[i];
    for (i64 w = 1; w < nranks; w++) m = fmaxf(m, in[w * n + i]);
    out[i] = m;
  }
}
