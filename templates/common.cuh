// templates/common.cuh: device helpers shared by every kernel. No includes: the generated
// source is self-contained, so NVRTC compiles it without headers.
//
// Holes: ${ELEM_PTX} (the PTX pair type of the element's hardware conversion, if any).
// Constants (#define) come from the generator: BC_ELEM_* from specs/elements.lua, BC_DTYPE*
// from the kernel's input/output dtype, BC_THREADS/BC_VEC/... from gen/tuning/<arch>.lua.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define BC_FLT_MAX 3.40282346638528859812e+38f

// ---------------------------------------------------------------------------------------------
// hp dtypes: 0 fp32, 1 bf16, 2 fp16
// ---------------------------------------------------------------------------------------------
#ifdef BC_DTYPE
#if BC_DTYPE == 0
#define BC_DTYPE_MAX BC_FLT_MAX
#elif BC_DTYPE == 1
#define BC_DTYPE_MAX 3.38953138925153547590e+38f  /* bf16 0x7F7F */
#else
#define BC_DTYPE_MAX 65504.0f
#endif
#endif

static __device__ __forceinline__ float bc_f32_from_bf16(u16 h) { return __uint_as_float((u32)h << 16); }

static __device__ __forceinline__ float bc_f32_from_f16(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// Round to nearest even; NaN becomes the canonical 0x7FFF.
static __device__ __forceinline__ u16 bc_bf16_from_f32(float f) {
  u32 b = __float_as_uint(f);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
  return (u16)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

static __device__ __forceinline__ u16 bc_f16_from_f32(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  if (f != f) h = 0x7FFFu;
  return h;
}

static __device__ __forceinline__ u32 bc_f32_bits_canonical(float f) {
  return f != f ? 0x7FFFFFFFu : __float_as_uint(f);
}

#ifdef BC_DTYPE
// Load element i of an hp array as fp32.
static __device__ __forceinline__ float bc_load_hp(const BC_DTYPE_T *p, i64 i) {
#if BC_DTYPE == 0
  return p[i];
#elif BC_DTYPE == 1
  return bc_f32_from_bf16(p[i]);
#else
  return bc_f32_from_f16(p[i]);
#endif
}

#if BC_DTYPE != 0
// Two fp32 -> packed bf16x2 / f16x2 (a in the low half), round to nearest even (the hardware
// conversion on sm_80+); NaN -> the canonical 0x7FFF, as bc_store_hp writes it.
static __device__ __forceinline__ u32 bc_pack2_hp(float a, float b) {
  u32 d;
#if BC_ARCH >= 80 && BC_DTYPE == 1
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(b), "f"(a));
#elif BC_ARCH >= 80
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(b), "f"(a));
#elif BC_DTYPE == 1
  d = (u32)bc_bf16_from_f32(a) | ((u32)bc_bf16_from_f32(b) << 16);
#else
  d = (u32)bc_f16_from_f32(a) | ((u32)bc_f16_from_f32(b) << 16);
#endif
  if (a != a) d = (d & 0xFFFF0000u) | 0x7FFFu;
  if (b != b) d = (d & 0x0000FFFFu) | 0x7FFF0000u;
  return d;
}
#endif

#if BC_DTYPE != 0
// bc_pack2_hp without the NaN canonicalization (the conversion's own NaN bits), and the words of
// such pairs made canonical afterwards: one test for all the words (a half is NaN when its
// magnitude bits pass the infinity's: adding lim carries it into bit 15; no carry crosses halves),
// the per-half fix only when one is. The same bits as bc_pack2_hp, a third of its instructions
// where no NaN occurs.
static __device__ __forceinline__ u32 bc_pack2_raw(float a, float b) {
#if BC_ARCH >= 80
  u32 d;
#if BC_DTYPE == 1
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(b), "f"(a));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(b), "f"(a));
#endif
  return d;
#else
  return bc_pack2_hp(a, b);
#endif
}
template <int N>
static __device__ __forceinline__ void bc_canon_nan2(u32 *h) {
  constexpr u32 lim = BC_DTYPE == 1 ? 0x007F007Fu : 0x03FF03FFu; /* 0x7FFF - 0x7F80, 0x7FFF - 0x7C00 */
  u32 any = 0u;
#pragma unroll
  for (int j = 0; j < N; j++) any |= (h[j] & 0x7FFF7FFFu) + lim;
  if (any & 0x80008000u) {
#pragma unroll
    for (int j = 0; j < N; j++) {
      const u32 n = ((h[j] & 0x7FFF7FFFu) + lim) & 0x80008000u; /* bit 15 / 31: that half is NaN */
      const u32 m = (n >> 15) * 0xFFFFu;                         /* its 16 bits */
      h[j] = (h[j] & ~m) | (0x7FFF7FFFu & m);
    }
  }
}
#endif

// Store one value as the output dtype (NaN canonical), the same bits as the packed stores.
static __device__ __forceinline__ void bc_store_hp(BC_DTYPE_T *p, i64 i, float v) {
#if BC_DTYPE == 0
  p[i] = __uint_as_float(bc_f32_bits_canonical(v));
#else
  p[i] = (u16)bc_pack2_hp(v, v);
#endif
}

// 16 bytes of input -> BC_VEC floats (BC_VEC = 16 / sizeof(dtype)).
static __device__ __forceinline__ void bc_unpack16(uint4 u, float *v) {
#if BC_DTYPE == 0
  v[0] = __uint_as_float(u.x); v[1] = __uint_as_float(u.y);
  v[2] = __uint_as_float(u.z); v[3] = __uint_as_float(u.w);
#else
  u32 w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
  for (int j = 0; j < 4; j++) {
#if BC_DTYPE == 1
    v[2 * j] = bc_f32_from_bf16((u16)(w[j] & 0xFFFFu));
    v[2 * j + 1] = bc_f32_from_bf16((u16)(w[j] >> 16));
#else
    v[2 * j] = bc_f32_from_f16((u16)(w[j] & 0xFFFFu));
    v[2 * j + 1] = bc_f32_from_f16((u16)(w[j] >> 16));
#endif
  }
#endif
}

// Tile kernels: 16 bytes of input bits (BC_VEC elements) at (r, c .. c + BC_VEC - 1).
//   BC_LOAD_VEC    one 16-byte load (the vector is inside the tensor and aligned)
//   BC_LOAD_ELEMS  element loads, no bounds checks (inside, but rows not 16-byte aligned)
//   BC_LOAD_MASKED element loads, zeros outside the tensor
enum { BC_LOAD_VEC = 0, BC_LOAD_ELEMS = 1, BC_LOAD_MASKED = 2 };
template <int MODE>
static __device__ __forceinline__ uint4 bc_load_vec(const BC_DTYPE_T *__restrict__ in, i64 rows, i64 cols, i64 ld, i64 r,
                                                    i64 c) {
  if (MODE == BC_LOAD_VEC) return *(const uint4 *)(in + r * ld + c);
  const BC_DTYPE_T *p = in + r * ld + c;
  u32 w[4] = { 0u, 0u, 0u, 0u };
#pragma unroll
  for (int j = 0; j < BC_VEC; j++) {
    if (MODE == BC_LOAD_MASKED && (r >= rows || c + j >= cols)) continue;
#if BC_DTYPE == 0
    w[j] = __float_as_uint(p[j]);
#else
    w[j >> 1] |= (u32)p[j] << (16 * (j & 1));
#endif
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

#ifdef BC_UNROLL
// Row-streaming kernels: slot s of a row is elements [s * BC_VEC, (s + 1) * BC_VEC). Load the
// BC_UNROLL slots base + u * BC_THREADS of row `src` that are whole, as 16-byte vectors, all
// before the first use; the caller does the rest (and a row's partial last slot) element-wise.
static __device__ __forceinline__ void bc_load_slots(const BC_DTYPE_T *__restrict__ src, i64 base, i64 slots, i64 cols,
                                                     int vec_ok, uint4 (&v)[BC_UNROLL]) {
#pragma unroll
  for (int u = 0; u < BC_UNROLL; u++) {
    i64 s = base + (i64)u * BC_THREADS;
    if (vec_ok && s < slots && (s + 1) * BC_VEC <= cols) v[u] = *(const uint4 *)(src + s * BC_VEC);
  }
}
#endif
#endif

// ---------------------------------------------------------------------------------------------
// elements: encode fp32 -> code (round to nearest even, saturate to +-max finite, NaN ->
// BC_ELEM_NAN_ENCODE) and decode code -> fp32, derived from the element's layout.
// ---------------------------------------------------------------------------------------------
// An element's constants as a type, so one template serves the data element (BC_ELEM_*) and a
// block format's scale element (BC_SELEM_*).
#define BC_ELEM_TRAITS(NAME, P)                                                                   \
  struct NAME {                                                                                   \
    static const u32 BITS = P##_BITS, MBITS = P##_MBITS, BIAS = P##_BIAS, SIGNED = P##_SIGNED;    \
    static const u32 SUBNORMALS = P##_SUBNORMALS, MAX_CODE = P##_MAX_CODE, NAN_ENCODE = P##_NAN_ENCODE; \
    static constexpr float MAX_FINITE = P##_MAX_FINITE;                                           \
    static __device__ __forceinline__ bool is_nan(u32 c) { return P##_IS_NAN(c); }                \
    static __device__ __forceinline__ bool is_inf(u32 c) { return P##_IS_INF(c); }                \
  };

// encode: round to nearest even, saturate to +-max finite, NaN -> NAN_ENCODE (unsigned
// elements: negative inputs -> 0). Two equivalent forms: bc_encode_int_t on the fp32 bits (any
// element) and bc_encode_t in float arithmetic (elements with subnormals and a bias >= 1: every
// built-in element, so the integer form serves spec-defined elements only), about half the
// instructions. 21-gpu-cvt-selftest checks both, and the hardware conversion, against each other
// for all 2^32 fp32 inputs of every element with a fast path; the GPU tier checks the kernels.
template <class E>
static __device__ __forceinline__ u32 bc_encode_int_t(float x) {
  u32 b = __float_as_uint(x);
  u32 sign = E::SIGNED ? ((b >> 31) << (E::BITS - 1)) : 0u;
  u32 a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return E::NAN_ENCODE;
  if (!E::SIGNED && (b >> 31)) return 0u;
  // normal range: round the fp32 mantissa to MBITS bits (nearest even) and rebias, saturating
  const u32 shift = 23 - E::MBITS;
  const u32 rebias = (u32)(127 - E::BIAS) << E::MBITS;
  u32 r = (a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u)) >> shift;
  u32 code = r > rebias + E::MAX_CODE ? E::MAX_CODE : r - rebias;
  // below the smallest normal 2^(1-bias): a multiple of the subnormal step 2^(1-bias-mbits). The
  // scaling by 2^(bias-1+mbits) is exact and below 2^mbits, so adding 2^23 rounds it to an integer
  // (nearest even) in the low mantissa bits: one FMA instead of a float-to-int conversion.
  if (a < (u32)(128 - E::BIAS) << 23) {
    float s = __fmaf_rn(__uint_as_float(a), __uint_as_float((u32)(127 + E::BIAS - 1 + E::MBITS) << 23), 8388608.0f);
    code = __float_as_uint(s) - 0x4B000000u;
  }
  if (code > E::MAX_CODE) code = E::MAX_CODE;
  return code | sign;
}

// t = min(|x|, max finite) rounds to the element's grid by adding and subtracting 2^(e + 23 - mbits),
// e its exponent floored at the smallest normal's (one fp32 ulp of the sum is one element ulp
// there, so the FADD rounds to nearest even on the element's grid; subnormals included). Scaled by
// 2^(bias - 127), an element value is the fp32 number whose bits >> (23 - mbits) are its code
// (element subnormals become fp32 subnormals: exact, no flush to zero in these kernels).
// min(x, +Inf) clears the sign of a NaN and keeps every other sign, -0 included.
template <class E>
static __device__ __forceinline__ u32 bc_encode_t(float x) {
  if (!E::SUBNORMALS || E::BIAS < 1) return bc_encode_int_t<E>(x);
  const float xs = fminf(x, __uint_as_float(0x7F800000u));
  const u32 bs = __float_as_uint(xs);
  float t = fminf(fabsf(xs), E::MAX_FINITE);  // NaN -> max finite
  if (!E::SIGNED && (bs >> 31)) t = 0.0f;
  u32 ex = __float_as_uint(t) & 0x7F800000u;
  ex = (ex > (127u + 1u - E::BIAS) << 23 ? ex : (127u + 1u - E::BIAS) << 23) + ((23u - E::MBITS) << 23);
  const float magic = __uint_as_float(ex);
  const float r = __fsub_rn(__fadd_rn(t, magic), magic);
  const u32 code = __float_as_uint(__fmul_rn(r, __uint_as_float(E::BIAS << 23))) >> (23 - E::MBITS);
  if ((E::NAN_ENCODE != E::MAX_CODE || !E::SIGNED) && x != x) return E::NAN_ENCODE;
  return code | (E::SIGNED ? (bs >> 31) << (E::BITS - 1) : 0u);
}

template <class E>
static __device__ __forceinline__ float bc_decode_t(u32 c) {
  if (E::is_nan(c)) return __uint_as_float(0x7FFFFFFFu);
  u32 s = E::SIGNED ? ((c >> (E::BITS - 1)) & 1u) << 31 : 0u;
  if (E::is_inf(c)) return __uint_as_float(s | 0x7F800000u);
  u32 e = (c >> E::MBITS) & ((1u << (E::BITS - E::SIGNED - E::MBITS)) - 1u);
  u32 m = c & ((1u << E::MBITS) - 1u);
  float v;
  if (e == 0 && E::SUBNORMALS) {
    // subnormal: m * 2^(1 - bias - mbits), exact
    v = (float)m * __uint_as_float((u32)(127 + 1 - E::BIAS - E::MBITS) << 23);
  } else {
    v = __uint_as_float(((e + 127 - E::BIAS) << 23) | (m << (23 - E::MBITS)));
  }
  return __uint_as_float(__float_as_uint(v) | s);
}

// Stochastic rounding: between the two neighbouring codes lo <= |x| < hi, round up with
// probability floor(p * 2^24) / 2^24, p = (|x| - lo) / (hi - lo), i.e. when (rnd >> 8) is below
// floor(p * 2^24); saturating; NaN -> NAN_ENCODE.
template <class E>
static __device__ __forceinline__ u32 bc_encode_sr_t(float x, u32 rnd) {
  u32 b = __float_as_uint(x);
  u32 sign = E::SIGNED ? ((b >> 31) << (E::BITS - 1)) : 0u;
  u32 a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return E::NAN_ENCODE;
  if (!E::SIGNED && (b >> 31)) return 0u;
  u32 code, p24;
  if (a < (u32)(128 - E::BIAS) << 23) {
    float s = __uint_as_float(a) * __uint_as_float((u32)(127 + E::BIAS - 1 + E::MBITS) << 23);
    float fl = floorf(s);
    code = (u32)fl;
    p24 = (u32)((s - fl) * 16777216.0f);
  } else {
    const u32 shift = 23 - E::MBITS;
    u32 r = a >> shift;
    u32 rebias = (u32)(127 - E::BIAS) << E::MBITS;
    code = r - rebias;
    if (r >= rebias + E::MAX_CODE) code = E::MAX_CODE;
    p24 = (a & ((1u << shift) - 1u)) << (24 - shift);
  }
  if (code >= E::MAX_CODE) return E::MAX_CODE | sign;
  code += (rnd >> 8) < p24 ? 1u : 0u;
  return code | sign;
}

#ifdef BC_ELEM_BITS
#define BC_ELEM_SIGN_SHIFT (BC_ELEM_BITS - 1)
BC_ELEM_TRAITS(bc_elem, BC_ELEM)
static __device__ __forceinline__ u32 bc_encode_generic(float x) { return bc_encode_t<bc_elem>(x); }
#endif
#ifdef BC_SELEM_BITS
BC_ELEM_TRAITS(bc_selem, BC_SELEM)
#endif

// An unsigned element through the conversion of the signed one whose non-negative half it is
// (gen/blockcast.lua: nonneg_via; ue4m3 through e4m3): the code of v >= 0 or NaN (a block scale
// from an amax), and a code's value through fp16 (exact: every value is an fp16 value).
#define BC_NONNEG_HW_FNS(NAME, P)                                                                   \
  static __device__ __forceinline__ u32 NAME##_encode_nonneg(float v) {                           \
    u16 h;                                                                                        \
    asm("cvt.rn.satfinite." P##_NONNEG_PTX ".f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v));     \
    return h & ((1u << P##_BITS) - 1u);                                                           \
  }                                                                                               \
  static __device__ __forceinline__ float NAME##_decode_hw(u32 c) {                               \
    u32 h;                                                                                        \
    asm("cvt.rn.f16x2." P##_NONNEG_PTX " %0, %1;" : "=r"(h) : "h"((u16)c));                       \
    return bc_f32_from_f16((u16)h);                                                               \
  }
#if defined(BC_ELEM_BITS) && BC_ELEM_NONNEG_HW
BC_NONNEG_HW_FNS(bc_elem, BC_ELEM)
#endif
#if defined(BC_SELEM_BITS) && BC_SELEM_NONNEG_HW
BC_NONNEG_HW_FNS(bc_selem, BC_SELEM)
#endif

#if defined(BC_ELEM_BITS) && BC_ELEM_BF16X2
// Two codes from the bf16x2 h (a in the low half, b in the high one), values already times the
// block factor (bc_hmul2 of bf16 inputs and a power-of-two factor, or bc_bf16x2_rto), in packed bf16
// arithmetic (gen/blockcast.lua: bf16x2_encode). The code of |v| is a concave piecewise-linear
// function of it rounded to an integer, nearest even: in binade e (the subnormals with emin) the
// codes are |v| 2^(mbits - e) + (e - emin) 2^mbits, consecutive integers for consecutive grid
// values, so the minimum over the binades' lines, capped at the largest code, is the code.
// fma.rn.bf16x2 of a line plus 128 rounds it once to an integer (one bf16 ulp in [128, 256)), and
// rounding is monotonic, so the minimum of the rounded lines is the rounded minimum. A NaN makes
// every line NaN: the cap (+max); min(h, +Inf) drops its sign. Most of the work is on the FMA
// pipe: the 4-bit quantize kernels are bound by the ALU pipe (tests/bench/NOTES.md).
// Result: per half, the bf16 bits of 128 + the code (sign bit included), i.e. 0x4300 + code.
static __device__ __forceinline__ u32 bc_min_bf16x2(u32 a, u32 b) {
  u32 r;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
static __device__ __forceinline__ u32 bc_encode_bf16x2_m(u32 h) {
  constexpr int EMIN = 1 - (int)BC_ELEM_BIAS;
  constexpr int EMAX = (1 << (BC_ELEM_BITS - BC_ELEM_SIGNED - BC_ELEM_MBITS)) - 1 - (int)BC_ELEM_BIAS;
  const u32 a = h & 0x7FFF7FFFu;
  u32 m = (0x4300u + BC_ELEM_MAX_CODE) * 0x10001u;  // 128 + the largest code
#pragma unroll
  for (int e = EMIN; e <= EMAX; e++) {
    constexpr u32 one = 0x10001u;
    const u32 slope = ((u32)(127 + (int)BC_ELEM_MBITS - e) << 7) * one;         // 2^(mbits - e)
    const u32 base = (0x4300u + ((u32)(e - EMIN) << BC_ELEM_MBITS)) * one;     // 128 + (e - emin) 2^mbits
    u32 y;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(slope), "r"(a), "r"(base));
    m = bc_min_bf16x2(m, y);
  }
  // the sign bit (bit 15 of each half) added as the code's top bit: (s >> (16 - BITS)), an FMA-pipe
  // mad.hi instead of a shift and an or
  const u32 s = bc_min_bf16x2(h, 0x7F807F80u) & 0x80008000u;
  return __umulhi(s, 1u << (16 + BC_ELEM_BITS)) + m;
}
// The two codes, a in bits [0, BITS) and b in bits [BITS, 2 BITS).
static __device__ __forceinline__ u32 bc_encode_bf16x2(u32 h) {
  const u32 d = bc_encode_bf16x2_m(h) - 0x43004300u;
  return (d & 0xFFFFu) | ((d >> 16) << BC_ELEM_BITS);
}
#if BC_ELEM_BITS == 4 && defined(BC_PACK_HIGH_FIRST)
// Eight 4-bit codes as one word from four bc_encode_bf16x2_m results m_k holding elements k and
// k + 4 (k = 0..3): element k's code goes to bit P_k (its packing position), element k + 4's, 16
// bits up, to P_k + 16, as the packing wants; sum of (m_k - 0x43004300) 2^P_k, exact modulo 2^32
// (the codes occupy disjoint nibbles): multiply-adds on the FMA pipe, no ALU instruction.
static __device__ __forceinline__ u32 bc_pack8_spread(u32 m0, u32 m1, u32 m2, u32 m3) {
  constexpr u32 p0 = 1u << (4 * (BC_PACK_HIGH_FIRST ? 1 : 0)), p1 = 1u << (4 * (BC_PACK_HIGH_FIRST ? 0 : 1));
  constexpr u32 p2 = 1u << (4 * (BC_PACK_HIGH_FIRST ? 3 : 2)), p3 = 1u << (4 * (BC_PACK_HIGH_FIRST ? 2 : 3));
  return m0 * p0 + m1 * p1 + m2 * p2 + m3 * p3 - 0x43004300u * (p0 + p1 + p2 + p3);
}
#endif
// fp32 a, b narrowed to a bf16x2 by round-to-odd (truncated, the last bit set where bits were
// dropped): rounding that to the element's grid is rounding a and b themselves (bf16 keeps at
// least two bits more than the element; every midpoint of the element is a bf16 value with an even last
// bit). NaN stays NaN (a payload in the dropped bits sets the last bit), Inf stays Inf.
static __device__ __forceinline__ u32 bc_bf16x2_rto(float a, float b) {
  const u32 ua = __float_as_uint(a), ub = __float_as_uint(b);
  u32 nz;
  asm("min.u16x2 %0, %1, %2;" : "=r"(nz) : "r"(__byte_perm(ua, ub, 0x5410)), "r"(0x00010001u));
  return __byte_perm(ua, ub, 0x7632) | nz;
}
// x times a power-of-two factor pair (e8m0 factors are 2^-127 .. 2^127 or NaN, each a bf16 value):
// exact down to bf16's normals (it has fp32's exponent range); a product rounded below them is
// below every midpoint of an element bf16x2_encode admits, whose code is then 0 either way
static __device__ __forceinline__ u32 bc_hmul2(u32 x, u32 f) {
  u32 r;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(f));
  return r;
}
static __device__ __forceinline__ u32 bc_bf16x2_pow2(float f) { return (__float_as_uint(f) >> 16) * 0x10001u; }
#endif

#ifdef BC_ELEM_BITS
// Two codes, a in bits [0, BITS) and b in bits [BITS, 2 BITS).
static __device__ __forceinline__ u32 bc_encode2(float a, float b) {
#if BC_ELEM_HW_CVT
  u16 d;
  asm("cvt.rn.satfinite.${ELEM_PTX}.f32 %0, %1, %2;" : "=h"(d) : "f"(b), "f"(a));
  return (u32)d;
#elif BC_ELEM_VIA
  // through the wider element's conversion (gen/blockcast.lua: via_element): clamped to +-max
  // (NaN -> +max, -0 stays -0), times 2^k (exact: a result below fp32's normals would round to
  // code 0 either way), converted; e's code is the magnitude's low BITS - 1 bits and the sign
  const float m = BC_ELEM_MAX_FINITE;
  a = __fmul_rn(fmaxf(fminf(a, m), -m), BC_ELEM_VIA_SCALE);
  b = __fmul_rn(fmaxf(fminf(b, m), -m), BC_ELEM_VIA_SCALE);
  u16 h;
  asm("cvt.rn.satfinite.${ELEM_PTX}.f32 %0, %1, %2;" : "=h"(h) : "f"(b), "f"(a));
  const u32 d = h, mag = (1u << (BC_ELEM_BITS - 1)) - 1u;
  return (d & mag) | ((d >> 7) & 1u) << (BC_ELEM_BITS - 1) | ((d >> 8) & mag) << BC_ELEM_BITS |
         (d >> 15) << (2 * BC_ELEM_BITS - 1);
#else
  return bc_encode_generic(a) | (bc_encode_generic(b) << BC_ELEM_BITS);
#endif
}

#if BC_ELEM_VIA
// Four codes, element i in bits [i BITS, (i + 1) BITS): two pair conversions into the wider
// element's bytes (sign at bit 7; after the clamp the magnitude fits the low BITS - 1 bits), then
// squeezed together in a few word-wide steps instead of per pair: in each 16-bit half the low
// byte's sign and the high byte move down next to the low byte's magnitude, then the halves join.
// bc_encode4_scaled takes the inputs already times 2^k (the callers fold 2^k into a power-of-two
// block factor: x * (factor 2^k) is (x * factor) 2^k, exactly, wherever the code is not 0); the
// clamp to +-max 2^k commutes with the exact scaling. CLAMP false: the caller knows that every
// input is NaN or within +-max 2^k (a block whose amax times its factor is at most max): the
// conversion writes the canonical NaN 0x7F for any NaN, whose low bits are the +max code
// (21-gpu-cvt-selftest checks this form on every such input too).
template <bool CLAMP = true>
static __device__ __forceinline__ u32 bc_encode4_scaled(float a, float b, float c, float d) {
  if (CLAMP) {
    const float m = BC_ELEM_MAX_FINITE * BC_ELEM_VIA_SCALE;
    a = fmaxf(fminf(a, m), -m);
    b = fmaxf(fminf(b, m), -m);
    c = fmaxf(fminf(c, m), -m);
    d = fmaxf(fminf(d, m), -m);
  }
  u32 q;
  asm("{\n\t.reg .b16 lo, hi;\n\tcvt.rn.satfinite.${ELEM_PTX}.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.${ELEM_PTX}.f32 hi, %4, %3;\n\tmov.b32 %0, {lo, hi};\n\t}"
      : "=r"(q) : "f"(a), "f"(b), "f"(c), "f"(d));
  constexpr int B = BC_ELEM_BITS;
  constexpr u32 mag = ((1u << (B - 1)) - 1u) * 0x10001u;              // low byte's magnitude
  constexpr u32 mid = (((1u << B) - 1u) << (B - 1)) * 0x10001u;       // low byte's sign, high byte's magnitude
  constexpr u32 top = (1u << (2 * B - 1)) * 0x10001u;                 // high byte's sign
  const u32 f = (q & mag) | ((q >> (8 - B)) & mid) | ((q >> (16 - 2 * B)) & top);
  return (f & ((1u << (2 * B)) - 1u)) | ((f >> 16) << (2 * B));
}
static __device__ __forceinline__ u32 bc_encode4(float a, float b, float c, float d) {
  const float k = BC_ELEM_VIA_SCALE;
  return bc_encode4_scaled(__fmul_rn(a, k), __fmul_rn(b, k), __fmul_rn(c, k), __fmul_rn(d, k));
}
#endif

static __device__ __forceinline__ u32 bc_encode1(float a) {
#if BC_ELEM_HW_CVT || BC_ELEM_VIA
  return bc_encode2(a, 0.0f) & ((1u << BC_ELEM_BITS) - 1u);
#else
  return bc_encode_generic(a);
#endif
}

// 16 bytes of input (BC_VEC values) times scale, encoded; codes packed four to a word, element 0
// in the low byte. With a hardware conversion, all of it is one inline-PTX block: the same
// instructions the C form compiles to (unpack, mul.rn, cvt.rn.satfinite pairs), but NVVM optimizes
// and lowers one statement instead of ~40, which cut ~15% of a small kernel's cold compile
// (tests/bench/NOTES.md, cold compile step 6).
#if BC_ELEM_HW_CVT && BC_ELEM_BITS == 8
#define BC_PTX_ENC2(H, A, B, S)                                                                    \
  "mul.rn.f32 " A ", " A ", " S ";\n\tmul.rn.f32 " B ", " B ", " S ";\n\t"                          \
  "cvt.rn.satfinite.${ELEM_PTX}.f32 " H ", " B ", " A ";\n\t"
#endif
#ifdef BC_DTYPE
static __device__ __forceinline__ void bc_encode_vec16(uint4 v, float scale, u32 *w) {
#if BC_ELEM_HW_CVT && BC_ELEM_BITS == 8 && BC_DTYPE == 0
  asm("{\n\t.reg .b32 a<4>;\n\t.reg .b16 h<2>;\n\t"
      "mov.b32 a0, %1;\n\tmov.b32 a1, %2;\n\tmov.b32 a2, %3;\n\tmov.b32 a3, %4;\n\t"
      BC_PTX_ENC2("h0", "a0", "a1", "%5") BC_PTX_ENC2("h1", "a2", "a3", "%5")
      "mov.b32 %0, {h0, h1};\n\t}"
      : "=r"(w[0]) : "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "f"(scale));
#elif BC_ELEM_HW_CVT && BC_ELEM_BITS == 8
#if BC_DTYPE == 1
  // bf16 -> fp32: the low half shifted up, the high half masked
#define BC_PTX_UNPACK2(A, B, X) "shl.b32 " A ", " X ", 16;\n\tand.b32 " B ", " X ", 0xFFFF0000;\n\t"
#else
#define BC_PTX_UNPACK2(A, B, X) "mov.b32 {l, k}, " X ";\n\tcvt.f32.f16 " A ", l;\n\tcvt.f32.f16 " B ", k;\n\t"
#endif
  asm("{\n\t.reg .b32 a<8>;\n\t.reg .b16 h<4>, l, k;\n\t"
      BC_PTX_UNPACK2("a0", "a1", "%2") BC_PTX_UNPACK2("a2", "a3", "%3")
      BC_PTX_UNPACK2("a4", "a5", "%4") BC_PTX_UNPACK2("a6", "a7", "%5")
      BC_PTX_ENC2("h0", "a0", "a1", "%6") BC_PTX_ENC2("h1", "a2", "a3", "%6")
      BC_PTX_ENC2("h2", "a4", "a5", "%6") BC_PTX_ENC2("h3", "a6", "a7", "%6")
      "mov.b32 %0, {h0, h1};\n\tmov.b32 %1, {h2, h3};\n\t}"
      : "=r"(w[0]), "=r"(w[1]) : "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "f"(scale));
#undef BC_PTX_UNPACK2
#else
  float f[16 / BC_DTYPE_SIZE];
  bc_unpack16(v, f);
#pragma unroll
  for (int j = 0; j < 16 / BC_DTYPE_SIZE; j += 2) {
    u32 q = bc_encode2(__fmul_rn(f[j], scale), __fmul_rn(f[j + 1], scale));
    if ((j & 3) == 0) w[j >> 2] = q; else w[j >> 2] |= q << 16;
  }
#endif
}
#endif
#undef BC_PTX_ENC2

static __device__ __forceinline__ float bc_decode(u32 c) { return bc_decode_t<bc_elem>(c); }

#ifdef BC_PACK_GE
// Packing (gen/formats.lua: pack_group): a data row is groups of BC_PACK_GE elements in BC_PACK_GB
// bytes; in a group read as a little-endian integer, element k is at bits [k BITS, (k + 1) BITS)
// (low_first) or [(GE - 1 - k) BITS, (GE - k) BITS) (high_first). In a stream of 32-bit words that
// starts at a group (element 0 in the low bits of word 0), the bit position of element j:
// (A group's bits are GE x BITS, so low_first is the plain stream; high_first mirrors the index in
// its group, GE being 1, 2 or 4.)
#if BC_PACK_GE & (BC_PACK_GE - 1)
#error "packing groups of a power-of-two number of elements expected"
#endif
template <class I>
static __device__ __forceinline__ I bc_code_pos(I j) {
  return BC_ELEM_BITS * (BC_PACK_HIGH_FIRST ? j ^ (BC_PACK_GE - 1) : j);
}
// OR the n-bit value q into the words w at bit pos, and read n bits there (bits above them left
// in); pos is a compile-time constant where the unrolled loops call these, so the word index and
// the straddle test fold away.
static __device__ __forceinline__ void bc_put_at(u32 *w, int pos, u32 q, int n) {
  w[pos >> 5] |= q << (pos & 31);
  if ((pos & 31) + n > 32) w[(pos >> 5) + 1] |= q >> (32 - (pos & 31));
}
static __device__ __forceinline__ u32 bc_get_at(const u32 *w, int pos, int n) {
  u32 v = w[pos >> 5] >> (pos & 31);
  if ((pos & 31) + n > 32) v |= w[(pos >> 5) + 1] << (32 - (pos & 31));
  return v;
}
// bc_put_at for a runtime pos (the rolled stochastic-rounding loops): the index is resolved by
// unrolled compares, so w stays in registers.
template <int NW, int N>
static __device__ __forceinline__ void bc_put_bits(u32 (&w)[NW], int pos, u32 q) {
  if (NW == 1) {  // codes that tile a word never straddle
    w[0] |= q << pos;
    return;
  }
#pragma unroll
  for (int i = 0; i < NW; i++) {
    const int s = pos - 32 * i;
    if (s >= 0 && s < 32) w[i] |= q << s;
    else if (s < 0 && s > -N) w[i] |= q >> -s;
  }
}
// The codes of elements j, j + 1 (j even: in one group when a group holds two or more) as a pair,
// element j in the low bits, and back.
static __device__ __forceinline__ int bc_pair_pos(int j) { return bc_code_pos(BC_PACK_HIGH_FIRST && BC_PACK_GE > 1 ? j + 1 : j); }
static __device__ __forceinline__ u32 bc_pair_order(u32 p) {
#if BC_PACK_HIGH_FIRST && BC_PACK_GE > 1
  const u32 m = (1u << BC_ELEM_BITS) - 1u;
  return ((p >> BC_ELEM_BITS) & m) | ((p & m) << BC_ELEM_BITS);
#else
  return p;
#endif
}
#endif

// Two codes (a in bits [0, BITS), b in [BITS, 2 BITS); higher bits ignored) to fp32. Fast paths,
// both exact and checked against bc_decode for every pair by 21-gpu-cvt-selftest:
//  - the hardware conversion (8-bit elements with one), through fp16 (every element value is an
//    fp16 value; NaN stays NaN, Inf stays Inf);
//  - BC_ELEM_F16_PLACE (elements without NaN/Inf codes whose exponent and mantissa fit fp16's,
//    e.g. e2m1): the magnitude bits placed at the top of an fp16's exponent and mantissa are the
//    element's value times 2^(BIAS - 15), subnormals included; two fp16 converts and one exact
//    power-of-two multiply each instead of the generic decode.
#if BC_ELEM_F16_PLACE
// BC_ELEM_F16_PLACE: the two codes' magnitude bits placed at the top of fp16 exponents and
// mantissas, as fp32: the elements' values times 2^(BIAS - 15), exactly (bc_decode2 multiplies
// by BC_ELEM_F16_UP; a caller may fold that power of two into its own factor).
#define BC_ELEM_F16_UP __uint_as_float((u32)(127 + 15 - BC_ELEM_BIAS) << 23)
static __device__ __forceinline__ void bc_decode2_placed(u32 c2, float *a, float *b) {
  const u32 mag = (1u << (BC_ELEM_BITS - BC_ELEM_SIGNED)) - 1u;
  u32 h2 = ((c2 & mag) << (10 - BC_ELEM_MBITS)) | (((c2 >> BC_ELEM_BITS) & mag) << (26 - BC_ELEM_MBITS));
#if BC_ELEM_SIGNED
  h2 |= ((c2 >> (BC_ELEM_BITS - 1)) & 1u) << 15 | ((c2 >> (2 * BC_ELEM_BITS - 1)) & 1u) << 31;
#endif
  *a = bc_f32_from_f16((u16)(h2 & 0xFFFFu));
  *b = bc_f32_from_f16((u16)(h2 >> 16));
}
#endif

static __device__ __forceinline__ void bc_decode2(u32 c2, float *a, float *b) {
#if BC_ELEM_HW_CVT && BC_ELEM_F16_EXACT && BC_ELEM_BITS == 8
  u32 h2;
  asm("cvt.rn.f16x2.${ELEM_PTX} %0, %1;" : "=r"(h2) : "h"((u16)c2));
  *a = bc_f32_from_f16((u16)(h2 & 0xFFFFu));
  *b = bc_f32_from_f16((u16)(h2 >> 16));
#elif BC_ELEM_F16_PLACE
  bc_decode2_placed(c2, a, b);
  *a = __fmul_rn(*a, BC_ELEM_F16_UP);
  *b = __fmul_rn(*b, BC_ELEM_F16_UP);
#else
  const u32 m = (1u << BC_ELEM_BITS) - 1u;
  *a = bc_decode(c2 & m);
  *b = bc_decode((c2 >> BC_ELEM_BITS) & m);
#endif
}

#ifdef BC_DTYPE
// Eight 8-bit codes (element 0 in the low byte of v.x) times si, as the output dtype's words:
// 8 canonical fp32 bit patterns, or 4 words of two 16-bit values (element 2j in the low half).
// With a hardware conversion through fp16, one inline-PTX block of the instructions the C form
// compiles to (cvt to f16x2, cvt.f32.f16, mul.rn, the output conversion, NaN made canonical), for
// the cold compile as in bc_encode_vec16.
static __device__ __forceinline__ void bc_decode_scaled8(uint2 v, float si, u32 *h) {
#if BC_ELEM_HW_CVT && BC_ELEM_F16_EXACT && BC_ELEM_BITS == 8
#if BC_DTYPE == 1
#define BC_PTX_HP "bf16"
#else
#define BC_PTX_HP "f16"
#endif
  // codes C (a b16 pair) -> fp32 F, G (element 2j, 2j + 1) times si
#define BC_PTX_DEC2(C, S)                                                                          \
  "cvt.rn.f16x2.${ELEM_PTX} x, " C ";\n\tmov.b32 {l, k}, x;\n\tcvt.f32.f16 f, l;\n\tcvt.f32.f16 g, k;\n\t" \
  "mul.rn.f32 f, f, " S ";\n\tmul.rn.f32 g, g, " S ";\n\tsetp.nan.f32 p, f, f;\n\tsetp.nan.f32 q, g, g;\n\t"
#if BC_DTYPE == 0
#define BC_PTX_OUT2(C, H0, H1, S) BC_PTX_DEC2(C, S) "selp.b32 " H0 ", 0x7FFFFFFF, f, p;\n\tselp.b32 " H1 ", 0x7FFFFFFF, g, q;\n\t"
  asm("{\n\t.reg .b16 c<4>, l, k;\n\t.reg .b32 x, f, g;\n\t.reg .pred p, q;\n\t"
      "mov.b32 {c0, c1}, %8;\n\tmov.b32 {c2, c3}, %9;\n\t"
      BC_PTX_OUT2("c0", "%0", "%1", "%10") BC_PTX_OUT2("c1", "%2", "%3", "%10")
      BC_PTX_OUT2("c2", "%4", "%5", "%10") BC_PTX_OUT2("c3", "%6", "%7", "%10") "}"
      : "=r"(h[0]), "=r"(h[1]), "=r"(h[2]), "=r"(h[3]), "=r"(h[4]), "=r"(h[5]), "=r"(h[6]), "=r"(h[7])
      : "r"(v.x), "r"(v.y), "f"(si));
#else
  // the pair packed by cvt.rn.{bf16x2,f16x2}.f32; a NaN half becomes the canonical 0x7FFF
#define BC_PTX_OUT2(C, H, S) BC_PTX_DEC2(C, S) "cvt.rn." BC_PTX_HP "x2.f32 " H ", g, f;\n\t"              \
  "@p and.b32 " H ", " H ", 0xFFFF0000;\n\t@p or.b32 " H ", " H ", 0x7FFF;\n\t"                         \
  "@q and.b32 " H ", " H ", 0xFFFF;\n\t@q or.b32 " H ", " H ", 0x7FFF0000;\n\t"
  asm("{\n\t.reg .b16 c<4>, l, k;\n\t.reg .b32 x, f, g;\n\t.reg .pred p, q;\n\t"
      "mov.b32 {c0, c1}, %4;\n\tmov.b32 {c2, c3}, %5;\n\t"
      BC_PTX_OUT2("c0", "%0", "%6") BC_PTX_OUT2("c1", "%1", "%6") BC_PTX_OUT2("c2", "%2", "%6")
      BC_PTX_OUT2("c3", "%3", "%6") "}"
      : "=r"(h[0]), "=r"(h[1]), "=r"(h[2]), "=r"(h[3]) : "r"(v.x), "r"(v.y), "f"(si));
#endif
#undef BC_PTX_OUT2
#undef BC_PTX_DEC2
#undef BC_PTX_HP
#else
  float f[8];
  bc_decode2(v.x & 0xFFFFu, &f[0], &f[1]);
  bc_decode2(v.x >> 16, &f[2], &f[3]);
  bc_decode2(v.y & 0xFFFFu, &f[4], &f[5]);
  bc_decode2(v.y >> 16, &f[6], &f[7]);
#pragma unroll
  for (int j = 0; j < 8; j++) f[j] = __fmul_rn(f[j], si);
#if BC_DTYPE == 0
#pragma unroll
  for (int j = 0; j < 8; j++) h[j] = bc_f32_bits_canonical(f[j]);
#else
#pragma unroll
  for (int j = 0; j < 4; j++) h[j] = bc_pack2_hp(f[2 * j], f[2 * j + 1]);
#endif
#endif
}
#endif
#endif

// ---------------------------------------------------------------------------------------------
// output stores: streaming (st.global.cs, evict-first) when the tuning sets store_cs
// ---------------------------------------------------------------------------------------------
static __device__ __forceinline__ void bc_store16(void *p, uint4 v) {
#if BC_STORE_CS
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#else
  *(uint4 *)p = v;
#endif
}
static __device__ __forceinline__ void bc_store8(void *p, uint2 v) {
#if BC_STORE_CS
  asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
#else
  *(uint2 *)p = v;
#endif
}
static __device__ __forceinline__ void bc_store4(void *p, u32 v) {
#if BC_STORE_CS
  asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  *(u32 *)p = v;
#endif
}

// Bytes [s, s + 16) (0 <= s < 16) of the 32 bytes lo, hi (lo first): 11 selects, 4 funnel shifts.
static __device__ __forceinline__ uint4 bc_bytes_at(uint4 lo, uint4 hi, int s) {
  const int q = s >> 2;
  const u32 sh = 8u * (u32)(s & 3);
  const u32 c[8] = { lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w };
  u32 d[6], e[5];
#pragma unroll
  for (int i = 0; i < 6; i++) d[i] = q & 2 ? c[i + 2] : c[i];
#pragma unroll
  for (int i = 0; i < 5; i++) e[i] = q & 1 ? d[i + 1] : d[i];
  return make_uint4(__funnelshift_r(e[0], e[1], sh), __funnelshift_r(e[1], e[2], sh), __funnelshift_r(e[2], e[3], sh),
                    __funnelshift_r(e[3], e[4], sh));
}

// Word i (0..3) of a 16-byte piece.
static __device__ __forceinline__ u32 bc_word_at(uint4 v, int i) { return i & 2 ? (i & 1 ? v.w : v.z) : (i & 1 ? v.y : v.x); }

// Bytes [lo, hi) (0 <= lo < hi <= 16) of the piece v to the 16-byte aligned address p (global or
// shared memory), as aligned stores of 1, 2, 4 and 8 bytes: at most 7 instead of one per byte.
static __device__ __forceinline__ void bc_store_part(u8 *p, uint4 v, int lo, int hi) {
  int at = lo;
  if ((at & 1) && at < hi) { p[at] = (u8)(bc_word_at(v, at >> 2) >> (8 * (at & 3))); at += 1; }
  if ((at & 2) && at + 2 <= hi) { *(u16 *)(p + at) = (u16)(bc_word_at(v, at >> 2) >> (8 * (at & 3))); at += 2; }
  if ((at & 4) && at + 4 <= hi) { *(u32 *)(p + at) = bc_word_at(v, at >> 2); at += 4; }
  if ((at & 8) && at + 8 <= hi) { *(uint2 *)(p + at) = make_uint2(v.z, v.w); at += 8; }
  // what is left starts aligned to every step below that still fits
  if (at + 8 <= hi) { *(uint2 *)(p + at) = make_uint2(v.x, v.y); at += 8; }
  if (at + 4 <= hi) { *(u32 *)(p + at) = bc_word_at(v, at >> 2); at += 4; }
  if (at + 2 <= hi) { *(u16 *)(p + at) = (u16)(bc_word_at(v, at >> 2) >> (8 * (at & 3))); at += 2; }
  if (at < hi) p[at] = (u8)(bc_word_at(v, at >> 2) >> (8 * (at & 3)));
}

// ---------------------------------------------------------------------------------------------
// reductions
// ---------------------------------------------------------------------------------------------
static __device__ __forceinline__ float bc_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Block-wide max of non-negative values; result valid in thread 0.
static __device__ __forceinline__ float bc_block_max(float v) {
  __shared__ float warp_max[32];
  v = bc_warp_max(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)((blockDim.x + 31) >> 5) ? warp_max[lane] : 0.0f;
    v = bc_warp_max(v);
  }
  return v;
}

// 1/x correctly rounded: the bits of __frcp_rn for every fp32 input (NaN: a NaN), proven for all
// 2^32 in 21-gpu-cvt-selftest, without __frcp_rn's slow-path subroutine (~5 ms of the cold compile
// of a small kernel; tests/bench/NOTES.md). The reciprocal in float64 (rcp.approx, then two Newton steps:
// relative error < 2^-52) rounded once to fp32 is exact, because 1/x of an fp32 x is never within
// 2^-48 (relative) of a point halfway between two fp32 values (nor of the overflow threshold).
static __device__ __forceinline__ float bc_rcp_rn(float x) {
  // one inline-PTX block (the cold-compile reason of bc_encode_vec16): the float64 path first, then
  // +-0 -> +-Inf, +-Inf -> +-0 and NaN -> the quiet NaN select over its result
  float y;
  asm("{\n\t.reg .b32 b, a, sg, t;\n\t.reg .f64 d, r, e;\n\t.reg .pred p;\n\t"
      "mov.b32 b, %1;\n\tand.b32 a, b, 0x7FFFFFFF;\n\tand.b32 sg, b, 0x80000000;\n\t"
      "cvt.f64.f32 d, %1;\n\trcp.approx.ftz.f64 r, d;\n\tneg.f64 d, d;\n\t"
      "fma.rn.f64 e, d, r, 0d3FF0000000000000;\n\tfma.rn.f64 r, r, e, r;\n\t"
      "fma.rn.f64 e, d, r, 0d3FF0000000000000;\n\tfma.rn.f64 r, r, e, r;\n\t"
      "cvt.rn.f32.f64 %0, r;\n\t"
      "or.b32 t, sg, 0x7F800000;\n\tsetp.eq.u32 p, a, 0;\n\t@p mov.b32 %0, t;\n\t"
      "setp.eq.u32 p, a, 0x7F800000;\n\t@p mov.b32 %0, sg;\n\t"
      "or.b32 t, b, 0x00400000;\n\tsetp.gt.u32 p, a, 0x7F800000;\n\t@p mov.b32 %0, t;\n\t}"
      : "=f"(y) : "f"(x));
  return y;
}

#ifdef BC_SCALE_EPS
// scale_from_amax (DESIGN.md): amax < eps -> eps; amax 0, Inf or NaN -> 1; fmax / amax (IEEE);
// an Inf scale -> inf_value; pow2 keeps sign + exponent (rounds down to 2^k).
static __device__ __forceinline__ float bc_scale_from_amax(float amax, float inf_value) {
  if (amax < BC_SCALE_EPS) amax = BC_SCALE_EPS;
  if (amax == 0.0f || amax != amax || amax == __uint_as_float(0x7F800000u)) return 1.0f;
  float scale = __fdiv_rn(BC_ELEM_MAX_FINITE, amax);
  if (scale == __uint_as_float(0x7F800000u)) scale = inf_value;
#if BC_SCALE_POW2
  scale = __uint_as_float(__float_as_uint(scale) & 0xFF800000u);
#endif
  return scale;
}
#endif

// ---------------------------------------------------------------------------------------------
// block formats: scale layouts, block scale rules, Philox4x32-10
// ---------------------------------------------------------------------------------------------
// A scale layout (runtime/fmt/bc_fmt.h: bci_sl): the logical scale matrix [lrows, lcols] padded
// to [prows, pcols]; order 0 row-major (ld = pcols), 1 stored transposed (ld = prows), 2 the
// 128x4 GEMM swizzle (ld = pcols). A window of a larger layout (the shard cast's regions) has the
// larger one's ld and its own extent as the padded one (no padding); a swizzled window's order is
// 2 + (roff << 8) + (coff << 16): its entry (r, c) is the larger layout's (r + roff, c + coff)
// counted from the atom that holds its first entry (roff < 128, coff < 4). Only the kernels
// generated with BC_SL_WINDOW take swizzled windows (the block quantize kernels' list variants,
// gen/blockcast.lua); with no padding, the padding helpers below find none in one.
struct bc_sl {
  i64 ld, lrows, lcols, prows, pcols;
  int order, per_row;
};

static __device__ __forceinline__ i64 bc_sl_offset(const bc_sl &sl, i64 r, i64 c) {
  if (sl.order == 0) return r * sl.ld + c;
  if (sl.order == 1) return c * sl.ld + r;
  // the 128x4 swizzle: atoms of 128 rows x 4 entries, 512 bytes, a row of atoms pcols / 4 long; a
  // window (BC_SL_WINDOW) from its in-atom origin in the order word, its atom rows ld / 4 long.
  // (The atoms a row as a macro: the expression stays the one the kernels were measured with; a
  // local for it reordered two kernels' instructions, bc_comm_place and mxfp4 fp32 rowcol.)
#if BC_SL_WINDOW
  r += (sl.order >> 8) & 127, c += (sl.order >> 16) & 3;
#define BC_SL_ATOMS (sl.ld >> 2)
#else
#define BC_SL_ATOMS (sl.pcols >> 2)
#endif
  return (r >> 7) * BC_SL_ATOMS * 512 + (c >> 2) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (c & 3);
#undef BC_SL_ATOMS
}

// a / b and a % b (a >= 0, b > 0) in 32-bit arithmetic where both fit (a 64-bit division is a
// long call sequence; these run once per scale-padding entry)
static __device__ __forceinline__ void bc_divmod(i64 a, i64 b, i64 &q, i64 &r) {
  if (((u64)a | (u64)b) < 0x100000000ull) {
    const u32 q32 = (u32)a / (u32)b;
    q = q32;
    r = (i64)((u32)a - q32 * (u32)b);
  } else {
    q = a / b;
    r = a % b;
  }
}

// Zero the i-th padding entry of a scale layout (i < bc_sl_pad_count); entries are `bytes` wide.
// Compact layouts are stored row-major, [prows, pcols] (order 0) or [pcols, prows] (order 1),
// the valid entries in the top-left corner: the padding is the stored rows past the valid ones (a
// contiguous tail: no division) and, first, the padding columns of the valid stored rows. The
// 128x4 swizzle (order 2): whole padding rows first, then the padding columns of the valid rows.
static __device__ __forceinline__ i64 bc_sl_pad_count(const bc_sl &sl) { return sl.prows * sl.pcols - sl.lrows * sl.lcols; }
static __device__ __forceinline__ void bc_sl_pad_zero(const bc_sl &sl, void *scale, int bytes, i64 i) {
  i64 off;
  if (sl.order != 2) {
    const i64 vs = sl.order == 0 ? sl.lrows : sl.lcols, vt = sl.order == 0 ? sl.lcols : sl.lrows;  // valid stored rows, cols
    const i64 w = sl.ld - vt, side = vs * w;  // the padding columns of the valid stored rows
    if (i >= side) {
      off = vs * sl.ld + (i - side);
    } else {
      i64 r, c;
      bc_divmod(i, w, r, c);
      off = r * sl.ld + vt + c;
    }
  } else {
    const i64 below = (sl.prows - sl.lrows) * sl.pcols;  // whole padding rows first
    i64 r, c;
    if (i < below) {
      bc_divmod(i, sl.pcols, r, c);
      r += sl.lrows;
    } else {
      bc_divmod(i - below, sl.pcols - sl.lcols, r, c);
      c += sl.lcols;
    }
    off = bc_sl_offset(sl, r, c);
  }
  if (bytes == 4) ((u32 *)scale)[off] = 0u; else ((u8 *)scale)[off] = 0u;
}

// The same padding in two parts, without an entry-by-entry enumeration (quantize_thin.cu, where
// a [1, 4096] tensor's 128 MXFP8 scales carry 16256 padding entries):
// - the side: the padding after the last valid entry of a stored row (compact order 0 and the
//   swizzle: the logical row's padding columns; order 1: a stored row is a logical column, its
//   padding the logical rows past lrows). Zeroed by whoever writes that last entry (bc_sl_last,
//   bc_sl_zero_side): compact, a contiguous byte range that a team of lanes shares in 16-byte
//   pieces; swizzled, at most 3 entries of the row's last 4-column group.
// - the tail: the stored rows past the valid ones. Compact: one contiguous byte range, zeroed in
//   aligned 16-byte pieces. Swizzled: the logical rows past lrows, all in the last 128-row band:
//   a piece is one row slot of an atom (16 entries: rows s, s + 32, s + 64, s + 96 of the band,
//   4 columns each), each of its 4-entry groups zeroed where its row is padding.
// Side + tail = every padding entry, once (bc_sl_pad_count).
// Pieces of the byte range [a, b) of a buffer: the aligned 16-byte windows it meets (the first
// and last partial ones byte by byte).
static __device__ __forceinline__ i64 bc_range_pieces(const void *base, i64 a, i64 b) {
  const unsigned long long p = (unsigned long long)base;
  return a < b ? (i64)(((p + b + 15) >> 4) - ((p + a) >> 4)) : 0;
}
static __device__ __forceinline__ void bc_range_zero_piece(void *base, i64 a, i64 b, i64 i) {
  const unsigned long long p = (unsigned long long)base, w = (((p + a) >> 4) + (unsigned long long)i) << 4;
  const unsigned long long lo = w > p + a ? w : p + a, hi = w + 16 < p + b ? w + 16 : p + b;
  if (lo == w && hi == w + 16) {
    *(uint4 *)w = make_uint4(0u, 0u, 0u, 0u);
  } else {
#pragma unroll 1
    for (unsigned long long q = lo; q < hi; q++) *(u8 *)q = 0;
  }
}
static __device__ __forceinline__ bool bc_sl_last(const bc_sl &sl, i64 r, i64 c) {
  return sl.order == 1 ? r == sl.lrows - 1 : c == sl.lcols - 1;
}
// the side of entry (r, c)'s stored row, shared by lanes `lane` of `tl`
static __device__ __forceinline__ void bc_sl_zero_side(const bc_sl &sl, void *scale, int bytes, i64 r, i64 c, int lane, int tl) {
  if (sl.order == 2) {
    if (lane == 0)
#pragma unroll 1
      for (i64 k = sl.lcols; k < sl.pcols; k++) {
        const i64 off = bc_sl_offset(sl, r, k);
        if (bytes == 4) ((u32 *)scale)[off] = 0u; else ((u8 *)scale)[off] = 0u;
      }
    return;
  }
  // a stored row: ld apart, pcols (order 0) or prows (order 1) wide; a window of a larger layout
  // (the shard cast's interior: its own extent as padded extent, the larger layout's ld) has none
  const i64 row = sl.order == 0 ? r : c, vt = sl.order == 0 ? sl.lcols : sl.lrows, pt = sl.order == 0 ? sl.pcols : sl.prows;
  const i64 a = (row * sl.ld + vt) * bytes, b = (row * sl.ld + pt) * bytes;
#pragma unroll 1
  for (i64 i = lane, n = bc_range_pieces(scale, a, b); i < n; i += tl) bc_range_zero_piece(scale, a, b, i);
}
// Whether entry (r, c), the last valid one of its stored row, and that row's side fill exactly the
// aligned 4-byte word that begins at the entry (one-byte entries): e.g. a [4096, 1] tensor's
// rowwise scales, one valid entry and three of padding a row. Then one 32-bit store writes the
// entry and zeroes the side (bc_write_scale_side4), instead of a byte store and the side's range
// arithmetic (quantize_thin.cu: 16% fewer instructions on bench_list's [4096, 1] / [4096, 2] and
// [1, 4096] tensors, H100). A window of a larger layout (no side) never qualifies.
static __device__ __forceinline__ bool bc_sl_side4(const bc_sl &sl, const void *scale, i64 r, i64 c) {
#if BC_SCALE_BYTES == 1
  const i64 k = sl.order == 1 ? r : c, pt = sl.order == 1 ? sl.prows : sl.pcols;  // place in the stored row, its width
  return pt - k == 4 && (((unsigned long long)scale + (unsigned long long)bc_sl_offset(sl, r, c)) & 3) == 0;
#else
  return false;
#endif
}
static __device__ __forceinline__ void bc_write_scale_side4(void *scale, const bc_sl &sl, i64 r, i64 c, u32 stored) {
  *(u32 *)((u8 *)scale + bc_sl_offset(sl, r, c)) = stored & 0xFFu;
}
// compact: the tail's bytes [a, b) from the buffer's start (empty for a window: padded extent =
// its own; a layout with padding rows is dense, ld = its width)
static __device__ __forceinline__ void bc_sl_tail_range(const bc_sl &sl, int bytes, i64 &a, i64 &b) {
  const i64 vs = sl.order == 0 ? sl.lrows : sl.lcols, s = sl.order == 0 ? sl.prows : sl.pcols;
  a = vs * sl.ld * bytes;
  b = s > vs ? s * sl.ld * bytes : a;
}
static __device__ __forceinline__ i64 bc_sl_tail_pieces(const bc_sl &sl, const void *scale, int bytes) {
  if (sl.order == 2) return sl.prows > sl.lrows ? (sl.pcols >> 2) * 32 : 0;
  i64 a, b;
  bc_sl_tail_range(sl, bytes, a, b);
  return bc_range_pieces(scale, a, b);
}
static __device__ __forceinline__ void bc_sl_zero_tail_piece(const bc_sl &sl, void *scale, int bytes, i64 i) {
  if (sl.order != 2) {
    i64 a, b;
    bc_sl_tail_range(sl, bytes, a, b);
    bc_range_zero_piece(scale, a, b, i);
    return;
  }
  const i64 band = (sl.prows >> 7) - 1, cg = i >> 5;
  const int s = (int)(i & 31);
  u8 *atom = (u8 *)scale + ((band * (sl.pcols >> 2) + cg) * 512 + s * 16) * bytes;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    if (band * 128 + 32 * j + s < sl.lrows) continue;
    u8 *g = atom + j * 4 * bytes;  // 4 entries: columns 4 cg .. 4 cg + 3 of the row
    if (bytes == 4 && ((unsigned long long)g & 15) == 0) *(uint4 *)g = make_uint4(0u, 0u, 0u, 0u);
    else if (bytes == 1 && ((unsigned long long)g & 3) == 0) *(u32 *)g = 0u;
    else
#pragma unroll 1
      for (int k = 0; k < 4 * bytes; k++) g[k] = 0;
  }
}

// Philox4x32-10 (Salmon et al., SC'11): counter c, key k.
static __device__ __forceinline__ uint4 bc_philox(uint4 c, uint2 k) {
#pragma unroll
  for (int i = 0; i < 10; i++) {
    u32 hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
    u32 hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return c;
}

// Random bits of element `e` (an index in the direction's stream): word e % 4 of
// Philox(counter = (e / 4, offset), key = seed).
struct bc_rng {
  u64 seed, offset, group;
  uint4 r;
  __device__ __forceinline__ void init(u64 s, u64 o) { seed = s; offset = o; group = ~0ull; }
  __device__ __forceinline__ u32 bits(u64 e) {
    u64 g = e >> 2;
    if (g != group) {
      group = g;
      r = bc_philox(make_uint4((u32)g, (u32)(g >> 32), (u32)offset, (u32)(offset >> 32)), make_uint2((u32)seed, (u32)(seed >> 32)));
    }
    u32 w = (u32)(e & 3);
    return w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
  }
};

// 2^(127 - e) for an e8m0 code e (e = 254: the denormal 2^-127, e = 255: NaN)
static __device__ __forceinline__ float bc_e8m0_enc(u32 e) {
  if (e == 255u) return __uint_as_float(0x7FFFFFFFu);
  if (e == 254u) return __uint_as_float(0x00400000u);
  return __uint_as_float((254u - e) << 23);
}
// 2^(e - 127) (e = 0: the denormal 2^-127, e = 255: NaN)
static __device__ __forceinline__ float bc_e8m0_dec(u32 e) {
  if (e == 255u) return __uint_as_float(0x7FFFFFFFu);
  if (e == 0u) return __uint_as_float(0x00400000u);
  return __uint_as_float(e << 23);
}

#ifdef BC_BLOCK_FORMAT
// Block amaxes ignore NaN as fmaxf does; under nan_policy "scale_nan" (BC_NAN_SCALE) a NaN
// propagates to its block's amax, whose scale entry becomes the scale type's NaN code.
#if BC_NAN_SCALE && BC_ARCH < 80
#error "nan_policy \"scale_nan\" needs sm_80 or newer (max.NaN)"
#endif
static __device__ __forceinline__ float bc_bmax(float a, float b) {
#if BC_NAN_SCALE
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return fmaxf(a, b);
#endif
}

// Scale entry (r, c) of layout sl (a block-format scale: fp32 bits, or a one-byte code).
static __device__ __forceinline__ void bc_write_scale(void *scale, const bc_sl &sl, i64 r, i64 c, u32 stored) {
  const i64 off = bc_sl_offset(sl, r, c);
#if BC_SCALE_BYTES == 4
  ((u32 *)scale)[off] = stored;
#else
  ((u8 *)scale)[off] = (u8)stored;
#endif
}

// The scale of one block from its amax: `enc` multiplies the inputs before the conversion;
// `stored` is the scale_inv entry (fp32 bits, or an e8m0 / scale-element code).
struct bc_bscale {
  float enc;
  u32 stored;
};

// floor(t / d) for t < 2^31 from the host's m, s for d (runtime/base/bc_base.h: bci_udiv31): one
// wide multiply and a shift instead of a division (a 64-bit one: a fast 32-bit path of ~20
// instructions, a call otherwise)
static __device__ __forceinline__ u32 bc_udiv31(u32 t, u32 m, u32 s) { return (u32)(((u64)t * m) >> s); }

// Per-tensor part of a two-level rule, from the global amax: S_enc * (1 / elem_max) and S_dec.
struct bc_tensor_scale {
  float enc_per_elem, dec;
};

static __device__ __forceinline__ bc_tensor_scale bc_tensor_scale_from_amax(const float *global_amax) {
  bc_tensor_scale t;
  t.enc_per_elem = 1.0f;
  t.dec = 1.0f;
#if BC_RULE == 3
  float ga = *global_amax;
  float s_enc = fminf(__fdiv_rn(BC_TWO_LEVEL_NUM, ga), BC_FLT_MAX);
  if (ga == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
  t.enc_per_elem = __fmul_rn(s_enc, __frcp_rn(BC_ELEM_MAX_FINITE));
  // The reference's (float)(1.0 / (double)s_enc). __frcp_rn(s_enc) gives the same bits for every
  // positive finite s_enc (21-gpu-cvt-selftest proves it) in fewer instructions; not adopted (NVFP4
  // columnwise 2% slower on an H100, tests/bench/NOTES.md), and the block quantize kernels now
  // compute this once a tile in one warp (quantize_block.cu: BC_TL_TAB), not in every thread.
  t.dec = __double2float_rn(__ddiv_rn(1.0, (double)s_enc));
#endif
  return t;
}


#if BC_RULE == 3 && defined(BC_SELEM_BITS)
// Two-level (NVFP4): a block's scale is s = scale_elem(amax * S_enc / elem_max), its code (< 2^BITS:
// amax x enc_per_elem is >= 0 or NaN) ...
static __device__ __forceinline__ u32 bc_two_level_code(float amax, float enc_per_elem) {
#if BC_SELEM_NONNEG_HW
  // the signed twin's conversion (two instructions, not ~25)
  return bc_selem_encode_nonneg(__fmul_rn(amax, enc_per_elem));
#else
  return bc_encode_t<bc_selem>(__fmul_rn(amax, enc_per_elem));
#endif
}
// ... and its elements' encode factor 1 / (s * S_dec), a function of the code alone within a tensor
// (quantize_block.cu tabulates it per tile: BC_TL_TAB)
static __device__ __forceinline__ float bc_two_level_enc(u32 code, float dec) {
#if BC_SELEM_NONNEG_HW
  const float fs = bc_selem_decode_hw(code);
#else
  const float fs = bc_decode_t<bc_selem>(code);
#endif
#if BC_NAN_SCALE
  if (fs != fs) return fs;  // a marked block (its amax NaN): elements from x * NaN, as the other rules
#endif
  return fminf(__fdiv_rn(1.0f, __fmul_rn(fs, dec)), BC_FLT_MAX);
}
#endif

#ifdef BC_DTYPE
static __device__ __forceinline__ bc_bscale bc_block_scale(float amax, const bc_tensor_scale &ts) {
  bc_bscale s;
#if BC_RULE == 0
#if BC_NAN_SCALE
  if (amax != amax) {  // nan_policy "scale_nan": the block is marked, scale_inv NaN
    s.enc = __uint_as_float(0x7FFFFFFFu);
    s.stored = 0x7FFFFFFFu;
    return s;
  }
#endif
  // fp32: scale_from_amax, an Inf scale -> BC_SCALE_INF_VALUE
  const float sc = bc_scale_from_amax(amax, BC_SCALE_INF_VALUE);
  s.enc = sc;
  s.stored = __float_as_uint(__frcp_rn(sc));
#elif BC_RULE == 1
  // RCEIL: the smallest e with 2^(e-127) >= amax * (1 / elem_max), saturating at 254
  float v = __fmul_rn(amax, __frcp_rn(BC_ELEM_MAX_FINITE));
  u32 b = __float_as_uint(v), ex = b >> 23, e;
  if (v != v) e = 255u;
  else if (ex == 0u) e = (b <= 0x00400000u) ? 0u : 1u;  // zero and denormals: 2^-127 or 2^-126
  else e = ex + ((b & 0x7FFFFFu) != 0u ? 1u : 0u);
  if (e > 254u && v == v) e = 254u;
  s.stored = e;
  s.enc = bc_e8m0_enc(e);
#elif BC_RULE == 2
  // FLOOR (OCP): 2^(floor(log2 amax) - emax_elem), clamped to the e8m0 range
  u32 b = __float_as_uint(amax), ex = b >> 23, e;
  if (amax != amax) e = 255u;
  else if (ex == 255u) e = 254u;  // Inf
  else if (ex == 0u || ex <= BC_ELEM_EMAX) e = 0u;
  else e = ex - BC_ELEM_EMAX > 254u ? 254u : ex - BC_ELEM_EMAX;
  s.stored = e;
  s.enc = bc_e8m0_enc(e);
#else
  s.stored = bc_two_level_code(amax, ts.enc_per_elem);
  s.enc = bc_two_level_enc(s.stored, ts.dec);
#endif
  return s;
}
#endif

// The dequantization factor of a stored scale entry (fp32 scale_inv, e8m0, scale element).
static __device__ __forceinline__ float bc_scale_dec(u32 stored) {
#if BC_RULE == 0
  return __uint_as_float(stored);
#elif BC_RULE == 1 || BC_RULE == 2
  return bc_e8m0_dec(stored);
#else
  return bc_decode_t<bc_selem>(stored);
#endif
}
#endif
