// templates/selftest_rcp.cu: proves bc_rcp_rn (common.cuh) gives the bits of __frcp_rn for every
// one of the 2^32 fp32 bit patterns in [first, first+count) (NaN inputs: both NaN), and that
// __frcp_rn of every positive finite x equals the reference's 1 / x, a double quotient rounded to
// fp32 (bc_tensor_scale_from_amax's two-level decode factor).
// Counts mismatches into *bad and keeps the first few (input bits, __frcp_rn bits, the other's bits).

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(u64 first, u64 count, unsigned long long *__restrict__ bad, u32 *__restrict__ examples, int max_examples) {
  const u64 stride = (u64)gridDim.x * BC_THREADS;
  for (u64 i = (u64)blockIdx.x * BC_THREADS + threadIdx.x; i < count; i += stride) {
    const u32 bits = (u32)(first + i);
    const float x = __uint_as_float(bits), g = __frcp_rn(x);
    float h = bc_rcp_rn(x);
    bool differ = g != g ? h == h : __float_as_uint(g) != __float_as_uint(h);
    if (!differ && bits - 1u < 0x7F7FFFFFu) {  // 0 < x <= FLT_MAX
      h = __double2float_rn(__ddiv_rn(1.0, (double)x));
      differ = __float_as_uint(g) != __float_as_uint(h);
    }
    if (differ) {
      unsigned long long n = atomicAdd(bad, 1ull);
      if ((int)n < max_examples) {
        examples[3 * n] = bits;
        examples[3 * n + 1] = __float_as_uint(g);
        examples[3 * n + 2] = __float_as_uint(h);
      }
    }
  }
}
