// templates/copy32.cu: dst[0 .. n) = src[0 .. n) for fp32 words (grid-stride). Its list variant
// hands the all-reduced amaxes of a list of tensors back to each tensor's own amax word in one
// launch (runtime/comm: bc_quantize_list_comm).

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(const float *__restrict__ src, float *__restrict__ dst, i64 n) {
#pragma unroll 1
  for (i64 i = (i64)BC_BID.x * BC_THREADS + threadIdx.x; i < n; i += (i64)BC_GDIM.x * BC_THREADS) dst[i] = src[i];
}
