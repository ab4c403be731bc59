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

static __device__ __forceinline__ void bc_store_hp(BC_DTYPE_T *p, i64 i, float v) {
#if BC_DTYPE == 0
  p[i] = __uint_as_float(bc_f32_bits_canonical(v));
#elif BC_DTYPE == 1
  p[i] = bc_bf16_from_f32(v);
#else
  p[i] = bc_f16_from_f32(v);
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
#ifdef BC_ELEM_BITS
#define BC_ELEM_SIGN_SHIFT (BC_ELEM_BITS - 1)

static __device__ __forceinline__ u32 bc_encode_generic(float x) {
  u32 b = __float_as_uint(x);
  u32 sign = BC_ELEM_SIGNED ? ((b >> 31) << BC_ELEM_SIGN_SHIFT) : 0u;
  u32 a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return BC_ELEM_NAN_ENCODE;
  u32 code;
  // below the smallest normal 2^(1-bias): a multiple of the subnormal step 2^(1-bias-mbits)
  if (a < (u32)(128 - BC_ELEM_BIAS) << 23) {
    // exact scaling by 2^(bias-1+mbits), then round to nearest even
    float s = __uint_as_float(a) * __uint_as_float((u32)(127 + BC_ELEM_BIAS - 1 + BC_ELEM_MBITS) << 23);
    code = (u32)__float2uint_rn(s);
  } else {
    const u32 shift = 23 - BC_ELEM_MBITS;
    u32 r = (a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u)) >> shift;
    u32 rebias = (u32)(127 - BC_ELEM_BIAS) << BC_ELEM_MBITS;
    code = r - rebias;
    if (r > rebias + BC_ELEM_MAX_CODE) code = BC_ELEM_MAX_CODE;
  }
  if (code > BC_ELEM_MAX_CODE) code = BC_ELEM_MAX_CODE;
  return code | sign;
}

// Two codes, a in bits 0..7 and b in bits 8..15.
static __device__ __forceinline__ u32 bc_encode2(float a, float b) {
#if BC_ELEM_HW_CVT
  u16 d;
  asm("cvt.rn.satfinite.${ELEM_PTX}.f32 %0, %1, %2;" : "=h"(d) : "f"(b), "f"(a));
  return (u32)d;
#else
  return bc_encode_generic(a) | (bc_encode_generic(b) << 8);
#endif
}

static __device__ __forceinline__ u32 bc_encode1(float a) {
#if BC_ELEM_HW_CVT
  return bc_encode2(a, 0.0f) & 0xFFu;
#else
  return bc_encode_generic(a);
#endif
}

// BC_VEC values times scale, encoded; codes packed four to a word, element 0 in the low byte.
static __device__ __forceinline__ void bc_encode_scaled(const float *f, float scale, u32 *w) {
#pragma unroll
  for (int j = 0; j < BC_VEC; j += 2) {
    u32 q = bc_encode2(__fmul_rn(f[j], scale), __fmul_rn(f[j + 1], scale));
    if ((j & 3) == 0) w[j >> 2] = q; else w[j >> 2] |= q << 16;
  }
}

static __device__ __forceinline__ float bc_decode(u32 c) {
  if (BC_ELEM_IS_NAN(c)) return __uint_as_float(0x7FFFFFFFu);
  u32 s = BC_ELEM_SIGNED ? ((c >> BC_ELEM_SIGN_SHIFT) & 1u) << 31 : 0u;
  if (BC_ELEM_IS_INF(c)) return __uint_as_float(s | 0x7F800000u);
  u32 e = (c >> BC_ELEM_MBITS) & ((1u << (BC_ELEM_BITS - BC_ELEM_SIGNED - BC_ELEM_MBITS)) - 1u);
  u32 m = c & ((1u << BC_ELEM_MBITS) - 1u);
  float v;
  if (e == 0) {
    // subnormal: m * 2^(1 - bias - mbits), exact
    v = (float)m * __uint_as_float((u32)(127 + 1 - BC_ELEM_BIAS - BC_ELEM_MBITS) << 23);
  } else {
    v = __uint_as_float(((e + 127 - BC_ELEM_BIAS) << 23) | (m << (23 - BC_ELEM_MBITS)));
  }
  return __uint_as_float(__float_as_uint(v) | s);
}

// Two codes (a in bits 0..7, b in bits 8..15) to fp32. With the hardware conversion, through
// fp16 (exact when every element value is an fp16 value; NaN stays NaN, Inf stays Inf).
static __device__ __forceinline__ void bc_decode2(u32 c2, float *a, float *b) {
#if BC_ELEM_HW_CVT && BC_ELEM_F16_EXACT
  u32 h2;
  asm("cvt.rn.f16x2.${ELEM_PTX} %0, %1;" : "=r"(h2) : "h"((u16)c2));
  *a = bc_f32_from_f16((u16)(h2 & 0xFFFFu));
  *b = bc_f32_from_f16((u16)(h2 >> 16));
#else
  *a = bc_decode(c2 & 0xFFu);
  *b = bc_decode((c2 >> 8) & 0xFFu);
#endif
}
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
