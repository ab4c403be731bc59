/* ref/bc_ref_tensor.c: the CPU reference, written from the rules in DESIGN.md and not from the templates:
 * the public reference calls and the per-tensor formats; scales follow scale_from_amax step by
 * step in fp32. Compiled with -ffp-contract=off so that every fp32 operation rounds once, as on
 * the GPU. Element encode/decode and dtype loads/stores are in bc_ref_elem.c; block formats
 * (1x128 / 128x128, MX, NVFP4) in bc_ref_block.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/bc_ref.h"

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
    if (f->pow2) s = bci_f32_from_bits(bci_bits_from_f32(s) & 0xFF800000u);
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
  *code = (uint8_t)bci_ref_encode(&fmt->elem, x);
  return BC_OK;
}

bc_status bc_ref_decode(bc_ctx *ctx, const bc_format *fmt, uint8_t code, float *x) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!x) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_decode: argument 'x' is NULL");
  if (code >> fmt->elem.bits) return bci_fail(ctx, BC_ERR_ARG, "bc_ref_decode: code 0x%02X has more than %d bits", code, fmt->elem.bits);
  *x = bci_ref_decode(&fmt->elem, code);
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
      float v = bci_ref_load(x, ld, r, c) * scale;
      uint8_t code = (uint8_t)bci_ref_encode(e, v);
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
    for (int64_t c = 0; c < cols; c++) bci_ref_store(out, ld, r, c, bci_ref_decode(&q->format->elem, d[r * cols + c]) * si);
  return BC_OK;
}

/* ---- delayed scaling (the rule of templates/delayed_scale.cu, written out again) ---- */

bc_status bc_ref_delayed_scale_update(bc_ctx *ctx, const bc_format *fmt, int64_t n, int history_len, float *history,
                                      float *scale, float *scale_inv, int margin, bc_amax_algo algo) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_delayed(ctx, "bc_ref_delayed_scale_update", fmt, n, history_len, history, scale, margin, algo);
  if (s != BC_OK) return s;
  const float fmax = (float)fmt->elem.max_finite, div = ldexpf(1.0f, margin);
  for (int64_t i = 0; i < n; i++) {
    float a = history[i];
    if (algo == BC_AMAX_MAX)
      for (int j = 1; j < history_len && !isnan(a); j++) {
        float h = history[(int64_t)j * n + i];
        if (isnan(h) || h > a) a = h;
      }
    if (a > 0.0f && !isinf(a)) { /* not NaN, 0, negative or Inf: a new scale */
      float q = fmax / a;
      float sc = q / div;
      if (isinf(sc)) sc = FLT_MAX;
      if (fmt->pow2) sc = bci_f32_from_bits(bci_bits_from_f32(sc) & 0xFF800000u);
      scale[i] = sc;
    }
    if (scale_inv) scale_inv[i] = 1.0f / scale[i];
    float first = history[i];
    for (int j = 0; j + 1 < history_len; j++) history[(int64_t)j * n + i] = history[(int64_t)(j + 1) * n + i];
    if (history_len > 1) history[(int64_t)(history_len - 1) * n + i] = first;
    history[i] = 0.0f;
  }
  return BC_OK;
}

bc_status bc_ref_quantize_grouped(bc_ctx *ctx, const bc_tensor *x, int64_t groups, const int64_t *group_rows, const bc_qtensor *q) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_ref_quantize_grouped";
  int64_t ld;
  bc_status s = bci_check_grouped(ctx, fn, x, groups, group_rows, q, &ld);
  if (s != BC_OK) return s;
  bci_group_cursor cur;
  bci_group_first(&cur);
  for (int64_t g = 0; g < groups && s == BC_OK; g++) {
    bc_tensor xg;
    bc_qtensor qg;
    s = bci_group_next(ctx, fn, x, ld, group_rows, q, &cur, &xg, &qg);
    if (s == BC_OK && group_rows[g] > 0) s = bc_ref_quantize(ctx, &xg, &qg);
    if (s != BC_OK) s = bci_fail_entry(ctx, s, fn, "group", g);
  }
  return s;
}
