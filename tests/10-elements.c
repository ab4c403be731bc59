/* 10-elements: the CPU reference's e4m3 / e5m2 (all 256 codes) and e3m2 / e2m3 (MXFP6: all 64
 * codes) decode, and encode at every rounding boundary (midpoints -> even code, just above/below),
 * saturation, NaN (the NaN code, or +max for elements without one), Inf, signed zero, denormals,
 * fp32 denormal inputs; scale_from_amax by hand. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "blockcast.h"
#include "tap.h"

static bc_ctx *ctx;

static uint8_t enc(const bc_format *f, float x) { uint8_t c = 0xAA; bc_ref_encode(ctx, f, x, &c); return c; }
static float dec(const bc_format *f, uint8_t c) { float x; bc_ref_decode(ctx, f, c, &x); return x; }

/* value of a code written out by hand from the layout: (-1)^s 2^(e-bias) (1 + m/2^mb), sign bit
 * 1 + eb + mb - 1 */
static double hand(unsigned c, int eb, int mb, int bias) {
  unsigned s = c >> (eb + mb), e = (c >> mb) & ((1u << eb) - 1), m = c & ((1u << mb) - 1);
  double v = e ? ldexp(1.0 + m / (double)(1 << mb), (int)e - bias) : ldexp((double)m, 1 - bias - mb);
  return s ? -v : v;
}

/* nan: 1 e4m3 (0x7F, 0xFF), 2 e5m2 (Inf 0x7C and NaN above it), 0 none (a NaN input -> +max) */
static void check_element(const char *fname, int eb, int mb, int bias, double maxv, unsigned maxcode, int nan) {
  const bc_format *f;
  bc_format_get(ctx, fname, &f);
  const unsigned ncodes = 1u << (1 + eb + mb), sb = ncodes >> 1, has_inf = nan == 2;
  /* decode all codes */
  int good = 0;
  for (unsigned c = 0; c < ncodes; c++) {
    float x = dec(f, (uint8_t)c);
    unsigned mag = c & (sb - 1), neg = (c & sb) != 0;
    int nan_code = nan == 2 ? (mag > 0x7C) : nan == 1 ? (mag == 0x7F) : 0;
    int inf_code = has_inf && mag == 0x7C;
    if (nan_code) good += isnan(x);
    else if (inf_code) good += isinf(x) && (signbit(x) != 0) == neg;
    else good += x == (float)hand(c, eb, mb, bias) && (signbit(x) != 0) == neg;
  }
  is_int(good, (int)ncodes, "%s: decode of all %u codes", fname, ncodes);

  /* every pair of adjacent finite codes: midpoint -> even, just above -> upper, just below -> lower */
  int mids = 0, above = 0, below = 0, exact = 0, pairs = 0;
  for (unsigned c = 0; c < maxcode; c++) {
    float lo = (float)hand(c, eb, mb, bias), hi = (float)hand(c + 1, eb, mb, bias);
    float mid = (lo + hi) / 2;   /* exact in fp32 for elements of up to 8 bits */
    unsigned even = (c % 2 == 0) ? c : c + 1;
    pairs++;
    mids += enc(f, mid) == even && enc(f, -mid) == (even | sb);
    above += enc(f, nextafterf(mid, INFINITY)) == c + 1;
    below += enc(f, nextafterf(mid, -INFINITY)) == c;
    exact += enc(f, lo) == c && enc(f, -lo) == (c | sb);
  }
  is_int(mids, pairs, "%s: every midpoint rounds to the even code (both signs)", fname);
  is_int(above, pairs, "%s: just above every midpoint rounds up", fname);
  is_int(below, pairs, "%s: just below every midpoint rounds down", fname);
  is_int(exact, pairs, "%s: every finite value encodes to its own code", fname);

  /* saturation */
  is_int(enc(f, (float)maxv), maxcode, "%s: max encodes to 0x%02X", fname, maxcode);
  is_int(enc(f, nextafterf((float)maxv, INFINITY)), maxcode, "%s: just above max saturates", fname);
  is_int(enc(f, (float)maxv * 1.5f), maxcode, "%s: 1.5 x max saturates", fname);
  is_int(enc(f, FLT_MAX), maxcode, "%s: FLT_MAX saturates", fname);
  is_int(enc(f, INFINITY), maxcode, "%s: +Inf saturates to +max", fname);
  is_int(enc(f, -INFINITY), maxcode | sb, "%s: -Inf saturates to -max", fname);
  is_int(enc(f, -(float)maxv * 3.0f), maxcode | sb, "%s: -3 x max saturates to -max", fname);
  const unsigned nanc = nan ? 0x7F : maxcode; /* no NaN code: satfinite, +max */
  is_int(enc(f, NAN), nanc, "%s: NaN -> 0x%02X", fname, nanc);
  is_int(enc(f, -NAN), nanc, "%s: -NaN -> 0x%02X", fname, nanc);
  /* zeros and denormals */
  float minsub = (float)ldexp(1, 1 - bias - mb);
  is_int(enc(f, 0.0f), 0x00, "%s: +0", fname);
  is_int(enc(f, -0.0f), sb, "%s: -0 keeps its sign", fname);
  is_int(enc(f, minsub), 0x01, "%s: smallest subnormal", fname);
  is_int(enc(f, minsub / 2), 0x00, "%s: half the smallest subnormal ties to 0 (even)", fname);
  is_int(enc(f, nextafterf(minsub / 2, 1)), 0x01, "%s: just above half rounds up", fname);
  is_int(enc(f, -minsub / 4), sb, "%s: tiny negative rounds to -0", fname);
  is_int(enc(f, 1e-45f), 0x00, "%s: fp32 denormal input rounds to 0", fname);
  is_int(enc(f, (float)ldexp(1, 1 - bias)), 1u << mb, "%s: smallest normal", fname);
  is_int(enc(f, 1.0f), (unsigned)bias << mb, "%s: 1.0", fname);
}

int main(void) {
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  check_element("fp8_e4m3_tensor", 4, 3, 7, 448.0, 0x7E, 1);
  check_element("fp8_e5m2_tensor", 5, 2, 15, 57344.0, 0x7B, 2);
  /* OCP MX v1.0: E3M2 bias 3, max 28 (0x1F); E2M3 bias 1, max 7.5 (0x1F); no Inf, no NaN */
  check_element("mxfp6_e3m2", 3, 2, 3, 28.0, 0x1F, 0);
  check_element("mxfp6_e2m3", 2, 3, 1, 7.5, 0x1F, 0);

  /* a few values by hand */
  const bc_format *e4, *e5;
  bc_format_get(ctx, "fp8_e4m3_tensor", &e4);
  bc_format_get(ctx, "fp8_e5m2_tensor", &e5);
  is_int(enc(e4, 3.14159f), 0x45, "e4m3: pi -> 0x45 (3.25)");
  is_int(enc(e4, 17.0f), 0x58, "e4m3: 17 -> 16 (tie to even 0x58)");
  is_int(enc(e4, -300.0f), 0xF9, "e4m3: -300 -> -288 (0xF9)");
  is_int(enc(e5, 3.14159f), 0x42, "e5m2: pi -> 3.0 (0x42)");
  is_int(enc(e5, 61440.0f), 0x7B, "e5m2: 61440 (past max) saturates to 0x7B");
  ok(isinf(dec(e5, 0xFC)) && dec(e5, 0xFC) < 0, "e5m2: 0xFC is -Inf");
  const bc_format *m3, *m2;
  bc_format_get(ctx, "mxfp6_e3m2", &m3);
  bc_format_get(ctx, "mxfp6_e2m3", &m2);
  ok(dec(m3, 0x1F) == 28.0f && dec(m3, 0x3F) == -28.0f && dec(m3, 0x01) == 0.0625f && dec(m3, 0x04) == 0.25f,
     "e3m2: 0x1F = 28, 0x3F = -28, 0x01 = 1/16 (subnormal step), 0x04 = 0.25 (smallest normal)");
  ok(dec(m2, 0x1F) == 7.5f && dec(m2, 0x3F) == -7.5f && dec(m2, 0x01) == 0.125f && dec(m2, 0x08) == 1.0f,
     "e2m3: 0x1F = 7.5, 0x3F = -7.5, 0x01 = 1/8 (subnormal step), 0x08 = 1 (smallest normal)");
  is_int(enc(m3, 3.14159f), 0x12, "e3m2: pi -> 3.0 (0x12)");
  is_int(enc(m3, 26.0f), 0x1E, "e3m2: 26 (midpoint of 24, 28) -> 24 (even 0x1E)");
  is_int(enc(m2, 3.14159f), 0x15, "e2m3: pi -> 3.25 (0x15)");
  is_int(enc(m2, 3.1f), 0x14, "e2m3: 3.1 -> 3.0 (0x14)");
  is_int(enc(m2, 7.75f), 0x1F, "e2m3: 7.75 (midpoint past max) saturates to 7.5");
  ok(bc_ref_decode(ctx, m2, 0x40, &(float){ 0 }) == BC_ERR_ARG && strstr(bc_last_error(ctx), "more than 6 bits"),
     "e2m3: code 0x40 refused (more than 6 bits): %s", bc_last_error(ctx));


  /* scale_from_amax */
  float s, si;
  bc_ref_scale(ctx, e4, 448.0f, &s, &si);
  ok(s == 1.0f && si == 1.0f, "scale: amax 448 -> 1");
  bc_ref_scale(ctx, e4, 3.0f, &s, &si);
  ok(s == 448.0f / 3.0f && si == 1.0f / (448.0f / 3.0f), "scale: amax 3 -> 448/3 (fp32), scale_inv 1/scale");
  bc_ref_scale(ctx, e4, 0.0f, &s, &si);
  ok(s == 1.0f, "scale: amax 0 -> 1");
  bc_ref_scale(ctx, e4, INFINITY, &s, &si);
  ok(s == 1.0f, "scale: amax Inf -> 1");
  bc_ref_scale(ctx, e4, NAN, &s, &si);
  ok(s == 1.0f, "scale: amax NaN -> 1");
  bc_ref_scale(ctx, e4, 1e-45f, &s, &si);
  ok(s == FLT_MAX, "scale: tiny amax (Inf scale) -> FLT_MAX");
  bc_ref_scale(ctx, e5, 1.0f, &s, &si);
  ok(s == 57344.0f, "scale: e5m2 amax 1 -> 57344");
  bc_ctx_destroy(ctx);
  return done_testing();
}
