/* fmt/bc_layout.c: the shapes of quantized tensors: data and scale matrices of each direction,
 * padding, the compact and 128x4-swizzled scale layouts, and the shape checks (a 4-bit row
 * needs an even length). Sizes, launches, the swizzle conversion and the CPU reference all take
 * their geometry from here. */
#include <string.h>

#include "fmt/bc_fmt.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t m) { return ceil_div(a, m) * m; }

int64_t bci_sl_offset(const bci_sl *sl, int64_t r, int64_t c) {
  switch (sl->order) {
  case 0: return r * sl->ld + c;
  case 1: return c * sl->ld + r;
  default:
    /* 128x4 GEMM swizzle of a [prows, pcols] matrix (prows % 128 == 0, ld = pcols, a multiple of
     * 4), or a window of one (bc_fmt.h: its ld, and its first entry's place in its atom) */
    r += (sl->order >> 8) & 127, c += (sl->order >> 16) & 3;
    return (r / 128) * (sl->ld / 4) * 512 + (c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
  }
}

bc_status bci_geom_get(bc_ctx *ctx, const char *fn, const bc_format *f, int64_t rows, int64_t cols, bc_direction dir,
                       int swizzled, bci_geom *g) {
  memset(g, 0, sizeof *g);
  const int col = dir == BC_COLUMNWISE;
  const char *dn = col ? "columnwise" : "rowwise";
  if (!(col ? f->has_columnwise : f->has_rowwise)) {
    return bci_fail(ctx, BC_ERR_ARG, "%s: format '%s' has no %s direction", fn, f->name, dn);
  }
  g->vrows = col ? cols : rows;
  g->vcols = col ? rows : cols;
  const int transposed = col ? f->columnwise_transposed : 1; /* rowwise data is its view */
  g->data_is_view = transposed;
  g->drows = transposed ? g->vrows : g->vcols;
  g->dcols = transposed ? g->vcols : g->vrows;
  int bits = f->elem.bits, mult = f->pack_group_elems > 0 ? f->pack_group_elems : 1;
  if (g->dcols % mult) {
    /* data rows run along the input's columns, except for transposed columnwise data */
    const char *dim = (col && transposed) ? "rows" : "cols";
    return bci_fail(ctx, BC_ERR_ARG,
                    "%s: format '%s' packs %d %d-bit elements in %d byte(s), so its %s data rows must hold whole groups: %s is "
                    "%lld; expected a multiple of %d",
                    fn, f->name, mult, bits, f->pack_group_bytes, dn, dim, (long long)g->dcols, mult);
  }
  g->data_bytes = (size_t)g->drows * (size_t)(g->dcols * bits / 8);
  if (f->block == BC_BLOCK_TENSOR) {
    if (swizzled)
      return bci_fail(ctx, BC_ERR_ARG, "%s: format '%s' has one per-tensor scale; scale_swizzled applies to block formats only", fn,
                      f->name);
    g->vbr = 1;
    g->srows = g->scols = g->svalid_rows = g->svalid_cols = 1;
    g->sl = (bci_sl){ 1, 1, 1, 1, 1, 0, 0 };
    g->scale_bytes = sizeof(float);
    return BC_OK;
  }
  const bci_dir_spec *d = &f->dir[col];
  g->vbr = f->block_rows;
  g->vbc = f->block_cols;
  if (col && f->block_rows == 1) g->vbr = 1; /* 1D: N x 1 in the input is 1 x N in the view */
  bci_sl *sl = &g->sl;
  sl->per_row = d->scale_per_row;
  sl->lrows = d->scale_per_row ? g->vrows : ceil_div(g->vrows, g->vbr);
  sl->lcols = ceil_div(g->vcols, g->vbc);
  if (swizzled) {
    sl->order = 2;
    sl->prows = round_up(sl->lrows, 128);
    sl->pcols = round_up(sl->lcols, 4);
    sl->ld = sl->pcols;
    g->srows = sl->prows;
    g->scols = sl->pcols;
    g->svalid_rows = sl->lrows;
    g->svalid_cols = sl->lcols;
  } else if (d->scale_order == 0) {
    sl->order = 0;
    sl->prows = round_up(sl->lrows, d->pad_rows);
    sl->pcols = round_up(sl->lcols, d->pad_cols);
    sl->ld = sl->pcols;
    g->srows = sl->prows;
    g->scols = sl->pcols;
    g->svalid_rows = sl->lrows;
    g->svalid_cols = sl->lcols;
  } else {
    /* stored [lcols, lrows], padded to the spec's multiples of the stored dims */
    sl->order = 1;
    sl->pcols = round_up(sl->lcols, d->pad_rows);
    sl->prows = round_up(sl->lrows, d->pad_cols);
    sl->ld = sl->prows;
    g->srows = sl->pcols;
    g->scols = sl->prows;
    g->svalid_rows = sl->lcols;
    g->svalid_cols = sl->lrows;
  }
  g->scale_bytes = (size_t)g->srows * (size_t)g->scols * (size_t)f->scale_bytes;
  return BC_OK;
}

/* ---- the public layout calls ---- */

/* fmt, a [rows, cols] shape and a direction, as the layout calls take them */
bc_status bci_check_shape_dir(bc_ctx *ctx, const char *fn, const bc_format *fmt, int64_t rows, int64_t cols,
                                 bc_direction dir) {
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (rows < 1 || cols < 1 || rows > BCI_MAX_ELEMS / cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: shape [%lld, %lld]; expected rows, cols >= 1 and at most 2^50 elements", fn,
                    (long long)rows, (long long)cols);
  if (dir != BC_ROWWISE && dir != BC_COLUMNWISE)
    return bci_fail(ctx, BC_ERR_ARG, "%s: dir is %d; expected BC_ROWWISE or BC_COLUMNWISE", fn, (int)dir);
  return BC_OK;
}

bc_status bc_qtensor_sizes(bc_ctx *ctx, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir,
                           size_t *data_bytes, size_t *scale_inv_bytes) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_shape_dir(ctx, "bc_qtensor_sizes", fmt, rows, cols, dir);
  if (s != BC_OK) return s;
  int has = dir == BC_ROWWISE ? fmt->has_rowwise : fmt->has_columnwise;
  if (data_bytes) *data_bytes = 0;
  if (scale_inv_bytes) *scale_inv_bytes = 0;
  if (!has) return BC_OK;
  bci_geom g;
  s = bci_geom_get(ctx, "bc_qtensor_sizes", fmt, rows, cols, dir, 0, &g);
  if (s != BC_OK) return s;
  if (data_bytes) *data_bytes = g.data_bytes;
  if (scale_inv_bytes) *scale_inv_bytes = g.scale_bytes;
  return BC_OK;
}

bc_status bc_qtensor_layout(bc_ctx *ctx, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir,
                            int scale_swizzled, bc_qlayout *out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_qtensor_layout: argument 'out' is NULL");
  memset(out, 0, sizeof *out);
  bc_status s = bci_check_shape_dir(ctx, "bc_qtensor_layout", fmt, rows, cols, dir);
  if (s != BC_OK) return s;
  bci_geom g;
  s = bci_geom_get(ctx, "bc_qtensor_layout", fmt, rows, cols, dir, scale_swizzled != 0, &g);
  if (s != BC_OK) return s;
  out->data_rows = g.drows;
  out->data_cols = g.dcols;
  out->data_bytes = g.data_bytes;
  out->scale_rows = g.srows;
  out->scale_cols = g.scols;
  out->scale_valid_rows = g.svalid_rows;
  out->scale_valid_cols = g.svalid_cols;
  out->scale_elem_bytes = fmt->block == BC_BLOCK_TENSOR ? sizeof(float) : (size_t)fmt->scale_bytes;
  out->scale_bytes = g.scale_bytes;
  return BC_OK;
}

/* ---- grouped tensors: one [sum(group_rows), cols] input split along its rows ---- */

/* The bytes group g adds to the grouped buffers of directions `dirs` (a mask of bc_direction):
 * the layout of its own [rows, cols] tensor; per-tensor formats one fp32 scale_inv entry per
 * group, empty groups included. */
static bc_status group_sizes(bc_ctx *ctx, const char *fn, const bc_format *fmt, int64_t rows, int64_t cols, int dirs, int swz,
                             bc_group_offsets *sz) {
  memset(sz, 0, sizeof *sz);
  for (int d = 0; d < 2; d++) {
    bc_direction dir = d ? BC_COLUMNWISE : BC_ROWWISE;
    if (!(dirs & dir)) continue;
    size_t data = 0, scale = fmt->block == BC_BLOCK_TENSOR ? sizeof(float) : 0;
    if (rows > 0) {
      bci_geom g;
      bc_status s = bci_geom_get(ctx, fn, fmt, rows, cols, dir, swz != 0, &g);
      if (s != BC_OK) return s;
      data = g.data_bytes;
      scale = g.scale_bytes;
    }
    if (d) {
      sz->columnwise_data = data;
      sz->columnwise_scale_inv = scale;
    } else {
      sz->rowwise_data = data;
      sz->rowwise_scale_inv = scale;
    }
  }
  return BC_OK;
}

static void offsets_add(bc_group_offsets *a, const bc_group_offsets *b) {
  a->rowwise_data += b->rowwise_data;
  a->rowwise_scale_inv += b->rowwise_scale_inv;
  a->columnwise_data += b->columnwise_data;
  a->columnwise_scale_inv += b->columnwise_scale_inv;
}

static bc_status check_groups(bc_ctx *ctx, const char *fn, int64_t groups, const int64_t *group_rows, int64_t rows,
                              int64_t cols) {
  if (groups < 1 || groups > 0x7FFFFFFF)
    return bci_fail(ctx, BC_ERR_ARG, "%s: groups is %lld; expected 1 to 2^31 - 1", fn, (long long)groups);
  if (!group_rows) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'group_rows' is NULL; expected %lld row counts (host memory)", fn, (long long)groups);
  if (cols < 1) return bci_fail(ctx, BC_ERR_ARG, "%s: cols is %lld; expected >= 1", fn, (long long)cols);
  int64_t sum = 0;
  for (int64_t g = 0; g < groups; g++) {
    if (group_rows[g] < 0 || group_rows[g] > BCI_MAX_ELEMS / cols)
      return bci_fail(ctx, BC_ERR_ARG, "%s: group_rows[%lld] is %lld; expected 0 <= rows and at most 2^50 elements", fn,
                      (long long)g, (long long)group_rows[g]);
    sum += group_rows[g];
    if (sum > BCI_MAX_ELEMS / cols) return bci_fail(ctx, BC_ERR_ARG, "%s: the groups hold more than 2^50 elements", fn);
  }
  if (rows >= 0 && sum != rows)
    return bci_fail(ctx, BC_ERR_ARG, "%s: group_rows add up to %lld rows but the tensor has %lld; they must be equal", fn,
                    (long long)sum, (long long)rows);
  return BC_OK;
}

bc_status bc_grouped_layout(bc_ctx *ctx, const bc_format *fmt, int64_t groups, const int64_t *group_rows, int64_t cols,
                            int directions, int scale_swizzled, bc_group_offsets *offsets) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_grouped_layout";
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s == BC_OK) s = check_groups(ctx, fn, groups, group_rows, -1, cols);
  if (s != BC_OK) return s;
  if (directions < 1 || directions > 3)
    return bci_fail(ctx, BC_ERR_ARG, "%s: directions is %d; expected BC_ROWWISE, BC_COLUMNWISE or BC_ROWWISE | BC_COLUMNWISE", fn,
                    directions);
  if (((directions & BC_ROWWISE) && !fmt->has_rowwise) || ((directions & BC_COLUMNWISE) && !fmt->has_columnwise))
    return bci_fail(ctx, BC_ERR_ARG, "%s: format '%s' has no %s direction", fn, fmt->name,
                    (directions & BC_ROWWISE) && !fmt->has_rowwise ? "rowwise" : "columnwise");
  if (!offsets) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'offsets' is NULL; expected bc_group_offsets[groups + 1]", fn);
  bc_group_offsets at = { 0, 0, 0, 0 };
  for (int64_t g = 0; g < groups; g++) {
    bc_group_offsets sz;
    s = group_sizes(ctx, fn, fmt, group_rows[g], cols, directions, scale_swizzled, &sz);
    if (s != BC_OK) return bci_fail_entry(ctx, s, fn, "group", g);
    offsets[g] = at;
    offsets_add(&at, &sz);
  }
  offsets[groups] = at;
  return BC_OK;
}

bc_status bci_check_grouped(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t groups, const int64_t *group_rows,
                            const bc_qtensor *q, int64_t *ld) {
  if (!x) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'x' is NULL; expected a bc_tensor", fn);
  if (!q) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'q' is NULL; expected a bc_qtensor", fn);
  bc_status s = bci_check_tensor(ctx, fn, "x", x, ld);
  if (s == BC_OK) s = bci_check_format(ctx, q->format, "q->format");
  if (s == BC_OK) s = check_groups(ctx, fn, groups, group_rows, x->rows, x->cols);
  if (s != BC_OK) return s;
  if (q->rows != x->rows || q->cols != x->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has shape [%lld, %lld] but x has [%lld, %lld]; they must match", fn,
                    (long long)q->rows, (long long)q->cols, (long long)x->rows, (long long)x->cols);
  return BC_OK;
}

void bci_group_first(bci_group_cursor *c) { memset(c, 0, sizeof *c); }

bc_status bci_group_next(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t ld, const int64_t *group_rows,
                         const bc_qtensor *q, bci_group_cursor *c, bc_tensor *xg, bc_qtensor *qg) {
  int64_t g = c->g, rows = group_rows[g];
  bc_group_offsets sz;
  int dirs = (q->rowwise_data ? BC_ROWWISE : 0) | (q->columnwise_data ? BC_COLUMNWISE : 0);
  bc_status s = group_sizes(ctx, fn, q->format, rows, x->cols, dirs, q->scale_swizzled, &sz);
  if (s != BC_OK) return s;
  const bc_group_offsets *o = &c->at;
  *xg = *x;
  xg->data = (char *)x->data + (size_t)(c->r0 * ld) * bc_dtype_size(x->dtype);
  xg->rows = rows;
  xg->row_stride = ld;
  *qg = *q;
  qg->rows = rows;
#define BCI_AT(p, off) ((p) ? (void *)((char *)(p) + (off)) : NULL)
  qg->rowwise_data = BCI_AT(q->rowwise_data, o->rowwise_data);
  qg->rowwise_scale_inv = BCI_AT(q->rowwise_scale_inv, o->rowwise_scale_inv);
  qg->columnwise_data = BCI_AT(q->columnwise_data, o->columnwise_data);
  qg->columnwise_scale_inv = BCI_AT(q->columnwise_scale_inv, o->columnwise_scale_inv);
#undef BCI_AT
  qg->amax = q->amax ? q->amax + g : NULL;
  qg->scale = q->scale ? q->scale + g : NULL;
  qg->sr_offset = q->sr_offset + (uint64_t)g;
  offsets_add(&c->at, &sz);
  c->r0 += rows;
  c->g++;
  return BC_OK;
}
