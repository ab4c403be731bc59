/* ops/bc_ops.c: the public operations of one tensor: argument checks, kernel choice, grids,
 * launches. */
#include <stdlib.h>
#include <string.h>

#include "ops/bc_ops.h"

/* ---- argument checks ---- */

static bc_status check_qtensor(bc_ctx *ctx, const char *fn, const bc_qtensor *q, int need_dirs) {
  if (!q) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'q' is NULL; expected a bc_qtensor", fn);
  bc_status s = bci_check_format(ctx, q->format, "q->format");
  if (s != BC_OK) return s;
  if (q->rows < 1 || q->cols < 1)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has shape [%lld, %lld]; expected rows >= 1 and cols >= 1", fn,
                    (long long)q->rows, (long long)q->cols);
  if (q->rows > BCI_MAX_ELEMS / q->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has %lld x %lld elements, more than 2^50", fn, (long long)q->rows, (long long)q->cols);
  if (need_dirs && !q->rowwise_data && !q->columnwise_data)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has neither rowwise_data nor columnwise_data; set the direction(s) to write", fn);
  if (q->rowwise_data && !q->format->has_rowwise)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->rowwise_data is set but format '%s' has no rowwise direction", fn, q->format->name);
  if (q->columnwise_data && !q->format->has_columnwise)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->columnwise_data is set but format '%s' has no columnwise direction", fn,
                    q->format->name);
  return BC_OK;
}

/* ---- launches ---- */

static unsigned umin64(int64_t a, int64_t b) { return (unsigned)(a < b ? a : b); }

/* The per-tensor row cast / dequantize: the vector kernel over the `full` whole slots of each row,
 * one row per (y, z) block (gridDim.y = min(rows, 65535)). */
static bc_status launch_vec_rows(bc_ctx *ctx, bci_sink *sink, const char *fn, const bci_kernel *k, int64_t full, int64_t rows,
                                 int64_t cols, void *stream, const bci_arg *args, int nargs) {
  const bci_launch *L = &k->launch;
  int64_t per_block = (int64_t)L->threads * L->unroll;
  int64_t gx = (full + per_block - 1) / per_block;
  if (gx > 0x7FFFFFFF) return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: a row of %lld elements is too long for one launch", fn, (long long)cols);
  if (rows > 65535LL * 65535) return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: %lld rows are more than one launch holds (65535^2)", fn, (long long)rows);
  return bci_run(ctx, sink, k, (unsigned)gx, umin64(rows, 65535), (unsigned)((rows + 65534) / 65535), (unsigned)L->threads,
                 L->smem, stream, args, nargs);
}

/* ... and its element-wise companion over columns [c0, cols) of each row (grid-stride in x past
 * 2^20 blocks and in y past 65535 rows). */
static bc_status launch_elems(bc_ctx *ctx, bci_sink *sink, const bci_kernel *k, int64_t rows, int64_t cols, int64_t c0,
                              void *stream, const bci_arg *args, int nargs) {
  int64_t t = k->launch.threads;
  return bci_run(ctx, sink, k, umin64((cols - c0 + t - 1) / t, (int64_t)1 << 20), umin64(rows, 65535), 1, (unsigned)t,
                 k->launch.smem, stream, args, nargs);
}

static int sm_count(bc_ctx *ctx) {
  char arch[16];
  int sms = 0;
  if (bci_cuda_device(ctx, arch, &sms) != BC_OK || sms < 1) return 132;
  return sms;
}

/* the amax kernel over x folded into *amax; zero: set *amax to 0 first (else it accumulates) */
static bc_status amax_fold(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t ld, float *amax, int zero, void *stream) {
  const bci_kernel *k;
  bc_status s = bci_kernel_getf(ctx, &k, "bc_amax__%s", bc_dtype_name(x->dtype));
  if (s != BC_OK) return s;
  if (zero && (s = bci_zero32(ctx, sink, amax, 1, stream)) != BC_OK) return s;
  int64_t rows = x->rows, cols = x->cols;
  if (ld == cols) { cols *= rows; rows = 1; ld = cols; }
  const bci_launch *L = &k->launch;
  int vec_ok = bci_aligned(x->data, 16) && (rows == 1 || ld % L->vec == 0);
  int64_t slots = (cols + L->vec - 1) / L->vec;
  unsigned gy = umin64(rows, 65535);
  int64_t want = (slots + (int64_t)L->threads * L->unroll - 1) / ((int64_t)L->threads * L->unroll);
  /* one wave alone (8 waves a tensor measured slower in a list, 1.77x against 1.28x of one
   * kernel over the same bytes, the atomics of the extra blocks on one word per tensor); in a
   * list one block per SM a tensor: the tensors share the GPU, and each list block pays the
   * item lookup once for 4x the work (bench_list, H200: the amax list 1.18x -> 1.11x of one
   * kernel over the same bytes) */
  int64_t cap = (int64_t)sm_count(ctx) * (sink ? 1 : L->blocks_per_sm);
  cap = cap / gy > 0 ? cap / gy : 1;
  unsigned gx = umin64(want, cap);
  void *data = x->data;
  bci_arg args[] = { BCI_ARG(data), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(amax), BCI_ARG(vec_ok) };
  return bci_run(ctx, sink, k, gx, gy, 1, (unsigned)L->threads, L->smem, stream, args, 6);
}

static bc_status amax_launch(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t ld, float *amax, void *stream) {
  return amax_fold(ctx, sink, x, ld, amax, 1, stream);
}

static bc_status amax_range(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t start, int64_t len, float *amax, int zero,
                            void *stream) {
  const char *fn = "bc_amax_range";
  int64_t ld;
  bc_status s = bci_check_tensor(ctx, fn, "x", x, &ld);
  if (s != BC_OK) return s;
  if (!amax || !bci_aligned(amax, 4)) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'amax' is NULL or misaligned; expected a device fp32[1]", fn);
  const int64_t n = x->rows * x->cols;
  if (start < 0 || len < 0 || start > n || len > n - start)
    return bci_fail(ctx, BC_ERR_ARG, "%s: the range [%lld, %lld + %lld) is not inside x's %lld elements ([%lld, %lld], flattened row "
                    "by row); expected 0 <= start and start + len <= %lld", fn, (long long)start, (long long)start, (long long)len,
                    (long long)n, (long long)x->rows, (long long)x->cols, (long long)n);
  if ((zero && (s = bci_zero32(ctx, sink, amax, 1, stream)) != BC_OK) || len == 0) return s;
  /* up to three pieces, each folded into *amax: the rest of the first row, whole rows, the
   * start of the last row */
  const size_t es = bc_dtype_size(x->dtype);
  const int64_t K = x->cols, r0 = start / K, c0 = start % K, end = start + len, r1 = end / K, c1 = end % K;
  char *base = x->data;
  if (r0 == r1) {
    bc_tensor p = { base + (size_t)(r0 * ld + c0) * es, x->dtype, 1, c1 - c0, 0 };
    return amax_fold(ctx, sink, &p, p.cols, amax, 0, stream);
  }
  int64_t rw = r0;
  if (c0) {
    bc_tensor p = { base + (size_t)(r0 * ld + c0) * es, x->dtype, 1, K - c0, 0 };
    if ((s = amax_fold(ctx, sink, &p, p.cols, amax, 0, stream)) != BC_OK) return s;
    rw++;
  }
  if (r1 > rw) {
    bc_tensor p = { base + (size_t)(rw * ld) * es, x->dtype, r1 - rw, K, ld };
    if ((s = amax_fold(ctx, sink, &p, ld, amax, 0, stream)) != BC_OK) return s;
  }
  if (c1) {
    bc_tensor p = { base + (size_t)(r1 * ld) * es, x->dtype, 1, c1, 0 };
    s = amax_fold(ctx, sink, &p, p.cols, amax, 0, stream);
  }
  return s;
}

bc_status bci_amax_range(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t start, int64_t len, float *amax, void *stream) {
  return amax_range(ctx, sink, x, start, len, amax, 1, stream);
}

bc_status bci_amax_range_fold(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t start, int64_t len, float *amax,
                              void *stream) {
  return amax_range(ctx, sink, x, start, len, amax, 0, stream);
}

bc_status bc_amax_range(bc_ctx *ctx, const bc_tensor *x, int64_t start, int64_t len, float *amax, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_amax_range(ctx, NULL, x, start, len, amax, stream);
}

bc_status bci_amax(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, float *amax, void *stream) {
  int64_t ld;
  bc_status s = bci_check_tensor(ctx, "bc_amax", "x", x, &ld);
  if (s != BC_OK) return s;
  if (!amax || !bci_aligned(amax, 4)) return bci_fail(ctx, BC_ERR_ARG, "bc_amax: argument 'amax' is NULL or misaligned; expected a device fp32[1]");
  return amax_launch(ctx, sink, x, ld, amax, stream);
}

bc_status bc_amax(bc_ctx *ctx, const bc_tensor *x, float *amax, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_amax(ctx, NULL, x, amax, stream);
}

static bc_status scale_launch(bc_ctx *ctx, bci_sink *sink, const bc_format *fmt, const float *amax, float *scale,
                              float *scale_inv, void *stream) {
  const bci_kernel *k;
  bc_status s = bci_kernel_getf(ctx, &k, "bc_scale_%s", fmt->name);
  if (s != BC_OK) return s;
  bci_arg args[] = { BCI_ARG(amax), BCI_ARG(scale), BCI_ARG(scale_inv) };
  return bci_run(ctx, sink, k, 1, 1, 1, 32, 0, stream, args, 3);
}

bc_status bci_compute_scale(bc_ctx *ctx, bci_sink *sink, const bc_format *fmt, const float *amax, float *scale,
                            float *scale_inv, void *stream) {
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (fmt->block != BC_BLOCK_TENSOR)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "bc_compute_scale: format '%s' is block-scaled: its scales are computed per block inside "
                    "bc_quantize; bc_compute_scale is for per-tensor formats", fmt->name);
  if (!amax) return bci_fail(ctx, BC_ERR_ARG, "bc_compute_scale: argument 'amax' is NULL; expected a device fp32[1]");
  if (!scale) return bci_fail(ctx, BC_ERR_ARG, "bc_compute_scale: argument 'scale' is NULL; expected a device fp32[1]");
  return scale_launch(ctx, sink, fmt, amax, scale, scale_inv, stream);
}

bc_status bc_compute_scale(bc_ctx *ctx, const bc_format *fmt, const float *amax, float *scale, float *scale_inv,
                           void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_compute_scale(ctx, NULL, fmt, amax, scale, scale_inv, stream);
}

static bc_status cast_launch(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t ld, bc_qtensor *q, void *stream) {
  const bc_format *f = q->format;
  const char *dt = bc_dtype_name(x->dtype);
  const bci_kernel *k;
  bc_status s;
  int64_t rows = x->rows, cols = x->cols;
  const float *scale = q->scale;
  void *in = x->data;
  if (q->rowwise_data && !q->columnwise_data) {
    /* whole 16-byte vectors of aligned rows: the row cast; the rest (a row's partial last vector,
     * or all of a misaligned launch): its element-wise companion, compiled only when needed */
    if (ld == cols) { cols *= rows; rows = 1; ld = cols; }
    void *out = q->rowwise_data, *si = q->rowwise_scale_inv;
    const int64_t vec = 16 / (int64_t)bc_dtype_size(x->dtype);
    int vec_ok = bci_aligned(in, 16) && bci_aligned(out, (size_t)vec) && (rows == 1 || (ld % vec == 0 && cols % vec == 0));
    int64_t full = vec_ok ? cols / vec : 0, c0 = full * vec;
    /* both kernels first, so that a failed compile of one leaves the output untouched */
    const bci_kernel *kv = NULL, *ke = NULL;
    if (full > 0 && (s = bci_kernel_getf(ctx, &kv, "bc_quantize_%s__%s__row", f->name, dt)) != BC_OK) return s;
    if (c0 < cols && (s = bci_kernel_getf(ctx, &ke, "bc_quantize_%s__%s__row_elems", f->name, dt)) != BC_OK) return s;
    if (kv) {
      bci_arg args[] = { BCI_ARG(in), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(scale), BCI_ARG(out), BCI_ARG(si) };
      s = launch_vec_rows(ctx, sink, "bc_quantize", kv, full, rows, cols, stream, args, 7);
      if (s != BC_OK || !ke) return s;
      si = NULL; /* written by the row cast */
    }
    bci_arg args[] = { BCI_ARG(in), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(c0), BCI_ARG(scale), BCI_ARG(out), BCI_ARG(si) };
    return launch_elems(ctx, sink, ke, rows, cols, c0, stream, args, 8);
  }
  if (rows == 1 || cols == 1) {
    /* one row or one column: the transpose holds the same elements in the same order, so each
     * direction is the row cast of the tensor (a [4096, 1] bias would give each of the tile
     * kernel's 32 tiles one column). Both directions start at the same stage of a list, where
     * they are one group of the row kernel. */
    bc_qtensor r = *q;
    const int st0 = sink ? sink->stage : 0;
    r.columnwise_data = r.columnwise_scale_inv = NULL;
    s = q->rowwise_data ? cast_launch(ctx, sink, x, ld, &r, stream) : BC_OK;
    if (s == BC_OK && q->columnwise_data) {
      if (sink) sink->stage = st0;
      r.rowwise_data = q->columnwise_data;
      r.rowwise_scale_inv = q->columnwise_scale_inv;
      s = cast_launch(ctx, sink, x, ld, &r, stream);
    }
    return s;
  }
  s = bci_kernel_getf(ctx, &k, "bc_quantize_%s__%s__%s", f->name, dt, q->rowwise_data ? "rowcol" : "col");
  if (s != BC_OK) return s;
  const bci_launch *L = &k->launch;
  int vec_ok = bci_aligned(in, 16) && ld % L->vec == 0 && cols % L->vec == 0 &&
               (!q->rowwise_data || bci_aligned(q->rowwise_data, 16)) && bci_aligned(q->columnwise_data, 16);
  int64_t tiles = ((cols + L->tile_cols - 1) / L->tile_cols) * ((rows + L->tile_rows - 1) / L->tile_rows);
  if (tiles > 0x7FFFFFFF) return bci_fail(ctx, BC_ERR_UNSUPPORTED, "bc_quantize: [%lld, %lld] needs %lld tiles, more than one launch holds (2^31 - 1)", (long long)rows, (long long)cols, (long long)tiles);
  void *ro = q->rowwise_data, *co = q->columnwise_data, *rsi = q->rowwise_scale_inv, *csi = q->columnwise_scale_inv;
  bci_arg args[] = { BCI_ARG(in), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(scale), BCI_ARG(ro), BCI_ARG(co),
                     BCI_ARG(rsi), BCI_ARG(csi), BCI_ARG(vec_ok) };
  return bci_run(ctx, sink, k, (unsigned)tiles, 1, 1, (unsigned)L->threads, L->smem, stream, args, 10);
}

/* ---- block formats ---- */

static int64_t sl_pad_count(const bci_sl *sl) { return sl->prows * sl->pcols - sl->lrows * sl->lcols; }

/* Geometry and buffers of one present direction of q for a kernel (absent: zeros). */
static bc_status block_dir(bc_ctx *ctx, const char *fn, const bc_qtensor *q, bc_direction dir, bci_geom *g) {
  memset(g, 0, sizeof *g);
  void *data = dir == BC_ROWWISE ? q->rowwise_data : q->columnwise_data;
  void *scale = dir == BC_ROWWISE ? q->rowwise_scale_inv : q->columnwise_scale_inv;
  const char *dn = dir == BC_ROWWISE ? "rowwise" : "columnwise";
  if (!data) return BC_OK;
  bc_status s = bci_geom_get(ctx, fn, q->format, q->rows, q->cols, dir, q->scale_swizzled != 0, g);
  if (s != BC_OK) return s;
  if (!scale)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->%s_scale_inv is NULL; format '%s' needs a device buffer of %zu bytes (bc_qtensor_layout)",
                    fn, dn, q->format->name, g->scale_bytes);
  if (q->format->scale_bytes == 4 && !bci_aligned(scale, 4))
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->%s_scale_inv %p is not aligned to its 4-byte fp32 entries", fn, dn, scale);
  return BC_OK;
}

/* 16-byte pieces of a scale layout's tail (the stored rows past the valid ones; common.cuh:
 * bc_sl_tail_pieces), for the grid's size: compact, the tail's bytes / 16 and the two partial
 * pieces at most; swizzled, a piece per row slot of each atom of the last band */
static int64_t sl_tail_pieces(const bci_sl *sl, int bytes) {
  if (sl->order == 2) return sl->prows > sl->lrows ? sl->pcols / 4 * 32 : 0;
  int64_t vs = sl->order == 0 ? sl->lrows : sl->lcols, st = sl->order == 0 ? sl->prows : sl->pcols;
  return st > vs ? (st - vs) * sl->ld * bytes / 16 + 2 : 0;
}

#define THIN_LIST_STEPS 4

/* One direction of a thin tensor (templates/quantize_thin.cu): a team of lanes per block of the
 * view (a power of two, about as many as a block holds packing groups, at most 32: one lane for
 * the one-element blocks of a [4096, 1] tensor's rows), `unroll` blocks a team (loaded
 * together); the scale padding's tail up to 4 pieces a thread; grid-stride. */
static bc_status thin_launch(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t ld, const bc_qtensor *q, bc_direction dir,
                             const bci_geom *g, int64_t dld, void *stream) {
  const bc_format *f = q->format;
  const int row = dir == BC_ROWWISE;
  const bci_kernel *k;
  bc_status s = bci_kernel_getf(ctx, &k, "bc_quantize_thin_%s__%s__%s", f->name, bc_dtype_name(x->dtype), row ? "row" : "col");
  if (s != BC_OK) return s;
  int64_t rows = x->rows, cols = x->cols, vrows = row ? rows : cols, vcols = row ? cols : rows;
  int64_t tb = f->block_cols, ge = f->pack_group_elems > 0 ? f->pack_group_elems : 1; /* 1 x N rowwise, N x 1 columnwise */
  int64_t groups = ((vcols < tb ? vcols : tb) + ge - 1) / ge;
  int tl = 1;
  while (tl < 32 && tl < groups) tl *= 2;
  int64_t nblocks = vrows * ((vcols + tb - 1) / tb), per_team = k->launch.unroll; /* quantize_thin.cu: BC_THIN_U */
  int64_t pieces = (sl_tail_pieces(&g->sl, f->scale_bytes) + 3) / 4, teams = (nblocks + per_team - 1) / per_team;
  /* in a list, 4 steps a team (the kernel is grid-stride): a quarter of the CTAs, each paying
   * the list's lookup once for 4x the blocks (bench_list, H200: the 984 small tensors' MXFP8
   * rowwise list 0.072 -> 0.064 ms; 2 and 8 steps 0.065 and 0.060, the full lists alike); a
   * tensor alone keeps one step (its latency: a [4096, 1] tensor is 4 CTAs) */
  if (sink) teams = (teams + THIN_LIST_STEPS - 1) / THIN_LIST_STEPS;
  int64_t work = teams * tl > pieces ? teams * tl : pieces, threads = k->launch.threads;
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > 65536) blocks = 65536;
  const void *in = x->data;
  const float *gamax = q->amax;
  void *data = row ? q->rowwise_data : q->columnwise_data, *scale = row ? q->rowwise_scale_inv : q->columnwise_scale_inv;
  bci_arg args[] = { BCI_ARG(in), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(gamax), BCI_ARG(data), BCI_ARG(dld),
                     BCI_ARG(scale), BCI_ARG(g->sl), BCI_ARG(nblocks), BCI_ARG(tl) };
  return bci_run(ctx, sink, k, (unsigned)blocks, 1, 1, (unsigned)threads, 0, stream, args, 11);
}

static bc_status block_cast_launch(bc_ctx *ctx, bci_sink *sink, const char *fn, const bc_tensor *x, int64_t ld, bc_qtensor *q,
                                   const bci_qdst *dst, void *stream) {
  const bc_format *f = q->format;
  if (q->stochastic_rounding && !f->sr_allowed)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->stochastic_rounding is set but format '%s' does not allow stochastic rounding (its spec "
                    "has no stochastic_rounding = true)", fn, f->name);
  bci_geom gr, gc;
  bc_status s = block_dir(ctx, fn, q, BC_ROWWISE, &gr);
  if (s == BC_OK) s = block_dir(ctx, fn, q, BC_COLUMNWISE, &gc);
  if (s != BC_OK) return s;
  /* the destination: dense (q's own layout), or dst's row spacing and scale layouts */
  const int bits = f->elem.bits;
  int64_t rows = x->rows, cols = x->cols;
  int64_t row_ld = cols * bits / 8, col_ld = (f->columnwise_transposed ? rows : cols) * bits / 8;
  if (dst) {
    for (int d = 0; d < 2; d++)
      if (dst->sl_set[d] && dst->sl[d].order > 2 && !sink)
        return bci_fail(ctx, BC_ERR_INTERNAL, "%s: a scale window with an in-atom origin outside a list (only the block quantize "
                        "kernels' list variants take one: gen/blockcast.lua, BC_SL_WINDOW)", fn);
    if (dst->col_ld) col_ld = dst->col_ld;
    if (dst->sl_set[0]) gr.sl = dst->sl[0];
    if (dst->sl_set[1]) gc.sl = dst->sl[1];
  }
  const bci_kernel *k;
  const char *dirn = q->rowwise_data ? (q->columnwise_data ? "rowcol" : "row") : "col";
  s = bci_kernel_getf(ctx, &k, "bc_quantize_%s__%s__%s", f->name, bc_dtype_name(x->dtype), dirn);
  if (s != BC_OK) return s;
  const bci_launch *L = &k->launch;
  size_t es = bc_dtype_size(x->dtype);
  int vec_in = bci_aligned(x->data, 16) && ((size_t)ld * es) % 16 == 0;
  /* rowwise output rows 16-byte aligned: codes stored from the lanes, or (row_staged: runs that are
   * not whole 16-byte pieces) staged and written as aligned pieces; other rows staged and shifted.
   * Staged launches take the staged rows' shared memory (below). */
  int vec_row = q->rowwise_data && bci_aligned(q->rowwise_data, 16) && (cols * bits / 8) % 16 == 0;
  /* columnwise stores: transposed, 16-byte pieces of an output row; else one 2-byte word of a
   * column pair per row (8-bit elements) */
  int vec_col = q->columnwise_data &&
                (f->columnwise_transposed ? bci_aligned(q->columnwise_data, 16) && (rows * bits / 8) % 16 == 0 && col_ld % 16 == 0
                                          : bci_aligned(q->columnwise_data, 2) && (cols * bits / 8) % 2 == 0 && col_ld % 2 == 0);
  int64_t tiles_x = (cols + L->tile_cols - 1) / L->tile_cols;
  int64_t tiles = tiles_x * ((rows + L->tile_rows - 1) / L->tile_rows);
  /* A tensor of 1D blocks that fills less than an eighth of its tiles (a few rows or columns: a
   * [4096, 1] bias, a [1, 4096] row) goes to quantize_thin.cu (thin_launch): the tiles would each
   * cost a whole tile's work for a few elements. Its directions are independent launches (in a
   * list, recorded at the same stage). Stochastic rounding stays on the tile kernel. */
  if (f->block == BC_BLOCK_1D && !q->stochastic_rounding && rows > 0 && cols > 0 &&
      rows * cols * 8 < tiles * L->tile_rows * L->tile_cols) {
    if (q->rowwise_data) s = thin_launch(ctx, sink, x, ld, q, BC_ROWWISE, &gr, row_ld, stream);
    if (s == BC_OK && q->columnwise_data) {
      if (sink && q->rowwise_data) sink->stage--;
      s = thin_launch(ctx, sink, x, ld, q, BC_COLUMNWISE, &gc, col_ld, stream);
    }
    return s;
  }
  int64_t npad = sl_pad_count(&gr.sl) > sl_pad_count(&gc.sl) ? sl_pad_count(&gr.sl) : sl_pad_count(&gc.sl);
  /* blocks past the tiles zero the scale padding (grid-stride): one entry a thread; in a list,
   * up to 32 (a skinny tensor's padding, e.g. [4096, 1] MXFP8 rowwise: 12288 entries, would
   * otherwise add 48 blocks to its 64 tiles, each paying the list's per-block lookup) */
  int64_t per_block = (int64_t)L->threads * (sink ? 32 : 1);
  int64_t padblocks = (npad + per_block - 1) / per_block;
  if (padblocks > 1024) padblocks = 1024;
  if (tiles + padblocks > 0x7FFFFFFF)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: [%lld, %lld] needs %lld tiles, more than one launch holds (2^31 - 1)", fn,
                    (long long)rows, (long long)cols, (long long)tiles);
  uint32_t tx_m, tx_s;
  bci_udiv31(tiles_x > 0 ? (uint32_t)tiles_x : 1u, &tx_m, &tx_s); /* the tile's row: templates/quantize_block.cu */
  void *in = x->data;
  const float *gamax = q->amax;
  void *rd = q->rowwise_data, *rs = q->rowwise_scale_inv, *cd = q->columnwise_data, *cs = q->columnwise_scale_inv;
  uint64_t seed = q->sr_seed, off = q->sr_offset;
  int sr = q->stochastic_rounding != 0;
  bci_arg args[] = { BCI_ARG(in), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(gamax), BCI_ARG(rd), BCI_ARG(rs),
                     BCI_ARG(gr.sl), BCI_ARG(cd), BCI_ARG(cs), BCI_ARG(gc.sl), BCI_ARG(col_ld), BCI_ARG(seed), BCI_ARG(off),
                     BCI_ARG(sr), BCI_ARG(vec_in), BCI_ARG(vec_row), BCI_ARG(vec_col), BCI_ARG(tiles_x), BCI_ARG(tiles),
                     BCI_ARG(tx_m), BCI_ARG(tx_s) };
  /* staged rowwise codes (rows not 16-byte aligned, or row_staged) go in shared memory past the
   * launch's own layout: row_smem bytes, the generator's (templates/quantize_block.cu: BC_RCODES_OFF
   * == BC_SMEM, BC_ROW_SMEM == BC_TR x BC_RSTRIDE) */
  int smem = L->smem;
  if (q->rowwise_data && (!vec_row || L->row_staged)) smem += L->row_smem;
  return bci_run(ctx, sink, k, (unsigned)(tiles + padblocks), 1, 1, (unsigned)L->threads, smem, stream, args, 22);
}

static bc_status check_cast_args(bc_ctx *ctx, const char *fn, const bc_tensor *x, bc_qtensor *q, int64_t *ld) {
  bc_status s = bci_check_tensor(ctx, fn, "x", x, ld);
  if (s != BC_OK) return s;
  s = check_qtensor(ctx, fn, q, 1);
  if (s != BC_OK) return s;
  if (q->rows != x->rows || q->cols != x->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q has shape [%lld, %lld] but x has [%lld, %lld]; they must match", fn,
                    (long long)q->rows, (long long)q->cols, (long long)x->rows, (long long)x->cols);
  if (q->format->block != BC_BLOCK_TENSOR) {
    if (q->format->rule == BCI_RULE_TWO_LEVEL && (!q->amax || !bci_aligned(q->amax, 4)))
      return bci_fail(ctx, BC_ERR_ARG, "%s: q->amax is %s; format '%s' scales by the global amax and needs a device fp32[1]", fn,
                      q->amax ? "misaligned" : "NULL", q->format->name);
    return BC_OK;
  }
  if (q->stochastic_rounding)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->stochastic_rounding is set but per-tensor format '%s' rounds to nearest only", fn,
                    q->format->name);
  if (q->scale_swizzled)
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->scale_swizzled is set but format '%s' has one per-tensor scale (swizzling is for block formats)",
                    fn, q->format->name);
  if (!q->scale) return bci_fail(ctx, BC_ERR_ARG, "%s: q->scale is NULL; expected a device fp32[1]", fn);
  return BC_OK;
}

bc_status bci_quantize_cast(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, bc_qtensor *q, void *stream) {
  int64_t ld;
  bc_status s = check_cast_args(ctx, "bc_quantize_cast", x, q, &ld);
  if (s != BC_OK) return s;
  if (q->format->block != BC_BLOCK_TENSOR) return block_cast_launch(ctx, sink, "bc_quantize_cast", x, ld, q, NULL, stream);
  return cast_launch(ctx, sink, x, ld, q, stream);
}

bc_status bci_quantize_block_into(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, bc_qtensor *q, const bci_qdst *dst,
                                  void *stream) {
  int64_t ld;
  bc_status s = check_cast_args(ctx, "bc_quantize_cast", x, q, &ld);
  if (s != BC_OK) return s;
  if (q->format->block == BC_BLOCK_TENSOR)
    return bci_fail(ctx, BC_ERR_INTERNAL, "bci_quantize_block_into: format '%s' has one scale per tensor", q->format->name);
  return block_cast_launch(ctx, sink, "bc_quantize_cast", x, ld, q, dst, stream);
}

bc_status bc_quantize_cast(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_quantize_cast(ctx, NULL, x, q, stream);
}

bc_status bci_quantize(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, bc_qtensor *q, void *stream) {
  int64_t ld;
  bc_status s = check_cast_args(ctx, "bc_quantize", x, q, &ld);
  if (s != BC_OK) return s;
  if (q->format->block != BC_BLOCK_TENSOR) {
    if (q->format->rule == BCI_RULE_TWO_LEVEL) s = amax_launch(ctx, sink, x, ld, q->amax, stream);
    if (s == BC_OK) s = block_cast_launch(ctx, sink, "bc_quantize", x, ld, q, NULL, stream);
    return s;
  }
  if (!q->amax) return bci_fail(ctx, BC_ERR_ARG, "bc_quantize: q->amax is NULL; current scaling needs a device fp32[1] for the amax");
  s = amax_launch(ctx, sink, x, ld, q->amax, stream);
  if (s == BC_OK) s = scale_launch(ctx, sink, q->format, q->amax, q->scale, NULL, stream);
  if (s == BC_OK) s = cast_launch(ctx, sink, x, ld, q, stream);
  return s;
}

bc_status bc_quantize(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_quantize(ctx, NULL, x, q, stream);
}

static bc_status block_dequantize(bc_ctx *ctx, bci_sink *sink, const bc_qtensor *q, bc_direction dir, const bc_tensor *out,
                                  int64_t ld, void *stream) {
  const char *fn = "bc_dequantize";
  const bc_format *f = q->format;
  bci_geom g;
  bc_status s = block_dir(ctx, fn, q, dir, &g);
  if (s != BC_OK) return s;
  const char *dn = dir == BC_ROWWISE ? "rowwise" : "columnwise";
  if (out->rows != g.drows || out->cols != g.dcols)
    return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: out has shape [%lld, %lld]; the %s data of q is [%lld, %lld]",
                    (long long)out->rows, (long long)out->cols, dn, (long long)g.drows, (long long)g.dcols);
  if (f->rule == BCI_RULE_TWO_LEVEL && (!q->amax || !bci_aligned(q->amax, 4)))
    return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: q->amax is %s; format '%s' needs the global amax (device fp32[1])",
                    q->amax ? "misaligned" : "NULL", f->name);
  const void *data = dir == BC_ROWWISE ? q->rowwise_data : q->columnwise_data;
  const void *scale = dir == BC_ROWWISE ? q->rowwise_scale_inv : q->columnwise_scale_inv;
  /* templates/dequantize_block.cu: slots of 8 elements, L->unroll slots per thread along a row;
   * vector loads of a slot's codes and 16-byte stores where the rows are aligned for them. A
   * contiguous output whose rows are not aligned is cut into slots flat (over the whole tensor),
   * which are all aligned (the __flat kernel, one 1D grid over the tensor's slots); so is a
   * contiguous output of rows shorter than a warp's 32 slots (a 64x64 tensor: the row kernel's
   * block rows would each hold 8 slots, one block per row) */
  int64_t slot_bytes = 8 * f->elem.bits / 8, unit = slot_bytes & -slot_bytes; /* loads of a slot: 6 bytes as 3 x 2 */
  int64_t drows = g.drows, dcols = g.dcols;
  int q_vec = bci_aligned(data, (size_t)unit) && (dcols * f->elem.bits / 8) % unit == 0;
  int out_vec = bci_aligned(out->data, 16) && ((size_t)ld * bc_dtype_size(out->dtype)) % 16 == 0;
  int flat = (!q_vec || !out_vec || dcols < 8 * 32) && ld == dcols && bci_aligned(data, (size_t)unit) && bci_aligned(out->data, 16);
  const bci_kernel *k;
  s = bci_kernel_getf(ctx, &k, "bc_dequantize_%s__%s__%s%s", f->name, bc_dtype_name(out->dtype), dir == BC_ROWWISE ? "row" : "col",
                 flat ? "_flat" : "");
  if (s != BC_OK) return s;
  const bci_launch *L = &k->launch;
  int64_t per_block = (int64_t)L->threads * L->unroll;
  int64_t gxx = ((flat ? (drows * dcols + 7) / 8 : (dcols + 7) / 8) + per_block - 1) / per_block;
  if (gxx > 0x7FFFFFFF)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "bc_dequantize: [%lld, %lld] needs %lld blocks, more than one launch holds (2^31 - 1)",
                    (long long)drows, (long long)dcols, (long long)gxx);
  /* by row: one block row per group of data rows (1 row, or 4 sharing their scale entries for
   * untransposed columnwise data) up to 65535 (the kernel strides over the rest); in a list, a
   * quarter as many, each block taking ~4 groups, so that the item lookup of a list block (two
   * dependent loads) is paid once for several short rows */
  int64_t rows_y = g.data_is_view || g.vbc % 4 ? 1 : 4; /* dequantize_block.cu: BC_DQ_ROWS */
  int64_t groups = (drows + rows_y - 1) / rows_y, want_y = sink && groups >= 4 * 264 ? (groups + 3) / 4 : groups;
  unsigned gx = (unsigned)gxx, gy = flat ? 1 : umin64(want_y, 65535);
  void *o = out->data;
  const float *gamax = q->amax;
  bci_arg args[] = { BCI_ARG(data), BCI_ARG(drows), BCI_ARG(dcols), BCI_ARG(scale), BCI_ARG(g.sl), BCI_ARG(gamax), BCI_ARG(o),
                     BCI_ARG(ld), BCI_ARG(q_vec), BCI_ARG(out_vec) };
  return bci_run(ctx, sink, k, gx, gy, 1, (unsigned)L->threads, L->smem, stream, args, 10);
}

bc_status bci_scale_swizzle(bc_ctx *ctx, bci_sink *sink, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir,
                            const void *src, int from_swizzled, void *dst, void *stream) {
  const char *fn = "bc_scale_swizzle";
  bc_status s = bci_check_shape_dir(ctx, fn, fmt, rows, cols, dir);
  if (s != BC_OK) return s;
  if (fmt->block == BC_BLOCK_TENSOR)
    return bci_fail(ctx, BC_ERR_ARG, "%s: format '%s' has one per-tensor scale; swizzling is for block formats", fn, fmt->name);
  if (!src || !dst) return bci_fail(ctx, BC_ERR_ARG, "%s: arguments 'src' and 'dst' must be device buffers, not NULL", fn);
  if (fmt->scale_bytes == 4 && (!bci_aligned(src, 4) || !bci_aligned(dst, 4)))
    return bci_fail(ctx, BC_ERR_ARG, "%s: src and dst must be aligned to the 4-byte fp32 entries", fn);
  bci_geom gc, gs;
  s = bci_geom_get(ctx, fn, fmt, rows, cols, dir, 0, &gc);
  if (s == BC_OK) s = bci_geom_get(ctx, fn, fmt, rows, cols, dir, 1, &gs);
  if (s != BC_OK) return s;
  const bci_geom *from = from_swizzled ? &gs : &gc, *to = from_swizzled ? &gc : &gs;
  const char *a = (const char *)src, *b = (const char *)dst;
  if (a < b + to->scale_bytes && b < a + from->scale_bytes)
    return bci_fail(ctx, BC_ERR_ARG, "%s: src and dst overlap; expected two separate buffers", fn);
  const bci_kernel *k;
  s = bci_kernel_getf(ctx, &k, "bc_swizzle_%s", fmt->name);
  if (s != BC_OK) return s;
  const bci_launch *L = &k->launch;
  int64_t n = to->sl.prows * to->sl.pcols;
  int64_t want = (n + L->threads - 1) / L->threads;
  unsigned gx = umin64(want, (int64_t)sm_count(ctx) * L->blocks_per_sm);
  bci_sl ssl = from->sl, dsl = to->sl;
  bci_arg args[] = { BCI_ARG(src), BCI_ARG(ssl), BCI_ARG(dst), BCI_ARG(dsl) };
  return bci_run(ctx, sink, k, gx, 1, 1, (unsigned)L->threads, L->smem, stream, args, 4);
}

bc_status bc_scale_swizzle(bc_ctx *ctx, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir, const void *src,
                           int from_swizzled, void *dst, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_scale_swizzle(ctx, NULL, fmt, rows, cols, dir, src, from_swizzled, dst, stream);
}

bc_status bci_dequantize(bc_ctx *ctx, bci_sink *sink, const bc_qtensor *q, bc_direction dir, const bc_tensor *out, void *stream) {
  bc_status s = check_qtensor(ctx, "bc_dequantize", q, 0);
  if (s != BC_OK) return s;
  int64_t ld;
  s = bci_check_tensor(ctx, "bc_dequantize", "out", out, &ld);
  if (s != BC_OK) return s;
  const void *data;
  const float *si;
  int64_t rows, cols;
  if (dir == BC_ROWWISE) {
    data = q->rowwise_data;
    si = q->rowwise_scale_inv;
    rows = q->rows;
    cols = q->cols;
  } else if (dir == BC_COLUMNWISE) {
    data = q->columnwise_data;
    si = q->columnwise_scale_inv;
    int t = q->format->columnwise_transposed;
    rows = t ? q->cols : q->rows;
    cols = t ? q->rows : q->cols;
  } else {
    return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: dir is %d; expected BC_ROWWISE or BC_COLUMNWISE", (int)dir);
  }
  const char *dn = dir == BC_ROWWISE ? "rowwise" : "columnwise";
  if (!data) return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: q->%s_data is NULL", dn);
  if (q->format->block != BC_BLOCK_TENSOR) return block_dequantize(ctx, sink, q, dir, out, ld, stream);
  if (!si) return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: q->%s_scale_inv is NULL", dn);
  if (q->scale_swizzled)
    return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: q->scale_swizzled is set but format '%s' has one per-tensor scale", q->format->name);
  if (out->rows != rows || out->cols != cols)
    return bci_fail(ctx, BC_ERR_ARG, "bc_dequantize: out has shape [%lld, %lld]; the %s data of q is [%lld, %lld]",
                    (long long)out->rows, (long long)out->cols, dn, (long long)rows, (long long)cols);
  /* whole slots of 8 codes of aligned rows: the vector kernel; the rest (a row's partial last
   * slot, or all of a misaligned launch): its element-wise companion, compiled only when needed */
  if (ld == cols) { cols *= rows; rows = 1; ld = cols; }
  const char *fn = q->format->name, *dt = bc_dtype_name(out->dtype);
  void *o = out->data;
  int vec_ok = bci_aligned(data, 8) && bci_aligned(o, 16) && (rows == 1 || (ld % 8 == 0 && cols % 8 == 0));
  int64_t full = vec_ok ? cols / 8 : 0, c0 = full * 8;
  /* both kernels first, so that a failed compile of one leaves the output untouched */
  const bci_kernel *kv = NULL, *ke = NULL;
  if (full > 0 && (s = bci_kernel_getf(ctx, &kv, "bc_dequantize_%s__%s", fn, dt)) != BC_OK) return s;
  if (c0 < cols && (s = bci_kernel_getf(ctx, &ke, "bc_dequantize_%s__%s__elems", fn, dt)) != BC_OK) return s;
  if (kv) {
    bci_arg args[] = { BCI_ARG(data), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(si), BCI_ARG(o) };
    s = launch_vec_rows(ctx, sink, "bc_dequantize", kv, full, rows, cols, stream, args, 6);
    if (s != BC_OK || !ke) return s;
  }
  bci_arg args[] = { BCI_ARG(data), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(ld), BCI_ARG(c0), BCI_ARG(si), BCI_ARG(o) };
  return launch_elems(ctx, sink, ke, rows, cols, c0, stream, args, 7);
}

bc_status bc_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  return bci_dequantize(ctx, NULL, q, dir, out, stream);
}
