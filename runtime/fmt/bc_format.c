/* fmt/bc_format.c: the formats of a context: element tables, the registry, lookups by name,
 * the public format info. Formats are made from specs by jit/bc_lua.c and added here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt/bc_fmt.h"

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

/* ---- the registry ---- */

bc_status bci_format_add(bc_ctx *ctx, bc_format *f) {
  if (ctx->nformats == ctx->cap_formats) {
    size_t cap = ctx->cap_formats ? 2 * ctx->cap_formats : 8;
    bc_format **p = realloc(ctx->formats, cap * sizeof *p);
    if (!p) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory adding format '%s'", f->name);
    ctx->formats = p;
    ctx->cap_formats = cap;
  }
  ctx->formats[ctx->nformats++] = f;
  return BC_OK;
}

void bci_formats_free(bc_ctx *ctx) {
  for (size_t i = 0; i < ctx->nformats; i++) {
    free(ctx->formats[i]->description);
    free(ctx->formats[i]->spec_file);
    free(ctx->formats[i]);
  }
  free(ctx->formats);
  ctx->formats = NULL;
  ctx->nformats = ctx->cap_formats = 0;
}

bc_status bci_check_format(bc_ctx *ctx, const bc_format *fmt, const char *argname) {
  if (!fmt) return bci_fail(ctx, BC_ERR_ARG, "argument '%s' is NULL: get a format with bc_format_get() or bc_format_load()", argname);
  for (size_t i = 0; i < ctx->nformats; i++)
    if (ctx->formats[i] == fmt) return BC_OK;
  return bci_fail(ctx, BC_ERR_ARG, "argument '%s' is not a format of this context: formats belong to the context they came from", argname);
}

bc_status bc_format_get(bc_ctx *ctx, const char *name, const bc_format **out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_format_get: argument 'out' is NULL");
  *out = NULL;
  if (!name) return bci_fail(ctx, BC_ERR_ARG, "bc_format_get: argument 'name' is NULL; expected a format name such as \"fp8_e4m3_tensor\"");
  pthread_mutex_lock(&ctx->lock);
  for (size_t i = 0; i < ctx->nformats; i++) {
    if (strcmp(ctx->formats[i]->name, name) == 0) {
      *out = ctx->formats[i];
      pthread_mutex_unlock(&ctx->lock);
      return BC_OK;
    }
  }
  char known[1024] = "";
  for (size_t i = 0; i < ctx->nformats; i++) {
    size_t n = strlen(known);
    snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", ctx->formats[i]->name);
  }
  pthread_mutex_unlock(&ctx->lock);
  return bci_fail(ctx, BC_ERR_ARG, "bc_format_get: no format named '%s'; known formats: %s (or load a spec with bc_format_load)", name, known);
}

size_t bc_format_count(const bc_ctx *ctx) { return ctx ? ctx->nformats : 0; }

const bc_format *bc_format_at(const bc_ctx *ctx, size_t i) {
  if (!ctx || i >= ctx->nformats) return NULL;
  return ctx->formats[i];
}

bc_status bc_format_get_info(bc_ctx *ctx, const bc_format *fmt, bc_format_info *info) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!info) return bci_fail(ctx, BC_ERR_ARG, "bc_format_get_info: argument 'info' is NULL");
  memset(info, 0, sizeof *info);
  info->name = fmt->name;
  info->description = fmt->description;
  info->spec_file = fmt->spec_file;
  info->element = fmt->elem.name;
  info->element_bits = fmt->elem.bits;
  info->block = fmt->block;
  info->element_max = (float)fmt->elem.max_finite;
  info->has_rowwise = fmt->has_rowwise;
  info->has_columnwise = fmt->has_columnwise;
  info->columnwise_transposed = fmt->columnwise_transposed;
  info->block_rows = fmt->block_rows;
  info->block_cols = fmt->block_cols;
  info->scale_type = fmt->scale_type;
  static const char *const rules[] = { "amax", "rceil", "floor", "two_level" };
  info->scale_rule = rules[fmt->rule];
  info->scale_bytes = fmt->scale_bytes;
  info->two_level = fmt->rule == BCI_RULE_TWO_LEVEL;
  info->stochastic_rounding = fmt->sr_allowed;
  info->element_pack = fmt->pack_group_elems;
  info->element_pack_bytes = fmt->pack_group_bytes;
  info->nan_policy = fmt->nan_scale ? "scale_nan" : "satfinite";
  return BC_OK;
}
