// templates/zero.cu: p[0 .. n) = 0.0f (grid-stride). Its list variant zeroes the amax words of a
// list of tensors in one launch before their atomicMax (runtime/ops: bci_zero32).

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(float *__restrict__ p, i64 n) {
#pragma unroll 1
  for (i64 i = (i64)BC_BID.x * BC_THREADS + threadIdx.x; i < n; i += (i64)BC_GDIM.x * BC_THREADS) p[i] = 0.0f;
}
