// templates/selftest_cvt.cu: proves the element's hardware conversion (cvt.rn.satfinite) gives
// the bits of the generic encode, for every one of the 2^32 fp32 bit patterns in [first, first+count).
// Also every pair of codes through bc_decode2 (the hardware decode where the arch has it)
// against the generic bc_decode (same fp32 bits, or both NaN); those examples are tagged 0xDEC00000.
// Counts mismatches into *bad and keeps the first few (input bits, generic code, hw code).

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(u64 first, u64 count, unsigned long long *__restrict__ bad, u32 *__restrict__ examples, int max_examples) {
  const u64 stride = (u64)gridDim.x * BC_THREADS;
  const u64 t = (u64)blockIdx.x * BC_THREADS + threadIdx.x;
  if (first == 0 && t < 65536) {
    float a, b;
    bc_decode2((u32)t, &a, &b);
    float ga = bc_decode((u32)t & 0xFFu), gb = bc_decode((u32)t >> 8);
    bool same = (a != a ? ga != ga : __float_as_uint(a) == __float_as_uint(ga)) &&
                (b != b ? gb != gb : __float_as_uint(b) == __float_as_uint(gb));
    if (!same) {
      unsigned long long n = atomicAdd(bad, 1ull);
      if ((int)n < max_examples) {
        examples[3 * n] = 0xDEC00000u | (u32)t;
        examples[3 * n + 1] = __float_as_uint(ga);
        examples[3 * n + 2] = __float_as_uint(a);
      }
    }
  }
  for (u64 i = (u64)blockIdx.x * BC_THREADS + threadIdx.x; i < count; i += stride) {
    u32 bits = (u32)(first + i);
    float x = __uint_as_float(bits);
    u32 g = bc_encode_generic(x);
    u32 h = bc_encode1(x);
    if (g != h) {
      unsigned long long n = atomicAdd(bad, 1ull);
      if ((int)n < max_examples) {
        examples[3 * n] = bits;
        examples[3 * n + 1] = g;
        examples[3 * n + 2] = h;
      }
    }
  }
}
