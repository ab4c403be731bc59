/* ref/bc_ref_block.c: the CPU reference of the block-scaled formats (FP8 1x128 / 128x128 blocks,
 * MXFP8, MXFP4, NVFP4 1D / 2D), written from the rules in DESIGN.md ("Numerics", "Quantized
 * tensor layouts") and not from the templates, so that the GPU kernels can be checked against it
 * bit for bit. Host memory everywhere.
 *
 * Every fp32 step is one IEEE operation rounded to nearest even (-ffp-contract=off, no fast-math);
 * double only where a rule says so (NVFP4's S_dec, stochastic rounding's fraction). The geometry
 * (views, block shapes, stored data and scale matrices, padding, swizzle) comes from bci_geom_get.
 *
 * A direction's view is the matrix whose rows hold its blocks: rowwise the input [rows, cols],
 * columnwise its transpose [cols, rows]. View element (vr, vc) is x(vr, vc) rowwise, x(vc, vr)
 * columnwise; it is stored at data (vr, vc) when the data is the view, else at (vc, vr). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ref/bc_ref.h"

#define MAX_ELEMS ((int64_t)1 << 50)

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- Philox4x32-10 ---- */

void bci_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int i = 0; i < 10; i++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* The 32 random bits of element index e: word e % 4 of the Philox block of counter
 * (e / 4, offset) under key seed. */
static uint32_t sr_bits(uint64_t seed, uint64_t offset, uint64_t e) {
  uint64_t blk = e / 4;
  uint32_t ctr[4] = { (uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)offset, (uint32_t)(offset >> 32) };
  uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
  uint32_t out[4];
  bci_philox4x32_10(ctr, key, out);
  return out[e % 4];
}

/* Stochastic rounding of v to the element: between the two neighbouring code values lo <= |v| < hi,
 * up with probability (|v| - lo) / (hi - lo) in steps of 2^-24; saturating; NaN -> the NaN code. */
static unsigned sr_encode(const bci_element *e, float v, uint32_t rnd) {
  if (isnan(v)) return (unsigned)e->nan_encode;
  unsigned sign = (e->is_signed && signbit(v)) ? 1u << (e->bits - 1) : 0u;
  double a = fabs((double)v);
  if (!e->is_signed && signbit(v)) a = 0;
  if (a >= e->max_finite) return (unsigned)e->max_code | sign;
  unsigned lo = 0, hi = (unsigned)e->max_code; /* value[lo] <= a < value[hi] */
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    if (e->value[mid] <= a) lo = mid; else hi = mid;
  }
  double p = (a - e->value[lo]) / (e->value[hi] - e->value[lo]); /* exact: the gaps are powers of 2 */
  uint32_t p24 = (uint32_t)floor(p * 16777216.0);
  return ((rnd >> 8) < p24 ? hi : lo) | sign;
}

/* ---- scale rules ---- */

/* the largest finite value of an input dtype (an Inf block scale becomes it when the spec says so) */
static float dtype_max(bc_dtype t) {
  switch (t) {
  case BC_BF16: return bci_f32_from_bits(0x7F7F0000u);
  case BC_FP16: return 65504.0f;
  default: return FLT_MAX;
  }
}

/* e8m0 RCEIL: the smallest code e in [0, 254] with 2^(e-127) >= v; 0 -> 0, NaN -> 255, Inf -> 254 */
static unsigned e8m0_rceil(float v) {
  if (isnan(v)) return 255;
  if (isinf(v)) return 254;
  if (!(v > 0.0f)) return 0;
  int k;
  double m = frexp((double)v, &k); /* v = m 2^k, m in [0.5, 1): 2^(k-1) <= v < 2^k */
  int lg = m == 0.5 ? k - 1 : k;   /* the smallest n with 2^n >= v */
  int e = lg + 127;
  return e < 0 ? 0u : e > 254 ? 254u : (unsigned)e;
}

/* e8m0 FLOOR (OCP): floor(log2 amax) - floor(log2 fmax) + 127 clamped to [0, 254]; 0 or an fp32
 * denormal -> 0, NaN -> 255, Inf -> 254 */
static unsigned e8m0_floor(float amax, float fmax) {
  if (isnan(amax)) return 255;
  if (isinf(amax)) return 254;
  if (amax == 0.0f || fpclassify(amax) == FP_SUBNORMAL) return 0;
  int ka, kf;
  frexp((double)fabsf(amax), &ka);
  frexp((double)fmax, &kf);
  int e = (ka - 1) - (kf - 1) + 127;
  return e < 0 ? 0u : e > 254 ? 254u : (unsigned)e;
}

/* 2^n as fp32 for an e8m0 code: encode factor 2^(127-e), dequant factor 2^(e-127); 255 -> NaN.
 * Both are exact (2^-127 is the fp32 denormal 0x00400000). */
static float e8m0_pow2(unsigned e, int dequant) {
  if (e >= 255) return NAN;
  return ldexpf(1.0f, dequant ? (int)e - 127 : 127 - (int)e);
}

/* NVFP4's per-tensor level, from the global amax G */
typedef struct two_level {
  float s_enc, s_dec, m;
} two_level;

static two_level two_level_from(const bc_format *f, float g) {
  two_level t;
  float emax = (float)f->elem.max_finite;
  float top = (float)(f->selem.max_finite * f->elem.max_finite); /* 448 * 6 = 2688 */
  t.s_enc = fminf(top / g, FLT_MAX);                              /* fminf: a NaN quotient gives FLT_MAX */
  if (g == 0.0f || t.s_enc == 0.0f) t.s_enc = 1.0f;
  t.s_dec = (float)(1.0 / (double)t.s_enc);
  const float inv_emax = 1.0f / emax;
  t.m = t.s_enc * inv_emax;
  return t;
}

/* A block's encode factor and its stored scale entry (fp32 bits of scale_inv, or a code). */
static void block_scale(const bc_format *f, float amax, bc_dtype dt, const two_level *tl, float *enc, uint32_t *stored) {
  const float fmax = (float)f->elem.max_finite;
  switch (f->rule) {
  case BCI_RULE_RCEIL:
  case BCI_RULE_FLOOR: {
    unsigned e;
    if (f->rule == BCI_RULE_RCEIL) {
      const float inv = 1.0f / fmax;
      e = e8m0_rceil(amax * inv);
    } else {
      e = e8m0_floor(amax, fmax);
    }
    *enc = e8m0_pow2(e, 0);
    *stored = e;
    return;
  }
  case BCI_RULE_TWO_LEVEL: {
    unsigned s = bci_ref_encode(&f->selem, amax * tl->m);
    float fs = bci_ref_decode(&f->selem, s);
    *enc = fminf(1.0f / (fs * tl->s_dec), FLT_MAX);
    if (f->nan_scale && isnan(fs)) *enc = NAN; /* a marked block: elements from x * NaN, as the other rules */
    *stored = s;
    return;
  }
  default: { /* BCI_RULE_AMAX: scale_from_amax */
    float a = amax, eps = (float)f->eps, s;
    if (f->nan_scale && isnan(amax)) { /* the block is marked: scale_inv NaN */
      *enc = NAN;
      *stored = 0x7FFFFFFFu;
      return;
    }
    if (a < eps) a = eps;
    if (a == 0.0f || isnan(a) || isinf(a)) {
      s = 1.0f;
    } else {
      s = fmax / a;
      if (isinf(s)) s = f->inf_dtype_max ? dtype_max(dt) : FLT_MAX;
      if (f->pow2) s = bci_f32_from_bits(bci_bits_from_f32(s) & 0xFF800000u);
    }
    *enc = s;
    *stored = bci_bits_from_f32(1.0f / s);
    return;
  }
  }
}

/* ---- stored data and scales ---- */

/* The bit of element i of a data stream (rows hold whole packing groups, so a tensor's data is one
 * stream): groups of pack_group_elems elements in pack_group_bytes bytes, element k of a group at
 * bit k * bits of the group read as a little-endian integer (the reverse order when high_first). */
static int64_t code_bit(const bc_format *f, int64_t i) {
  const int n = f->pack_group_elems, bits = f->elem.bits;
  const int64_t k = i % n;
  return (i / n) * 8 * f->pack_group_bytes + bits * (f->pack_high_first ? n - 1 - k : k);
}

static void put_code(uint8_t *data, const bc_format *f, int64_t i, unsigned code) {
  const int64_t bit = code_bit(f, i);
  const int bits = f->elem.bits, sh = (int)(bit & 7);
  const unsigned v = (code & ((1u << bits) - 1u)) << sh; /* at most 8 + 7 bits: two bytes */
  data[bit >> 3] |= (uint8_t)v;
  if (sh + bits > 8) data[(bit >> 3) + 1] |= (uint8_t)(v >> 8);
}

static unsigned get_code(const uint8_t *data, const bc_format *f, int64_t i) {
  const int64_t bit = code_bit(f, i);
  const int bits = f->elem.bits, sh = (int)(bit & 7);
  unsigned v = data[bit >> 3];
  if (sh + bits > 8) v |= (unsigned)data[(bit >> 3) + 1] << 8;
  return (v >> sh) & ((1u << bits) - 1u);
}

static void put_scale(uint8_t *sc, int bytes, int64_t off, uint32_t v) {
  if (bytes == 4) memcpy(sc + off * 4, &v, 4);
  else sc[off] = (uint8_t)v;
}

static uint32_t get_scale(const uint8_t *sc, int bytes, int64_t off) {
  uint32_t v;
  if (bytes == 4) { memcpy(&v, sc + off * 4, 4); return v; }
  return sc[off];
}

/* ---- quantize ---- */

static void quantize_dir(const bc_format *f, const bc_tensor *x, int64_t ld, const bc_qtensor *q, int col,
                         const bci_geom *g, const two_level *tl) {
  uint8_t *data = col ? q->columnwise_data : q->rowwise_data;
  uint8_t *sc = col ? q->columnwise_scale_inv : q->rowwise_scale_inv;
  const bci_element *el = &f->elem;
  const uint64_t rows = (uint64_t)x->rows, cols = (uint64_t)x->cols;
  memset(sc, 0, g->scale_bytes); /* padding: every entry no block writes stays zero */
  memset(data, 0, g->data_bytes);
  for (int64_t br = 0; br < g->vrows; br += g->vbr) {
    int64_t er = min64(br + g->vbr, g->vrows);
    for (int64_t bc = 0; bc < g->vcols; bc += g->vbc) {
      int64_t ec = min64(bc + g->vbc, g->vcols);
      float amax = 0.0f;
      for (int64_t vr = br; vr < er; vr++)
        for (int64_t vc = bc; vc < ec; vc++) {
          float a = fabsf(col ? bci_ref_load(x, ld, vc, vr) : bci_ref_load(x, ld, vr, vc));
          if (a > amax) amax = a; /* NaN compares false: ignored */
          else if (f->nan_scale && isnan(a)) amax = NAN; /* nan_policy "scale_nan": kept (a > NaN is false) */
        }
      float enc;
      uint32_t stored;
      block_scale(f, amax, x->dtype, tl, &enc, &stored);
      int64_t scol = bc / g->vbc;
      if (g->sl.per_row) {
        for (int64_t vr = br; vr < er; vr++) put_scale(sc, f->scale_bytes, bci_sl_offset(&g->sl, vr, scol), stored);
      } else {
        put_scale(sc, f->scale_bytes, bci_sl_offset(&g->sl, br / g->vbr, scol), stored);
      }
      for (int64_t vr = br; vr < er; vr++)
        for (int64_t vc = bc; vc < ec; vc++) {
          int64_t r = col ? vc : vr, c = col ? vr : vc;
          float v = bci_ref_load(x, ld, r, c) * enc;
          unsigned code;
          if (q->stochastic_rounding) {
            uint64_t e = col ? rows * cols + (uint64_t)c * rows + (uint64_t)r : (uint64_t)r * cols + (uint64_t)c;
            code = sr_encode(el, v, sr_bits(q->sr_seed, q->sr_offset, e));
          } else {
            code = bci_ref_encode(el, v);
          }
          int64_t dr = g->data_is_view ? vr : vc, dc = g->data_is_view ? vc : vr;
          put_code(data, f, dr * g->dcols + dc, code);
        }
    }
  }
}

static const char *dir_name(int col) { return col ? "columnwise" : "rowwise"; }

bc_status bci_ref_block_cast(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t ld, bc_qtensor *q, int current) {
  const bc_format *f = q->format;
  void *data[2] = { q->rowwise_data, q->columnwise_data };
  void *scale[2] = { q->rowwise_scale_inv, q->columnwise_scale_inv };
  if (!data[0] && !data[1])
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has neither rowwise_data nor columnwise_data; set the direction(s) to write", fn);
  bci_geom g[2];
  for (int d = 0; d < 2; d++) {
    if (!data[d]) continue;
    bc_status s = bci_geom_get(ctx, fn, f, x->rows, x->cols, d ? BC_COLUMNWISE : BC_ROWWISE, q->scale_swizzled, &g[d]);
    if (s != BC_OK) return s;
    if (!scale[d])
      return bci_fail(ctx, BC_ERR_ARG,
                      "%s: q->%s_scale_inv is NULL; format '%s' needs a host buffer of %zu bytes for its %s block scales "
                      "(bc_qtensor_layout gives the shape)",
                      fn, dir_name(d), f->name, g[d].scale_bytes, dir_name(d));
  }
  if (q->stochastic_rounding && !f->sr_allowed)
    return bci_fail(ctx, BC_ERR_ARG,
                    "%s: q->stochastic_rounding is %d but format '%s' does not allow stochastic rounding (its spec does "
                    "not set stochastic_rounding = true); expected 0",
                    fn, q->stochastic_rounding, f->name);
  two_level tl = { 1.0f, 1.0f, 1.0f };
  if (f->rule == BCI_RULE_TWO_LEVEL) {
    if (!q->amax)
      return bci_fail(ctx, BC_ERR_ARG,
                      "%s: q->amax is NULL; format '%s' is two-level and needs a host fp32[1] for the global amax (%s)", fn,
                      f->name, current ? "written by bc_ref_quantize" : "read by bc_ref_quantize_cast");
    if (current) *q->amax = bci_ref_amax(x, ld);
    tl = two_level_from(f, *q->amax);
  }
  for (int d = 0; d < 2; d++)
    if (data[d]) quantize_dir(f, x, ld, q, d, &g[d], &tl);
  return BC_OK;
}

/* ---- dequantize ---- */

bc_status bci_ref_block_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out) {
  const char *fn = "bc_ref_dequantize";
  const bc_format *f = q->format;
  if (dir != BC_ROWWISE && dir != BC_COLUMNWISE)
    return bci_fail(ctx, BC_ERR_ARG, "%s: dir is %d; expected BC_ROWWISE or BC_COLUMNWISE", fn, (int)dir);
  if (q->rows < 1 || q->cols < 1 || q->rows > MAX_ELEMS / q->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has shape [%lld, %lld]; expected rows, cols >= 1 and at most 2^50 elements", fn,
                    (long long)q->rows, (long long)q->cols);
  const int col = dir == BC_COLUMNWISE;
  bci_geom g;
  bc_status s = bci_geom_get(ctx, fn, f, q->rows, q->cols, dir, q->scale_swizzled, &g);
  if (s != BC_OK) return s;
  const uint8_t *data = col ? q->columnwise_data : q->rowwise_data;
  const uint8_t *sc = col ? q->columnwise_scale_inv : q->rowwise_scale_inv;
  if (!data) return bci_fail(ctx, BC_ERR_ARG, "%s: q->%s_data is NULL; expected the host buffer to dequantize", fn, dir_name(col));
  if (!sc)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->%s_scale_inv is NULL; expected the host buffer of its %s block scales", fn,
                    dir_name(col), dir_name(col));
  if (f->rule == BCI_RULE_TWO_LEVEL && !q->amax)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->amax is NULL; format '%s' is two-level and needs the global amax (host fp32[1])",
                    fn, f->name);
  int64_t ld;
  s = bci_check_tensor(ctx, fn, "out", out, &ld);
  if (s != BC_OK) return s;
  if (out->rows != g.drows || out->cols != g.dcols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: out has shape [%lld, %lld]; the %s data of q is [%lld, %lld]: expected that shape", fn,
                    (long long)out->rows, (long long)out->cols, dir_name(col), (long long)g.drows, (long long)g.dcols);
  two_level tl = { 1.0f, 1.0f, 1.0f };
  if (f->rule == BCI_RULE_TWO_LEVEL) tl = two_level_from(f, *q->amax);
  const bci_element *el = &f->elem;
  for (int64_t dr = 0; dr < g.drows; dr++)
    for (int64_t dc = 0; dc < g.dcols; dc++) {
      int64_t vr = g.data_is_view ? dr : dc, vc = g.data_is_view ? dc : dr;
      int64_t srow = g.sl.per_row ? vr : vr / g.vbr, scol = vc / g.vbc;
      uint32_t e = get_scale(sc, f->scale_bytes, bci_sl_offset(&g.sl, srow, scol));
      float v = bci_ref_decode(el, get_code(data, f, dr * g.dcols + dc));
      switch (f->rule) {
      case BCI_RULE_RCEIL:
      case BCI_RULE_FLOOR: v = v * e8m0_pow2(e, 1); break;
      case BCI_RULE_TWO_LEVEL: v = (v * bci_ref_decode(&f->selem, e)) * tl.s_dec; break;
      default: v = v * bci_f32_from_bits(e); break;
      }
      bci_ref_store(out, ld, dr, dc, v);
    }
  return BC_OK;
}
