// templates/selftest_cvt.cu: proves the element's fast conversions give the bits of the generic
// ones, for every one of the 2^32 fp32 bit patterns in [first, first+count):
//  - encode: bc_encode1 (the hardware cvt.rn.satfinite where the arch has it) and the integer
//    form bc_encode_int_t against the generic float-arithmetic encode (bc_encode_generic);
//  - decode: every pair of codes through bc_decode2 (hardware or fp16 placement) against the
//    generic bc_decode (same fp32 bits, or both NaN); those examples are tagged 0xDEC00000.
// Counts mismatches into *bad and keeps the first few (input bits, generic code, fast code).

static __device__ void bc_selftest_bad(unsigned long long *bad, u32 *examples, int max_examples, u32 in, u32 g, u32 h) {
  unsigned long long n = atomicAdd(bad, 1ull);
  if ((int)n < max_examples) {
    examples[3 * n] = in;
    examples[3 * n + 1] = g;
    examples[3 * n + 2] = h;
  }
}

extern "C" __global__ void __launch_bounds__(BC_THREADS)
${KERNEL}(u64 first, u64 count, unsigned long long *__restrict__ bad, u32 *__restrict__ examples, int max_examples) {
  const u64 stride = (u64)gridDim.x * BC_THREADS;
  const u64 t = (u64)blockIdx.x * BC_THREADS + threadIdx.x;
  const u32 mask = (1u << BC_ELEM_BITS) - 1u;
  if (first == 0 && t < (1u << (2 * BC_ELEM_BITS))) {
    float a, b;
    bc_decode2((u32)t, &a, &b);
    float ga = bc_decode((u32)t & mask), gb = bc_decode(((u32)t >> BC_ELEM_BITS) & mask);
    bool same = (a != a ? ga != ga : __float_as_uint(a) == __float_as_uint(ga)) &&
                (b != b ? gb != gb : __float_as_uint(b) == __float_as_uint(gb));
    if (!same) bc_selftest_bad(bad, examples, max_examples, 0xDEC00000u | (u32)t, __float_as_uint(ga), __float_as_uint(a));
  }
  for (u64 i = t; i < count; i += stride) {
    u32 bits = (u32)(first + i);
    float x = __uint_as_float(bits);
    u32 g = bc_encode_generic(x);
    u32 h = bc_encode1(x);
    u32 n = bc_encode_int_t<bc_elem>(x);
    if (g != h) bc_selftest_bad(bad, examples, max_examples, bits, g, h);
    else if (g != n) bc_selftest_bad(bad, examples, max_examples, bits, g, n);
  }
}
