/* ref/bc_ref_elem.c: the reference's primitives, shared by the per-tensor (bc_ref_tensor.c) and block
 * (bc_ref_block.c) formats: element encode (the nearest finite code by searching the element's
 * value table, ties to the even code, saturating) and decode, fp32/bf16/fp16 loads and stores
 * (stores round to nearest even, NaN canonical), and the NaN-ignoring max |x| of a tensor. */
#include <math.h>
#include <string.h>

#include "ref/bc_ref.h"

/* ---- elements ---- */

float bci_ref_decode(const bci_element *e, unsigned code) {
  if (e->is_nan[code & 0xFF]) return NAN;
  if (e->is_inf[code & 0xFF]) return (e->is_signed && (code >> (e->bits - 1)) & 1) ? -INFINITY : INFINITY;
  return (float)e->value[code & 0xFF];
}

unsigned bci_ref_encode(const bci_element *e, float x) {
  if (isnan(x)) return (unsigned)e->nan_encode;
  unsigned sign = (e->is_signed && signbit(x)) ? 1u << (e->bits - 1) : 0u;
  double a = fabs((double)x);
  if (!e->is_signed && signbit(x)) a = 0; /* unsigned elements clamp negatives to 0 */
  if (a >= e->max_finite) return (unsigned)e->max_code | sign;
  /* codes 0..max_code increase in value: find lo with v(lo) <= a < v(lo + 1) */
  unsigned lo = 0, hi = (unsigned)e->max_code;
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    if (e->value[mid] <= a) lo = mid; else hi = mid;
  }
  double dl = a - e->value[lo], dh = e->value[hi] - a;
  unsigned c;
  if (dl < dh) c = lo;
  else if (dh < dl) c = hi;
  else c = (lo % 2 == 0) ? lo : hi; /* tie: the even code */
  return c | sign;
}

/* ---- hp dtypes ---- */

static float half_to_float(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp(m, -24);
  else v = ldexp(1024 + m, e - 25);
  return (float)(s ? -v : v);
}

static uint16_t float_to_half(float f) {
  if (isnan(f)) return 0x7FFF;
  uint16_t s = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (a >= 65520.0) return s | 0x7C00;
  if (a < ldexp(1, -14)) return s | (uint16_t)nearbyint(a * ldexp(1, 24));
  int e;
  double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  e -= 1;                  /* a = (2m) * 2^e */
  double q = nearbyint((2 * m - 1) * 1024);
  if (q == 1024) { q = 0; e++; }
  if (e + 15 >= 31) return s | 0x7C00;
  return s | (uint16_t)(((e + 15) << 10) | (int)q);
}

static uint16_t float_to_bf16(float f) {
  if (isnan(f)) return 0x7FFF;
  uint32_t b = bci_bits_from_f32(f);
  uint32_t lower = b & 0xFFFF, upper = b >> 16;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) upper++;
  return (uint16_t)upper;
}

float bci_ref_load(const bc_tensor *x, int64_t ld, int64_t r, int64_t c) {
  int64_t i = r * ld + c;
  switch (x->dtype) {
  case BC_FP32: return ((const float *)x->data)[i];
  case BC_BF16: return bci_f32_from_bits((uint32_t)((const uint16_t *)x->data)[i] << 16);
  case BC_FP16: return half_to_float(((const uint16_t *)x->data)[i]);
  }
  return 0;
}

void bci_ref_store(const bc_tensor *x, int64_t ld, int64_t r, int64_t c, float v) {
  int64_t i = r * ld + c;
  switch (x->dtype) {
  case BC_FP32: ((float *)x->data)[i] = isnan(v) ? bci_f32_from_bits(0x7FFFFFFF) : v; break;
  case BC_BF16: ((uint16_t *)x->data)[i] = float_to_bf16(v); break;
  case BC_FP16: ((uint16_t *)x->data)[i] = float_to_half(v); break;
  }
}

/* ---- amax ---- */

float bci_ref_amax(const bc_tensor *x, int64_t ld) {
  float m = 0.0f;
  for (int64_t r = 0; r < x->rows; r++)
    for (int64_t c = 0; c < x->cols; c++) {
      float a = fabsf(bci_ref_load(x, ld, r, c));
      if (a > m) m = a; /* NaN compares false: ignored */
    }
  return m;
}
