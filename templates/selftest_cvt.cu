// templates/selftest_cvt.cu: proves the element's fast conversions give the bits of the generic
// ones, for every one of the 2^32 fp32 bit patterns in [first, first+count):
//  - encode: bc_encode1 (the hardware cvt.rn.satfinite where the arch has it, or the wider
//    element's for elements encoded through one, and then also the four-code bc_encode4 on x, -x,
//    x / 2, 2x) and the integer form bc_encode_int_t against the generic float-arithmetic encode
//    (bc_encode_generic);
//  - elements encoded in bf16x2 arithmetic (common.cuh: bc_encode_bf16x2): x paired with
//    x ^ 0x80000001 (in both orders) through the round-to-odd narrowing bc_bf16x2_rto; and the input's bits read
//    as a bf16 x (low 16 bits), an e8m0 code e (bits 16..23) and a partner bf16 (a bijection of x
//    for each value of the top 8 bits), the pair's codes bc_encode_bf16x2(bc_hmul2(x, factor(e)))
//    against the generic encode of fp32 x * factor(e) (2^32 inputs: every bf16 pair position times
//    every e8m0 factor, each bf16 value paired with 256 partners); tagged by the input's bits;
//  - decode: every pair of codes through bc_decode2 (hardware or fp16 placement) against the
//    generic bc_decode (same fp32 bits, or both NaN); those examples are tagged 0xDEC00000.
// Counts mismatches into *bad and keeps the first few (input bits, generic code, fast code).

// the same fp32 bits, or both NaN
static __device__ __forceinline__ bool bc_same_value(float a, float b) {
  return a != a ? b != b : __float_as_uint(a) == __float_as_uint(b);
}

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
#if BC_ELEM_NONNEG_HW
  if (first == 0 && t < (1u << BC_ELEM_BITS)) {  // every code's value through fp16
    const float a = bc_elem_decode_hw((u32)t), ga = bc_decode((u32)t);
    if (!bc_same_value(a, ga))
      bc_selftest_bad(bad, examples, max_examples, 0xDEC10000u | (u32)t, __float_as_uint(ga), __float_as_uint(a));
  }
#endif
  if (first == 0 && t < (1u << (2 * BC_ELEM_BITS))) {
    float a, b;
    bc_decode2((u32)t, &a, &b);
    float ga = bc_decode((u32)t & mask), gb = bc_decode(((u32)t >> BC_ELEM_BITS) & mask);
    bool same = bc_same_value(a, ga) && bc_same_value(b, gb);
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
#if BC_ELEM_VIA
    const float x1 = -x, x2 = __fmul_rn(x, 0.5f), x3 = __fmul_rn(x, 2.0f);
    const u32 g4 = g | bc_encode_generic(x1) << BC_ELEM_BITS | bc_encode_generic(x2) << (2 * BC_ELEM_BITS) |
                   bc_encode_generic(x3) << (3 * BC_ELEM_BITS);
    const u32 h4 = bc_encode4(x, x1, x2, x3);
    if (g4 != h4) bc_selftest_bad(bad, examples, max_examples, bits, g4, h4);
    if (!(fabsf(x) > BC_ELEM_MAX_FINITE)) {  // within +-max, or NaN: the unclamped form on x, -x, x / 2, -x / 2
      const float k = BC_ELEM_VIA_SCALE, x4 = -x2;
      const u32 n4 = g | bc_encode_generic(x1) << BC_ELEM_BITS | bc_encode_generic(x2) << (2 * BC_ELEM_BITS) |
                     bc_encode_generic(x4) << (3 * BC_ELEM_BITS);
      const u32 u4 = bc_encode4_scaled<false>(__fmul_rn(x, k), __fmul_rn(x1, k), __fmul_rn(x2, k), __fmul_rn(x4, k));
      if (n4 != u4) bc_selftest_bad(bad, examples, max_examples, bits, n4, u4);
    }
#endif
#if BC_ELEM_NONNEG_HW
    // an unsigned element through its signed twin, for inputs >= 0 or NaN (the sign bit cleared;
    // a NaN of either sign)
    {
      const float xn = (x != x) ? x : fabsf(x);
      const u32 gn = bc_encode_generic(xn), hn = bc_elem_encode_nonneg(xn);
      if (gn != hn) bc_selftest_bad(bad, examples, max_examples, __float_as_uint(xn), gn, hn);
    }
#endif
#if BC_ELEM_BF16X2
    {
      // fp32 pairs through the round-to-odd narrowing, x in either half (partner x ^ 0x80000001)
      const float y = __uint_as_float(bits ^ 0x80000001u);
      const u32 gy = bc_encode_generic(y);
      const u32 h2 = bc_encode_bf16x2(bc_bf16x2_rto(x, y)), h2r = bc_encode_bf16x2(bc_bf16x2_rto(y, x));
      if ((g | gy << BC_ELEM_BITS) != h2) bc_selftest_bad(bad, examples, max_examples, bits, g | gy << BC_ELEM_BITS, h2);
      else if ((gy | g << BC_ELEM_BITS) != h2r) bc_selftest_bad(bad, examples, max_examples, bits, gy | g << BC_ELEM_BITS, h2r);
    }
    {
      const u32 lo = bits & 0xFFFFu, hi = (lo * 0x9E37u + (bits >> 24) * 0x3B1u) & 0xFFFFu;
      const float f = bc_e8m0_enc((bits >> 16) & 0xFFu);  // the e8m0 encode factor, as the kernels form it
      const u32 gr = bc_encode_generic(__fmul_rn(__uint_as_float(lo << 16), f)) |
                     bc_encode_generic(__fmul_rn(__uint_as_float(hi << 16), f)) << BC_ELEM_BITS;
      const u32 hr = bc_encode_bf16x2(bc_hmul2(lo | hi << 16, bc_bf16x2_pow2(f)));
      if (gr != hr) bc_selftest_bad(bad, examples, max_examples, bits, gr, hr);
    }
#endif
  }
}
