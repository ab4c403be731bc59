/* bc_ref.c: the CPU reference, written from the rules in DESIGN.md and not from the templates:
 * encode picks the nearest finite code by searching the element's value table (ties to the even
 * code), decode reads the layout; scales follow scale_from_amax step by step in fp32.
 * Compiled with -ffp-contract=off so that every fp32 operation rounds once, as on the GPU.
 * Block formats (1x128 / 128x128, MX, NVFP4) are in bc_ref_block.c, which uses the helpers here. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bc_internal.h"

/* ---- elements ---- */

static double layout_value(const bci_element *e, unsigned code) {
  int mb = e->mantissa_bits, eb = e->exponent_bits;
  double sign = (e->is_signed && ((code >> (e->bits - 1)) & 1)) ? -1.0 : 1.0;
  unsigned ex = (code >> mb) & ((1u << eb) - 1);
  unsigned man = code & ((1u << mb) - 1);
  if (ex == 0 && e->subnormals) return sign * ldexp((double)man, 1 - e->bias - mb);
  return sign * ldexp(1.0 + ldexp((double)man, -mb), (int)ex - e->bias);
}

void bci_element_prepare(bci_element *e) {
  for (unsigned c = 0; c < 256; c++) e->value[c] = c >> e->bits ? 0.0 : layout_value(e, c);
}

static float ref_decode(const bci_element *e, unsigned code) {
  if (e->is_nan[code & 0xFF]) return NAN;
  if (e->is_inf[code & 0xFF]) return (e->is_signed && (code >> (e->bits - 1)) & 1) ? -INFINITY : INFINITY;
  return (float)e->value[code & 0xFF];
}

static unsigned ref_encode(const bci_element *e, float x) {
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

static float f32_from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits_from_f32(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

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
  uint32_t b = bits_from_f32(f);
  uint32_t lower = b & 0xFFFF, upper = b >> 16;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) upper++;
  return (uint16_t)upper;
}

static float load_hp(const bc_tensor *x, int64_t ld, int64_t r, int64_t c) {
  int64_t i = r * ld + c;
  switch (x->dtype) {
  case BC_FP32: return ((const float *)x->data)[i];
  case BC_BF16: return f32_from_bits((uint32_t)((const uint16_t *)x->data)[i] << 16);
  case BC_FP16: return half_to_float(((const uint16_t *)x->data)[i]);
  }
  return 0;
}

static void store_hp(const bc_tensor *x, int64_t ld, int64_t r, int64_t c, float v) {
  int64_t i = r * ld + c;
  switch (x->dtype) {
  case BC_FP32: ((float *)x->data)[i] = isnan(v) ? f32_from_bits(0x7FFFFFFF) : v; break;
  case BC_BF16: ((uint16_t *)x->data)[i] = float_to_bf16(v); break;
  case BC_FP16: ((uint16_t *)x->data)[i] = float_to_half(v); break;
  }
}

/* ---- for the block formats' reference (bc_ref_block.c) ---- */

float bci_ref_load(const bc_tensor *x, int64_t ld, int64_t r, int64_t c) { return load_hp(x, ld, r, c); }
void bci_ref_store(const bc_tensor *x, int64_t ld, int64_t r, int64_t c, float v) { store_hp(x, ld, r, c, v); }
unsigned bci_ref_encode(const bci_element *e, float x) { return ref_encode(e, x); }
float bci_ref_decode(const bci_element *e, unsigned code) { return ref_decode(e, code); }

/* ---- scale ---- */

static void scale_from_amax(const bc_format *f, float amax, float *scale, float *scale_inv) {
  float fmax = (float)f->elem.max_finite;
  float eps = (float)f->eps;
  if (amax < eps) amax = eps;
  float s;
  if (amax == 0.0f || isnan(amax) || isinf(amax)) {
    s = 1.0f;
  } else {
    s = fmax / amax;
    if (isinf(s)) s = FLT_MAX;
    if (f->pow2) s = f32_from_bits(bits_from_f32(s) & 0xFF800000u);
  }
  *scale = s;
  *scale_inv = 1.0f / s;
}

/* ---- public reference calls ---- */

bc_status bc_ref_encode(bc_ctx *ctx, const bc_format *fmt, float x, uint8_t *code) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!code) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_encode: argument 'code' is NULL");
  *code = (uint8_t)ref_encode(&fmt->elem, x);
  return BC_OK;
}

bc_status bc_ref_decode(bc_ctx *ctx, const bc_format *fmt, uint8_t code, float *x) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!x) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_decode: argument 'x' is NULL");
  if (code >> fmt->elem.bits) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_decode: code 0x%02X has more than %d bits", code, fmt->elem.bits);
  *x = ref_decode(&fmt->elem, code);
  return BC_OK;
}

bc_status bc_ref_scale(bc_ctx *ctx, const bc_format *fmt, float amax, float *scale, float *scale_inv) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!scale || !scale_inv) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_scale: arguments 'scale' and 'scale_inv' must not be NULL");
  scale_from_amax(fmt, amax, scale, scale_inv);
  return BC_OK;
}

float bci_ref_amax(const bc_tensor *x, int64_t ld) {
  float m = 0.0f;
  for (int64_t r = 0; r < x->rows; r++)
    for (int64_t c = 0; c < x->cols; c++) {
      float a = fabsf(load_hp(x, ld, r, c));
      if (a > m) m = a; /* NaN compares false: ignored */
    }
  return m;
}

bc_status bc_ref_amax(bc_ctx *ctx, const bc_tensor *x, float *amax) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  int64_t ld;
  bc_status s = bci_check_tensor(ctx, "bc_ref_amax", "x", x, &ld);
  if (s != BC_OK) return s;
  if (!amax) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_amax: argument 'amax' is NULL");
  *amax = bci_ref_amax(x, ld);
  return BC_OK;
}

static bc_status ref_cast(bc_ctx *ctx, const char *fn, const bc_tensor *x, bc_qtensor *q, int current) {
  int64_t ld;
  bc_status s = bci_check_tensor(ctx, fn, "x", x, &ld);
  if (s != BC_OK) return s;
  s = bci_check_format(ctx, q ? q->format : NULL, "q->format");
  if (s != BC_OK) return s;
  if (q->rows != x->rows || q->cols != x->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has shape [%lld, %lld] but x has [%lld, %lld]", fn, (long long)q->rows,
                    (long long)q->cols, (long long)x->rows, (long long)x->cols);
  if (q->format->block != BC_BLOCK_TENSOR) return bci_ref_block_cast(ctx, fn, x, ld, q, current);
  if (!q->scale || (current && !q->amax)) return bci_fail(ctx, BC_ERR_ARG, "%s: q->scale (and q->amax for current scaling) must be set", fn);
  if (!q->rowwise_data && !q->columnwise_data) return bci_fail(ctx, BC_ERR_ARG, "%s: q has no direction to write", fn);
  const bci_element *e = &q->format->elem;
  if (current) {
    float si;
    *q->amax = bci_ref_amax(x, ld);
    scale_from_amax(q->format, *q->amax, q->scale, &si);
  }
  float scale = *q->scale, si = 1.0f / scale;
  uint8_t *ro = q->rowwise_data, *co = q->columnwise_data;
  for (int64_t r = 0; r < x->rows; r++)
    for (int64_t c = 0; c < x->cols; c++) {
      float v = load_hp(x, ld, r, c) * scale;
      uint8_t code = (uint8_t)ref_encode(e, v);
      if (ro) ro[r * x->cols + c] = code;
      if (co) co[c * x->rows + r] = code;
    }
  if (ro && q->rowwise_scale_inv) *(float *)q->rowwise_scale_inv = si;
  if (co && q->columnwise_scale_inv) *(float *)q->columnwise_scale_inv = si;
  return BC_OK;
}

bc_status bc_ref_quantize_cast(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return ref_cast(ctx, "bc_ref_quantize_cast", x, q, 0);
}

bc_status bc_ref_quantize(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return ref_cast(ctx, "bc_ref_quantize", x, q, 1);
}

bc_status bc_ref_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, q ? q->format : NULL, "q->format");
  if (s != BC_OK) return s;
  if (q->format->block != BC_BLOCK_TENSOR) return bci_ref_block_dequantize(ctx, q, dir, out);
  int64_t ld;
  s = bci_check_tensor(ctx, "bc_ref_dequantize", "out", out, &ld);
  if (s != BC_OK) return s;
  const uint8_t *d = dir == BC_ROWWISE ? q->rowwise_data : q->columnwise_data;
  const float *sip = dir == BC_ROWWISE ? q->rowwise_scale_inv : q->columnwise_scale_inv;
  if (!d || !sip) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_dequantize: the direction's data and scale_inv must be set");
  int64_t rows = q->rows, cols = q->cols;
  if (dir == BC_COLUMNWISE && q->format->columnwise_transposed) { rows = q->cols; cols = q->rows; }
  if (out->rows != rows || out->cols != cols) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_dequantize: out shape does not match");
  float si = *sip;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) store_hp(out, ld, r, c, ref_decode(&q->format->elem, d[r * cols + c]) * si);
  return BC_OK;
}
