/* comm/bc_collective.c: the collective operations of blockcast.h, written once over the
 * transport primitives (bc_transport.c): the amax all-reduce, quantize with a communicator
 * (one tensor or a list) and the quantized all-gather along the first dimension.
 *
 * The all-gather (DESIGN.md scenario 1). Rank r holds tensor rows [row0[r], row0[r+1]). Let Bm
 * be the block height along the rows of the directions a rank quantizes (1 for per-tensor and
 * rowwise 1D blocks; N for N x 1 columnwise blocks and N x N blocks). Each rank quantizes the
 * slab of whole block rows around its rows, tensor rows [a, a + s): when its rows cut a block
 * row, the slab is staged (templates/comm_stage.cu) with pad rows that carry the other ranks'
 * partial block amaxes of that block row (exchanged first: 2 x nbc fp32 per rank, where nbc is
 * the blocks of a block row), so each block of the slab is quantized with its true scale and
 * its codes are the whole tensor's. Then, in one group:
 *   rowwise data (and MXFP8's row-major columnwise data): each rank's own rows, gathered in
 *     place into the output (a rank's slab writes its pad rows' codes into rows that the gather
 *     then overwrites with their owners' codes);
 *   block scales, transposed columnwise data of 1D formats: each rank's slab buffers (scales
 *     up to their last valid entry), then assembled into the output's layout, compact or
 *     swizzled, by templates/comm_place.cu, each entry from the rank holding its row.
 * Columnwise data of per-tensor and 2D-block formats is the transpose of the gathered rowwise
 * data and their columnwise scales are the rowwise ones: built locally, never sent. Per-tensor
 * and two-level formats first all-reduce the amax (1 fp32). */
#include <stdlib.h>
#include <string.h>

#include "comm/bc_comm.h"

static bc_status check_comm(bc_ctx *ctx, const char *fn, const bc_comm *comm) {
  if (!comm) return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'comm' is NULL; expected a communicator (bc_comm_create_local, bc_comm_create_nccl)", fn);
  return BC_OK;
}

/* ---- amax all-reduce ---- */

bc_status bc_amax_allreduce(bc_ctx *ctx, bc_comm *comm, float *amax, int64_t n, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_amax_allreduce";
  bc_status s = check_comm(ctx, fn, comm);
  if (s != BC_OK) return s;
  if (n < 0 || n > BCI_MAX_ELEMS)
    s = bci_fail(ctx, BC_ERR_ARG, "%s: n is %lld; expected the number of amaxes (0 to 2^50)", fn, (long long)n);
  else if (n > 0 && (!amax || !bci_aligned(amax, 4)))
    s = bci_fail(ctx, BC_ERR_ARG, "%s: argument 'amax' is NULL or misaligned; expected a device fp32[%lld]", fn, (long long)n);
  char sig[BCI_COMM_SIG];
  snprintf(sig, sizeof sig, "%s n=%lld", fn, (long long)n);
  if ((s = bci_comm_agree(ctx, comm, fn, sig, s, stream)) != BC_OK || n == 0) return s;
  return bci_comm_allreduce_max(ctx, comm, sig, BC_OK, amax, n, stream);
}

/* ---- quantize with a communicator ---- */

static int needs_amax(const bc_format *f) { return f->block == BC_BLOCK_TENSOR || f->rule == BCI_RULE_TWO_LEVEL; }

/* the checks of bc_quantize_cast without launching: its launches recorded into a sink that is
 * thrown away (the same code, so the same messages) */
static bc_status dry_cast(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q) {
  bci_sink sk;
  memset(&sk, 0, sizeof sk);
  bc_status s = bci_quantize_cast(ctx, &sk, x, q, NULL);
  free(sk.recs);
  free(sk.bytes);
  return s;
}

static bc_status check_amax_arg(bc_ctx *ctx, const char *fn, const bc_qtensor *q) {
  if (!needs_amax(q->format)) return BC_OK;
  if (!q->amax || !bci_aligned(q->amax, 4))
    return bci_fail(ctx, BC_ERR_ARG, "%s: q->amax is %s; format '%s' takes the amax reduced over the communicator there and needs a "
                    "device fp32[1]", fn, q->amax ? "misaligned" : "NULL", q->format->name);
  return BC_OK;
}

bc_status bc_quantize_comm(bc_ctx *ctx, bc_comm *comm, const bc_tensor *x, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_quantize_comm";
  bc_status s = check_comm(ctx, fn, comm);
  if (s != BC_OK) return s;
  int empty = 0;
  if (!x || !q) s = bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL", fn, x ? "q" : "x");
  else if ((s = bci_check_format(ctx, q->format, "q->format")) == BC_OK) {
    empty = x->rows == 0 || x->cols == 0;
    if (!empty) s = dry_cast(ctx, x, q);
    else if (q->rows != x->rows || q->cols != x->cols)
      s = bci_fail(ctx, BC_ERR_ARG, "%s: q has shape [%lld, %lld] but x has [%lld, %lld]; they must match", fn, (long long)q->rows,
                   (long long)q->cols, (long long)x->rows, (long long)x->cols);
    if (s == BC_OK) s = check_amax_arg(ctx, fn, q);
  }
  /* every rank agrees first, also for formats that communicate nothing (a rank whose checks
   * failed is then named on every rank, whatever the format) */
  char sig[BCI_COMM_SIG];
  snprintf(sig, sizeof sig, "%s fmt=%s", fn, s == BC_OK ? q->format->name : "?");
  if ((s = bci_comm_agree(ctx, comm, fn, sig, s, stream)) != BC_OK) return s;
  if (!needs_amax(q->format)) return empty ? BC_OK : bci_quantize_cast(ctx, NULL, x, q, stream);
  s = empty ? bci_zero32(ctx, NULL, q->amax, 1, stream) : bci_amax(ctx, NULL, x, q->amax, stream);
  if ((s = bci_comm_allreduce_max(ctx, comm, sig, s, q->amax, 1, stream)) != BC_OK) return s;
  if (q->format->block == BC_BLOCK_TENSOR && (s = bci_compute_scale(ctx, NULL, q->format, q->amax, q->scale, NULL, stream)) != BC_OK)
    return s;
  return empty ? BC_OK : bci_quantize_cast(ctx, NULL, x, q, stream);
}

bc_status bc_quantize_list_comm(bc_ctx *ctx, bc_comm *comm, int64_t n, const bc_tensor *x, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_quantize_list_comm";
  bc_status s = check_comm(ctx, fn, comm);
  if (s != BC_OK) return s;
  if (n < 0) return bci_comm_agree(ctx, comm, fn, "", bci_fail(ctx, BC_ERR_ARG, "%s: n is %lld; expected the number of tensors (>= 0)", fn, (long long)n), stream);
  if (n > 0 && (!x || !q))
    return bci_comm_agree(ctx, comm, fn, "", bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL; expected an array of %lld entries", fn, x ? "q" : "x", (long long)n), stream);
  /* the tensors whose amax is reduced: their inputs (a sub-list) and indices, one allocation */
  int64_t m = 0;
  uint64_t fh = 1469598103934665603ull; /* FNV-1a of the formats: part of the agreement check */
  for (int64_t i = 0; i < n; i++) {
    if ((s = bci_check_format(ctx, q[i].format, "q[i].format")) != BC_OK ||
        (s = check_amax_arg(ctx, fn, &q[i])) != BC_OK)
      return bci_comm_agree(ctx, comm, fn, "", bci_fail_entry(ctx, s, fn, "tensor", i), stream);
    if (needs_amax(q[i].format)) m++;
    for (const char *c = q[i].format->name; *c; c++) fh = (fh ^ (unsigned char)*c) * 1099511628211ull;
    fh = (fh ^ ';') * 1099511628211ull;
  }
  char sig[BCI_COMM_SIG];
  snprintf(sig, sizeof sig, "%s n=%lld reduced=%lld formats=%016llx", fn, (long long)n, (long long)m, (unsigned long long)fh);
  if (m == 0) {
    if ((s = bci_comm_agree(ctx, comm, fn, sig, BC_OK, stream)) != BC_OK) return s;
    return bc_quantize_cast_list(ctx, n, x, q, stream);
  }
  bc_tensor *xs = malloc((size_t)m * (sizeof *xs + sizeof(int64_t)));
  if (!xs) return bci_comm_agree(ctx, comm, fn, sig, bci_fail(ctx, BC_ERR_NOMEM, "%s: out of memory for the index of %lld tensors", fn, (long long)m), stream);
  int64_t *idx = (int64_t *)(xs + m);
  for (int64_t i = 0, j = 0; i < n; i++)
    if (needs_amax(q[i].format)) {
      xs[j] = x[i];
      idx[j++] = i;
    }
  float *ws = NULL;
  s = bci_ws_alloc(ctx, (size_t)m * sizeof(float), stream, (void **)&ws);
  /* the amaxes (which check those entries) before the first collective; the casts check the
   * rest after it, and a failure there fails this rank's call alone (nothing else to wait for) */
  if (s == BC_OK && (s = bc_amax_list(ctx, m, xs, ws, stream)) != BC_OK) {
    /* its message names the sub-list's entry: name the caller's */
    long long j = -1;
    const char *e = bc_last_error(ctx);
    const char *rest = strstr(e, ": ");
    if (sscanf(e, "bc_amax_list: tensor %lld:", &j) == 1 && j >= 0 && j < m && rest && (rest = strstr(rest + 2, ": ")))
      s = bci_fail(ctx, s, "%s: tensor %lld: %s", fn, (long long)idx[j], rest + 2);
  }
  s = bci_comm_agree(ctx, comm, fn, sig, s, stream);
  if (s == BC_OK) s = bci_comm_allreduce_max(ctx, comm, sig, BC_OK, ws, m, stream);
  if (s == BC_OK) s = bci_list_amax_back(ctx, fn, m, idx, ws, q, stream);
  if (s == BC_OK) s = bc_quantize_cast_list(ctx, n, x, q, stream);
  bci_ws_free(ws, stream);
  free(xs);
  return s;
}

/* ---- all-gather ---- */

/* templates/comm_place.cu: bc_pdir, bc_psrc (same layout) */
#define BCI_PLACE_MAX_RANKS 64
typedef struct pdir {
  int32_t col, view, bits, per_row, vbr, vbc, order, pad_r, pad_c, high_first;
} pdir;
typedef struct psrc {
  int64_t nranks;
  int64_t row0[BCI_PLACE_MAX_RANKS + 1];
  int64_t a[BCI_PLACE_MAX_RANKS], s[BCI_PLACE_MAX_RANKS], off[BCI_PLACE_MAX_RANKS];
} psrc;
/* templates/comm_stage.cu: bc_stage_parts */
#define BCI_STAGE_MAX_PARTS 128
typedef struct stage_parts {
  int32_t ntop, nbot;
  int32_t top[BCI_STAGE_MAX_PARTS], bot[BCI_STAGE_MAX_PARTS];
} stage_parts;

static pdir pdir_of(const bc_format *f, bc_direction dir, int scales, int swizzled) {
  const int col = dir == BC_COLUMNWISE;
  const bci_dir_spec *d = &f->dir[col];
  pdir p = { col, col ? f->columnwise_transposed : 1, scales ? 8 * f->scale_bytes : f->elem.bits, d->scale_per_row,
             f->block_rows, f->block_cols, swizzled ? 2 : d->scale_order, d->pad_rows, d->pad_cols, f->pack_high_first };
  if (col && f->block_rows == 1) p.vbr = 1;
  if (f->block == BC_BLOCK_TENSOR) p.vbr = p.vbc = p.pad_r = p.pad_c = 1;
  return p;
}

/* bytes of a slab's compact scale buffer up to its last valid entry (what travels) */
static size_t scale_send_bytes(const bci_geom *g, int eb) {
  const bci_sl *l = &g->sl;
  if (l->lrows == 0 || l->lcols == 0) return 0;
  int64_t last = l->order == 0 ? (l->lrows - 1) * l->ld + l->lcols : (l->lcols - 1) * l->ld + l->lrows;
  return (size_t)last * (size_t)eb;
}

typedef struct plan {
  const bc_format *f;
  int W, me;
  int64_t M, K;
  int64_t row0[BCI_PLACE_MAX_RANKS + 1], a[BCI_PLACE_MAX_RANKS], s[BCI_PLACE_MAX_RANKS];
  int64_t Bm, G, nbc;
  int want_row, want_col, comp_row, comp_col, col_direct, derived, exchange;
  size_t rb, cb;                     /* bytes of a rowwise data row, of a row-major columnwise row */
  /* per rank: bytes of its slab's rowwise scales, columnwise data, columnwise scales (whole
   * buffers, what its quantize writes) and what of them travels */
  size_t rs[BCI_PLACE_MAX_RANKS], cd[BCI_PLACE_MAX_RANKS], cs[BCI_PLACE_MAX_RANKS];
  size_t rs_send[BCI_PLACE_MAX_RANKS], cs_send[BCI_PLACE_MAX_RANKS];
} plan;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static bc_status make_plan(bc_ctx *ctx, const char *fn, bc_comm *comm, const int64_t *rows, const bc_qtensor *out, plan *p) {
  memset(p, 0, sizeof *p);
  const bc_format *f = out->format;
  p->f = f;
  p->W = comm->size;
  p->me = comm->rank;
  p->K = out->cols;
  if (p->W > BCI_PLACE_MAX_RANKS)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: the communicator has %d ranks; the all-gather supports up to %d", fn, p->W,
                    BCI_PLACE_MAX_RANKS);
  if (p->K < 1 || p->K > BCI_MAX_ELEMS)
    return bci_fail(ctx, BC_ERR_ARG, "%s: the tensor has %lld cols; expected 1 to 2^50", fn, (long long)p->K);
  for (int r = 0; r < p->W; r++) {
    if (rows[r] < 0 || rows[r] > BCI_MAX_ELEMS)
      return bci_fail(ctx, BC_ERR_ARG, "%s: rows[%d] is %lld; expected the row count of rank %d (0 to 2^50)", fn, r, (long long)rows[r], r);
    p->row0[r + 1] = p->row0[r] + rows[r];
    if (p->row0[r + 1] > BCI_MAX_ELEMS / p->K)
      return bci_fail(ctx, BC_ERR_ARG, "%s: the ranks' rows (%lld by rank %d) times %lld cols pass 2^50 elements", fn,
                      (long long)p->row0[r + 1], r, (long long)p->K);
  }
  p->M = p->row0[p->W];
  if (p->M == 0) return bci_fail(ctx, BC_ERR_ARG, "%s: the ranks' rows add up to 0; expected a tensor of at least one row", fn);
  p->want_row = out->rowwise_data != NULL;
  p->want_col = out->columnwise_data != NULL;
  bc_status fs = bci_comm_format_ok(ctx, fn, NULL, 0, f);
  if (fs != BC_OK) return fs;
  const int bits = f->elem.bits;
  p->rb = (size_t)(p->K * bits / 8);
  p->cb = p->rb;
  p->Bm = 1;
  p->G = 1;
  if (f->block == BC_BLOCK_TENSOR || f->block == BC_BLOCK_2D) {
    /* the columnwise copy is built from the rowwise data: a transpose */
    if (!f->has_rowwise || (p->want_col && !f->columnwise_transposed))
      return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: format '%s' %s; the all-gather builds the columnwise copy of per-tensor and "
                      "2D-block formats by transposing the gathered rowwise data, so it takes formats with a rowwise direction "
                      "and transposed columnwise data", fn, f->name, !f->has_rowwise ? "has no rowwise direction" :
                      "stores its columnwise data untransposed");
    p->comp_row = 1;
    p->derived = p->want_col;
    if (f->block == BC_BLOCK_2D) {
      p->Bm = f->block_rows;
      p->G = f->block_cols;
    }
  } else {
    p->comp_row = p->want_row;
    p->comp_col = p->want_col;
    p->col_direct = p->want_col && !f->columnwise_transposed;
    if (p->want_col) p->Bm = f->block_cols;
  }
  p->nbc = cdiv(p->K, p->G);
  for (int r = 0; r < p->W; r++) {
    int64_t lo = p->row0[r], hi = p->row0[r + 1];
    if (hi == lo) continue;
    p->a[r] = lo / p->Bm * p->Bm;
    int64_t b = cdiv(hi, p->Bm) * p->Bm;
    p->s[r] = (b < p->M ? b : p->M) - p->a[r];
    if (p->a[r] != lo || p->a[r] + p->s[r] != hi) p->exchange = 1;
    if (f->block == BC_BLOCK_TENSOR) continue;
    bci_geom g;
    bc_status st;
    const int eb = f->scale_bytes;
    if (p->comp_row) {
      if ((st = bci_geom_get(ctx, fn, f, p->s[r], p->K, BC_ROWWISE, 0, &g)) != BC_OK) return st;
      p->rs[r] = g.scale_bytes;
      p->rs_send[r] = scale_send_bytes(&g, eb);
    }
    if (p->comp_col) {
      if ((st = bci_geom_get(ctx, fn, f, p->s[r], p->K, BC_COLUMNWISE, 0, &g)) != BC_OK) return st;
      if (!p->col_direct) p->cd[r] = g.data_bytes;
      p->cs[r] = g.scale_bytes;
      p->cs_send[r] = scale_send_bytes(&g, eb);
    }
  }
  return BC_OK;
}

static bc_status launch_1d(bc_ctx *ctx, const char *name, int64_t n, void *stream, const bci_arg *args, int nargs) {
  const bci_kernel *k;
  bc_status s = bci_kernel_get(ctx, name, &k);
  if (s != BC_OK) return s;
  int64_t blocks = cdiv(n, k->launch.threads);
  unsigned gx = blocks < 4096 ? (unsigned)(blocks > 0 ? blocks : 1) : 4096;
  return bci_run(ctx, NULL, k, gx, 1, 1, (unsigned)k->launch.threads, 0, stream, args, nargs);
}

/* assemble one output buffer (comm_place.cu): a 2D grid, output rows along y */
static bc_status place(bc_ctx *ctx, const plan *p, void *dst, pdir od, int scales, const void *src, pdir sd, const psrc *t,
                       void *stream) {
  int64_t rows = p->M, cols = p->K;
  int64_t nr, nc; /* output rows, and bytes (entries) per row */
  bci_sl osl;      /* the output's scale layout (scales) */
  memset(&osl, 0, sizeof osl);
  if (scales) {
    bci_geom g;
    bc_status s = bci_geom_get(ctx, "bc_all_gather", p->f, rows, cols, od.col ? BC_COLUMNWISE : BC_ROWWISE, od.order == 2, &g);
    if (s != BC_OK) return s;
    osl = g.sl;
    nr = g.sl.prows;
    nc = g.sl.pcols;
  } else {
    int64_t vr = od.col ? cols : rows, vc = od.col ? rows : cols;
    nr = od.view ? vr : vc;
    nc = cdiv((od.view ? vc : vr) * od.bits / 8, 16); /* 16 bytes a thread */
  }
  const bci_kernel *k;
  bc_status s = bci_kernel_get(ctx, "bc_comm_place", &k);
  if (s != BC_OK) return s;
  /* about 4 blocks per SM: each block first copies the 2 KB rank table to shared memory */
  char arch[16];
  int sms = 132;
  if (bci_cuda_device(ctx, arch, &sms) != BC_OK) sms = 132;
  int64_t cap = 4 * (int64_t)sms;
  int64_t gx = cdiv(nc, k->launch.threads);
  if (gx > cap) gx = cap;
  int64_t gy = nr < cap / gx ? nr : cap / gx;
  bci_arg args[] = { BCI_ARG(dst), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(od), BCI_ARG(osl), BCI_ARG(scales), BCI_ARG(src), BCI_ARG(sd),
                     BCI_ARG(*t) };
  return bci_run(ctx, NULL, k, (unsigned)(gx > 0 ? gx : 1), (unsigned)(gy > 0 ? gy : 1), 1, (unsigned)k->launch.threads, 0, stream,
                 args, 9);
}

/* the columnwise data of per-tensor and 2D-block formats: the transpose of the gathered rowwise
 * data R (comm_transpose.cu) */
static bc_status transpose(bc_ctx *ctx, const plan *p, const void *R, void *dst, void *stream) {
  const bci_kernel *k;
  bc_status s = bci_kernel_get(ctx, "bc_comm_transpose", &k);
  if (s != BC_OK) return s;
  int64_t rows = p->M, cols = p->K, tiles_c = cdiv(cols, 64), ntiles = tiles_c * cdiv(rows, 64);
  int bits = p->f->elem.bits, high_first = p->f->pack_high_first;
  /* whole 16-byte vectors along the rows of R and of the output */
  int64_t q = bits == 8 ? 16 : 32;
  int vin = bci_aligned(R, 16) && cols % q == 0, vout = bci_aligned(dst, 16) && rows % q == 0;
  int64_t gx = ntiles < 65536 ? ntiles : 65536;
  bci_arg args[] = { BCI_ARG(R), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(dst), BCI_ARG(bits), BCI_ARG(high_first), BCI_ARG(tiles_c),
                     BCI_ARG(ntiles), BCI_ARG(vin), BCI_ARG(vout) };
  return bci_run(ctx, NULL, k, (unsigned)gx, 1, 1, (unsigned)k->launch.threads, 0, stream, args, 10);
}

/* the slab sources of a gathered region: rank r's buffer at the sum of the sizes before it */
static void slab_sources(const plan *p, const size_t *size, psrc *t) {
  memset(t, 0, sizeof *t);
  t->nranks = p->W;
  size_t o = 0;
  for (int r = 0; r < p->W; r++) {
    t->row0[r] = p->row0[r];
    t->a[r] = p->a[r];
    t->s[r] = p->s[r];
    t->off[r] = (int64_t)o;
    o += size[r];
  }
  t->row0[p->W] = p->M;
}

static void offsets(const plan *p, const size_t *len, size_t *off) {
  size_t o = 0;
  for (int r = 0; r < p->W; r++) {
    off[r] = o;
    o += len[r];
  }
}

static size_t sum(const plan *p, const size_t *v) {
  size_t t = 0;
  for (int r = 0; r < p->W; r++) t += v[r];
  return t;
}

static uint64_t rows_hash(const int64_t *rows, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++)
    for (int b = 0; b < 8; b++) h = (h ^ (uint64_t)((rows[i] >> (8 * b)) & 0xFF)) * 1099511628211ull;
  return h;
}

/* the partial block amaxes of this rank's boundary block rows, gathered from every rank:
 * pall[r][2][nbc] (slot 0: r's first block row, 1: its last) */
static bc_status exchange_amax(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status s, const plan *p, const bc_tensor *x,
                               int64_t ld, float *pme, float *pall, void *stream) {
  const int me = p->me;
  const int64_t m = p->row0[me + 1] - p->row0[me];
  if (s == BC_OK) s = bci_zero32(ctx, NULL, pme, 2 * p->nbc, stream);
  if (s == BC_OK && m > 0) {
    const int64_t r0 = p->row0[me], jf = p->a[me] / p->Bm, jl = (p->a[me] + p->s[me] - 1) / p->Bm;
    int64_t lo0 = 0, hi0 = ((jf + 1) * p->Bm < r0 + m ? (jf + 1) * p->Bm : r0 + m) - r0;
    int64_t lo1 = (jl * p->Bm > r0 ? jl * p->Bm : r0) - r0, hi1 = m;
    char name[64];
    snprintf(name, sizeof name, "bc_comm_bamax__%s", bc_dtype_name(x->dtype));
    const void *in = x->data;
    int64_t K = p->K, G = p->G, nbc = p->nbc;
    bci_arg args[] = { BCI_ARG(in), BCI_ARG(ld), BCI_ARG(K), BCI_ARG(G), BCI_ARG(nbc), BCI_ARG(lo0), BCI_ARG(hi0), BCI_ARG(lo1),
                       BCI_ARG(hi1), BCI_ARG(pme) };
    s = launch_1d(ctx, name, 2 * K, stream, args, 10);
  }
  size_t off[BCI_PLACE_MAX_RANKS], len[BCI_PLACE_MAX_RANKS];
  for (int r = 0; r < p->W; r++) {
    len[r] = 2 * (size_t)p->nbc * sizeof(float);
    off[r] = (size_t)r * len[r];
  }
  bci_gather_job J = { pme, pall, off, len };
  char sg[BCI_COMM_SIG];
  snprintf(sg, sizeof sg, "%.200s [boundary amax]", sig);
  return bci_comm_gatherv(ctx, comm, sg, s, 1, &J, stream);
}

/* which (rank, slot) partial amaxes of block row j this rank's pad rows carry */
static int parts_of(const plan *p, int64_t j, int32_t *out) {
  int n = 0;
  for (int q = 0; q < p->W; q++) {
    if (q == p->me || p->row0[q + 1] == p->row0[q]) continue;
    int64_t jf = p->a[q] / p->Bm, jl = (p->a[q] + p->s[q] - 1) / p->Bm;
    if (jf == j) out[n++] = 2 * q;
    if (jl == j) out[n++] = 2 * q + 1;
  }
  return n;
}

/* What one rank sends and where the pieces land: its rows of rowwise data (and of MXFP8's
 * row-major columnwise data) gathered in place of the output (or of R, the rowwise data the
 * columnwise copy is transposed from), and its slab's block scales and transposed columnwise
 * data gathered side by side into all_* (rank r's at the sum of the sizes before it). */
typedef struct pieces {
  const void *row, *col;             /* this rank's rows: rowwise, row-major columnwise data */
  unsigned char *R;                  /* the whole rowwise data */
  const void *rs, *cd, *cs;          /* this rank's slab: rowwise scales, columnwise data and scales */
  const size_t *rs_size, *cs_size;   /* per rank: the slab buffers (their places in all_*) ... */
  const size_t *rs_send, *cs_send;   /* ... and what of them travels */
  unsigned char *all_rs, *all_cd, *all_cs;
  int swizzled;                      /* the slabs' scales are in the 128x4 swizzle (a quantized input) */
  int rs_in_place, cs_in_place;      /* the slabs' rowwise / columnwise scales were written into out's
                                      * buffer and travel in place (scales_in_place) */
} pieces;

/* A direction's block scales can be gathered in place of out's compact scale buffer, with no
 * placing kernel, when the slabs' scale buffers are bands of whole stored rows of it laid side by
 * side: no block straddles ranks, the stored rows run along the tensor's rows (row-major rowwise
 * scales; MXFP8's transposed columnwise scales), and every slab but the last fills its padding
 * rows (e.g. a multiple of 128 rows for the MX formats). Each rank then quantizes its slab's
 * scales straight into out at the sum of the slab sizes before it; what travels is unchanged
 * (each slab up to its last valid entry), and the receivers zero the rest of the others' slabs. */
static int scales_in_place(bc_ctx *ctx, const plan *p, bc_direction dir) {
  const bc_format *f = p->f;
  if (p->exchange || f->block == BC_BLOCK_TENSOR) return 0;
  bci_geom go, g;
  if (bci_geom_get(ctx, "bc_all_gather", f, p->M, p->K, dir, 0, &go) != BC_OK) return 0;
  int last = -1;
  for (int r = 0; r < p->W; r++)
    if (p->row0[r + 1] > p->row0[r]) last = r;
  size_t total = 0;
  int64_t valid_rows = 0;
  for (int r = 0; r < p->W; r++) {
    if (p->row0[r + 1] == p->row0[r]) continue;
    if (bci_geom_get(ctx, "bc_all_gather", f, p->s[r], p->K, dir, 0, &g) != BC_OK) return 0;
    if (g.scols != go.scols || (r != last && g.srows != g.svalid_rows)) return 0;
    total += g.scale_bytes;
    valid_rows += g.svalid_rows;
  }
  return total == go.scale_bytes && valid_rows == go.svalid_rows;
}

/* zero what of the slabs does not travel (past each one's last valid entry): the other ranks',
 * and this rank's own when it was copied from mine (a quantized input's buffer), not written there */
static bc_status zero_slab_tails(bc_ctx *ctx, const plan *p, unsigned char *buf, const size_t *size, const size_t *send,
                                 const void *mine, void *stream) {
  size_t o = 0;
  for (int r = 0; r < p->W; r++) {
    if ((r != p->me || mine != (const void *)(buf + o)) && size[r] > send[r]) {
      CUresult cr = bci_cu.MemsetD8Async((CUdeviceptr)(uintptr_t)(buf + o + send[r]), 0, size[r] - send[r], (CUstream)stream);
      if (cr != CUDA_SUCCESS)
        return bci_fail(ctx, BC_ERR_CUDA, "bc_all_gather: zeroing the padding of rank %d's gathered scales (cuMemsetD8Async) failed: %s",
                        r, bci_cu_error_name(cr));
    }
    o += size[r];
  }
  return BC_OK;
}

/* The payload in one group (every rank takes part whatever s says, so that no rank is left
 * waiting; a failure keeps its first message), then the assembly of out from the pieces. */
static bc_status gather_and_assemble(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status s, const plan *p, bc_qtensor *out,
                                     const pieces *pc, void *stream) {
  const bc_format *f = p->f;
  size_t off_row[BCI_PLACE_MAX_RANKS], len_row[BCI_PLACE_MAX_RANKS], off_col[BCI_PLACE_MAX_RANKS], len_col[BCI_PLACE_MAX_RANKS];
  size_t off_rs[BCI_PLACE_MAX_RANKS], off_cd[BCI_PLACE_MAX_RANKS], off_cs[BCI_PLACE_MAX_RANKS];
  for (int r = 0; r < p->W; r++) {
    off_row[r] = (size_t)p->row0[r] * p->rb;
    len_row[r] = (size_t)(p->row0[r + 1] - p->row0[r]) * p->rb;
    off_col[r] = (size_t)p->row0[r] * p->cb;
    len_col[r] = (size_t)(p->row0[r + 1] - p->row0[r]) * p->cb;
  }
  offsets(p, pc->rs_size, off_rs);
  offsets(p, p->cd, off_cd);
  offsets(p, pc->cs_size, off_cs);
  bci_gather_job jobs[5];
  int nj = 0;
  if (p->comp_row) jobs[nj++] = (bci_gather_job){ pc->row, pc->R, off_row, len_row };
  if (p->col_direct) jobs[nj++] = (bci_gather_job){ pc->col, out->columnwise_data, off_col, len_col };
  if (sum(p, pc->rs_size)) jobs[nj++] = (bci_gather_job){ pc->rs, pc->all_rs, off_rs, pc->rs_send };
  if (sum(p, p->cd)) jobs[nj++] = (bci_gather_job){ pc->cd, pc->all_cd, off_cd, p->cd };
  if (sum(p, pc->cs_size)) jobs[nj++] = (bci_gather_job){ pc->cs, pc->all_cs, off_cs, pc->cs_send };
  char sg[BCI_COMM_SIG];
  snprintf(sg, sizeof sg, "%.200s [payload]", sig);
  s = bci_comm_gatherv(ctx, comm, sg, s, nj, jobs, stream);
  if (s == BC_OK && pc->rs_in_place) s = zero_slab_tails(ctx, p, pc->all_rs, pc->rs_size, pc->rs_send, pc->rs, stream);
  if (s == BC_OK && pc->cs_in_place) s = zero_slab_tails(ctx, p, pc->all_cs, pc->cs_size, pc->cs_send, pc->cs, stream);
  if (s == BC_OK && f->block != BC_BLOCK_TENSOR) {
    psrc t;
    const int sw = pc->swizzled;
    if (p->want_row && !pc->rs_in_place) {
      slab_sources(p, pc->rs_size, &t);
      s = place(ctx, p, out->rowwise_scale_inv, pdir_of(f, BC_ROWWISE, 1, out->scale_swizzled), 1, pc->all_rs,
                pdir_of(f, BC_ROWWISE, 1, sw), &t, stream);
    }
    if (s == BC_OK && p->want_col && f->block == BC_BLOCK_1D) {
      if (!p->col_direct) {
        slab_sources(p, p->cd, &t);
        s = place(ctx, p, out->columnwise_data, pdir_of(f, BC_COLUMNWISE, 0, 0), 0, pc->all_cd, pdir_of(f, BC_COLUMNWISE, 0, 0), &t,
                  stream);
      }
      slab_sources(p, pc->cs_size, &t);
      if (s == BC_OK && !pc->cs_in_place)
        s = place(ctx, p, out->columnwise_scale_inv, pdir_of(f, BC_COLUMNWISE, 1, out->scale_swizzled), 1, pc->all_cs,
                  pdir_of(f, BC_COLUMNWISE, 1, sw), &t, stream);
    }
    if (s == BC_OK && p->want_col && f->block == BC_BLOCK_2D) {
      /* 2D blocks: the columnwise scales are the rowwise ones */
      slab_sources(p, pc->rs_size, &t);
      s = place(ctx, p, out->columnwise_scale_inv, pdir_of(f, BC_COLUMNWISE, 1, out->scale_swizzled), 1, pc->all_rs,
                pdir_of(f, BC_ROWWISE, 1, sw), &t, stream);
    }
  }
  /* per-tensor and 2D formats: the columnwise data is the transpose of the gathered rowwise data */
  if (s == BC_OK && p->derived) s = transpose(ctx, p, pc->R, out->columnwise_data, stream);
  return s;
}

/* the checks of bc_all_gather before any communication (the plan included) */
static bc_status gather_checks(bc_ctx *ctx, const char *fn, bc_comm *comm, const bc_tensor *x, const int64_t *rows,
                               bc_qtensor *out, plan *p, int64_t *ld) {
  if (!x || !rows || !out) return bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL", fn, !x ? "x" : !rows ? "rows" : "out");
  bc_status s = bci_check_format(ctx, out->format, "out->format");
  if (s != BC_OK) return s;
  if (out->stochastic_rounding)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: out->stochastic_rounding is set; the all-gather rounds to nearest (quantize "
                    "locally with bc_quantize and gather with your framework for stochastic rounding)", fn);
  if (!out->rowwise_data && !out->columnwise_data)
    return bci_fail(ctx, BC_ERR_ARG, "%s: out has no direction (rowwise_data and columnwise_data are NULL); set the buffers of the "
                    "directions to gather", fn);
  if ((s = make_plan(ctx, fn, comm, rows, out, p)) != BC_OK) return s;
  const int me = p->me;
  const int64_t m = rows[me];
  if (x->rows != m || x->cols != out->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: x is [%lld, %lld] but rank %d holds rows[%d] = %lld rows of a [%lld, %lld] tensor; x must be "
                    "[rows[rank], out->cols]", fn, (long long)x->rows, (long long)x->cols, me, me, (long long)m, (long long)p->M,
                    (long long)out->cols);
  if (out->rows != p->M)
    return bci_fail(ctx, BC_ERR_ARG, "%s: out has %lld rows but the ranks' rows sum to %lld; out must be the whole [sum(rows), cols] "
                    "tensor", fn, (long long)out->rows, (long long)p->M);
  /* the whole output's checks, as bc_quantize_cast of a [M, K] input makes them */
  bc_tensor xfull = { x->data, x->dtype, p->M, p->K, 0 };
  if (!x->data) xfull.data = (void *)(uintptr_t)256; /* a rank without rows may pass none */
  if ((s = dry_cast(ctx, &xfull, out)) != BC_OK) return s;
  if ((s = check_amax_arg(ctx, fn, out)) != BC_OK) return s;
  *ld = x->cols;
  if (m > 0 && (s = bci_check_tensor(ctx, fn, "x", x, ld)) != BC_OK) return s;
  /* every kernel of the call before any communication */
  const bci_kernel *k;
  if ((s = bci_kernel_get(ctx, "bc_comm_place", &k)) != BC_OK) return s;
  if (p->derived && (s = bci_kernel_get(ctx, "bc_comm_transpose", &k)) != BC_OK) return s;
  if (p->exchange && (s = bci_kernel_getf(ctx, &k, "bc_comm_stage__%s", bc_dtype_name(x->dtype))) != BC_OK) return s;
  if (p->exchange && (s = bci_kernel_getf(ctx, &k, "bc_comm_bamax__%s", bc_dtype_name(x->dtype))) != BC_OK) return s;
  return BC_OK;
}

static bc_status gather_hp(bc_ctx *ctx, const char *fn, bc_comm *comm, const bc_tensor *x, const int64_t *rows, bc_qtensor *out,
                           void *stream);

bc_status bc_all_gather(bc_ctx *ctx, bc_comm *comm, const bc_tensor *x, const int64_t *rows, bc_qtensor *out, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_all_gather";
  bc_status s = check_comm(ctx, fn, comm);
  if (s != BC_OK) return s;
  return gather_hp(ctx, fn, comm, x, rows, out, stream);
}

static bc_status gather_hp(bc_ctx *ctx, const char *fn, bc_comm *comm, const bc_tensor *x, const int64_t *rows, bc_qtensor *out,
                           void *stream) {
  bc_status s;
  plan P;
  const plan *p = &P;
  int64_t ld = 0;
  s = gather_checks(ctx, fn, comm, x, rows, out, &P, &ld);
  if (s != BC_OK) return bci_comm_agree(ctx, comm, fn, "", s, stream);
  const bc_format *f = out->format;
  const int me = p->me;
  const int64_t m = rows[me];
  char name[64];
  snprintf(name, sizeof name, "bc_comm_stage__%s", bc_dtype_name(x->dtype));
  char sig[BCI_COMM_SIG];
  snprintf(sig, sizeof sig, "%s fmt=%s dtype=%s cols=%lld ranks=%d rows=%016llx dirs=%d%d swizzled=%d", fn, f->name,
           bc_dtype_name(x->dtype), (long long)p->K, p->W, (unsigned long long)rows_hash(rows, p->W), p->want_row, p->want_col,
           out->scale_swizzled != 0);

  /* the workspace: [R: rowwise data, when only the columnwise copy is wanted] [my slab's rowwise
   * scales | columnwise data | columnwise scales] [gathered: all rowwise scales | all
   * columnwise data | all columnwise scales] [stage] [partial amaxes: mine | all] */
  size_t need_R = (p->comp_row && !p->want_row) ? (size_t)p->M * p->rb : 0;
  /* block scales written into out and gathered there (scales_in_place), or placed from the workspace */
  const int rs_in = p->want_row && !out->scale_swizzled && scales_in_place(ctx, p, BC_ROWWISE);
  const int cs_in = p->comp_col && !out->scale_swizzled && scales_in_place(ctx, p, BC_COLUMNWISE);
  size_t rs_off = 0, cs_off = 0;
  for (int r = 0; r < me; r++) rs_off += p->rs[r], cs_off += p->cs[r];
  size_t g_rs = rs_in ? 0 : sum(p, p->rs), g_cd = sum(p, p->cd), g_cs = cs_in ? 0 : sum(p, p->cs);
  size_t stage = (p->exchange && m > 0) ? (size_t)p->s[me] * (size_t)p->K * bc_dtype_size(x->dtype) : 0;
  size_t amaxb = p->exchange ? (size_t)(p->W + 1) * 2 * (size_t)p->nbc * sizeof(float) : 0;
  /* (per-tensor formats: a scratch word for the row cast's scale_inv where out has none) */
  size_t parts[8] = { need_R, p->rs[me] && !rs_in ? p->rs[me] : sizeof(float), p->cd[me], cs_in ? 0 : p->cs[me], g_rs, g_cd, g_cs,
                      stage };
  size_t at[9];
  at[0] = 0;
  for (int i = 0; i < 8; i++) at[i + 1] = at[i] + (parts[i] + 255) / 256 * 256;
  /* the workspace before the agreement: a rank without it fails every rank there. From then
   * on every rank enters every collective of the call whatever happens (a failure keeps its
   * first message and, on the local transport, fails the others at the next collective). */
  unsigned char *ws = NULL;
  s = bci_ws_alloc(ctx, at[8] + amaxb, stream, (void **)&ws);
  if ((s = bci_comm_agree(ctx, comm, fn, sig, s, stream)) != BC_OK) {
    bci_ws_free(ws, stream);
    return s;
  }
  unsigned char *R = p->want_row ? out->rowwise_data : ws + at[0];
  unsigned char *my_rs = ws + at[1], *my_cd = ws + at[2], *my_cs = ws + at[3];
  unsigned char *all_rs = ws + at[4], *all_cd = ws + at[5], *all_cs = ws + at[6], *stg = ws + at[7];
  if (rs_in) all_rs = out->rowwise_scale_inv, my_rs = all_rs + rs_off;
  if (cs_in) all_cs = out->columnwise_scale_inv, my_cs = all_cs + cs_off;
  float *pme = (float *)(ws + at[8]), *pall = pme + 2 * p->nbc;

  /* 1. per-tensor and two-level formats: the amax of the whole tensor */
  if (needs_amax(f)) {
    if (s == BC_OK) s = m > 0 ? bci_amax(ctx, NULL, x, out->amax, stream) : bci_zero32(ctx, NULL, out->amax, 1, stream);
    char sg[BCI_COMM_SIG];
    snprintf(sg, sizeof sg, "%.200s [amax]", sig);
    s = bci_comm_allreduce_max(ctx, comm, sg, s, out->amax, 1, stream);
    if (s == BC_OK && f->block == BC_BLOCK_TENSOR) {
      s = bci_compute_scale(ctx, NULL, f, out->amax, out->scale, out->rowwise_scale_inv, stream);
      if (s == BC_OK && p->want_col) s = bci_compute_scale(ctx, NULL, f, out->amax, out->scale, out->columnwise_scale_inv, stream);
    }
  }
  /* 2. blocks that straddle ranks: the partial amaxes of the boundary block rows */
  if (p->exchange) {
    bc_status se = exchange_amax(ctx, comm, sig, s, p, x, ld, pme, pall, stream);
    if (s == BC_OK) s = se;
  }
  /* 3. this rank's slab */
  if (s == BC_OK && m > 0) {
    bc_tensor xs = *x;
    if (p->exchange && (p->a[me] != p->row0[me] || p->s[me] != m)) {
      stage_parts sp;
      memset(&sp, 0, sizeof sp);
      const int64_t jf = p->a[me] / p->Bm, jl = (p->a[me] + p->s[me] - 1) / p->Bm;
      int64_t pad_top = p->row0[me] - p->a[me];
      if (pad_top > 0) sp.ntop = parts_of(p, jf, sp.top);
      if (p->a[me] + p->s[me] > p->row0[me] + m) sp.nbot = parts_of(p, jl, sp.bot);
      int64_t K = p->K, S = p->s[me], nbc = p->nbc, G = p->G;
      void *o = stg;
      const float *pa = pall;
      /* the rank's own rows: a 2D copy by the copy engine; the pad rows: the kernel */
      size_t es = bc_dtype_size(x->dtype);
      CUDA_MEMCPY2D cp;
      memset(&cp, 0, sizeof cp);
      cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      cp.srcDevice = (CUdeviceptr)(uintptr_t)x->data;
      cp.srcPitch = (size_t)ld * es;
      cp.dstDevice = (CUdeviceptr)(uintptr_t)(stg + (size_t)pad_top * (size_t)K * es);
      cp.dstPitch = (size_t)K * es;
      cp.WidthInBytes = (size_t)K * es;
      cp.Height = (size_t)m;
      CUresult cr = bci_cu.Memcpy2DAsync(&cp, (CUstream)stream);
      if (cr != CUDA_SUCCESS)
        s = bci_fail(ctx, BC_ERR_CUDA, "%s: copying the rank's rows into its slab (cuMemcpy2DAsync) failed: %s", fn,
                     bci_cu_error_name(cr));
      bci_arg args[] = { BCI_ARG(m), BCI_ARG(K), BCI_ARG(S), BCI_ARG(pad_top), BCI_ARG(o), BCI_ARG(pa), BCI_ARG(nbc), BCI_ARG(G),
                         BCI_ARG(sp) };
      const bci_kernel *k;
      if (s == BC_OK && (s = bci_kernel_get(ctx, name, &k)) == BC_OK) {
        /* about 4 blocks per SM: each block first copies the part lists to shared memory */
        char arch[16];
        int sms = 132;
        if (bci_cuda_device(ctx, arch, &sms) != BC_OK) sms = 132;
        int64_t cap = 4 * (int64_t)sms, gx = cdiv(K, k->launch.threads), gy, npad = S - m;
        if (gx > cap) gx = cap;
        gy = npad < cap / gx ? npad : cap / gx;
        s = bci_run(ctx, NULL, k, (unsigned)gx, (unsigned)(gy > 0 ? gy : 1), 1, (unsigned)k->launch.threads, 0, stream, args, 9);
      }
      xs = (bc_tensor){ stg, x->dtype, S, K, K };
    }
    bc_qtensor q = { f, p->s[me], p->K, NULL, NULL, NULL, NULL, out->amax, out->scale, 0, 0, 0, 0 };
    if (p->comp_row) {
      q.rowwise_data = R + (size_t)p->a[me] * p->rb;
      /* per-tensor formats: out's scale_inv, or a scratch word when only the columnwise copy is wanted */
      q.rowwise_scale_inv = (f->block == BC_BLOCK_TENSOR && out->rowwise_scale_inv) ? out->rowwise_scale_inv : (void *)my_rs;
    }
    if (p->comp_col) {
      q.columnwise_data = p->col_direct ? (unsigned char *)out->columnwise_data + (size_t)p->a[me] * p->cb : my_cd;
      q.columnwise_scale_inv = my_cs;
    }
    if (s == BC_OK) s = bci_quantize_cast(ctx, NULL, &xs, &q, stream);
  }
  /* 4. the payload, in one group, and 5. the assembly */
  pieces pc = { R + (size_t)p->row0[me] * p->rb,
                p->col_direct ? (unsigned char *)out->columnwise_data + (size_t)p->row0[me] * p->cb : NULL, R, my_rs, my_cd, my_cs,
                p->rs, p->cs, p->rs_send, p->cs_send, all_rs, all_cd, all_cs, 0, rs_in, cs_in };
  s = gather_and_assemble(ctx, comm, sig, s, p, out, &pc, stream);
  bci_ws_free(ws, stream);
  return s;
}

/* ---- the bytes a rank sends (the formula of README.md, from the same plan) ---- */

bc_status bc_all_gather_bytes(bc_ctx *ctx, const bc_format *fmt, int nranks, const int64_t *rows, int64_t cols, int directions,
                              int rank, uint64_t *bytes) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_all_gather_bytes";
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!rows || !bytes) return bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL", fn, rows ? "bytes" : "rows");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return bci_fail(ctx, BC_ERR_ARG, "%s: rank %d of %d ranks; expected nranks >= 1 and 0 <= rank < nranks", fn, rank, nranks);
  if (directions < 1 || directions > 3)
    return bci_fail(ctx, BC_ERR_ARG, "%s: directions is %d; expected BC_ROWWISE, BC_COLUMNWISE or both (a mask)", fn, directions);
  if (cols < 1) return bci_fail(ctx, BC_ERR_ARG, "%s: cols is %lld; expected >= 1", fn, (long long)cols);
  bc_comm c = { .transport = BC_TRANSPORT_LOCAL, .rank = rank, .size = nranks };
  static char dummy;
  bc_qtensor out = { fmt, 0, cols, directions & 1 ? &dummy : NULL, NULL, directions & 2 ? &dummy : NULL, NULL, NULL, NULL, 0, 0, 0, 0 };
  plan *p = malloc(sizeof *p);
  if (!p) return bci_fail(ctx, BC_ERR_NOMEM, "%s: out of memory", fn);
  s = make_plan(ctx, fn, &c, rows, &out, p);
  if (s == BC_OK) {
    uint64_t b = 0;
    const int64_t m = rows[rank];
    if (needs_amax(fmt)) b += sizeof(float);
    if (p->exchange) b += 2 * (uint64_t)p->nbc * sizeof(float);
    if (p->comp_row) b += (uint64_t)m * p->rb;
    if (p->col_direct) b += (uint64_t)m * p->cb;
    b += p->rs_send[rank] + p->cd[rank] + p->cs_send[rank];
    *bytes = b;
  }
  free(p);
  return s;
}

/* ---- all-gather of an already quantized input ----
 * Rank r's xq is its rows quantized as a tensor of their own. Where no block of a gathered
 * direction straddles ranks, the whole tensor's quantization is the ranks' pieces side by side:
 * they are gathered as they are (data, scales; per-tensor scale and NVFP4's global amax taken
 * from xq, which must agree across ranks, as bc_quantize_comm makes them) and assembled. Where
 * blocks straddle ranks, a block quantized on one rank is not the block of the whole tensor:
 * then the rowwise data is dequantized (fp32, exact) and gathered through bc_all_gather's
 * exact path, so the result is the quantization of the gathered dequantized values; the log
 * callback is told once per context. */

static bc_status gq_checks(bc_ctx *ctx, const char *fn, bc_comm *comm, const bc_qtensor *xq, const int64_t *rows, bc_qtensor *out,
                           plan *p) {
  if (!xq || !rows || !out) return bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL", fn, !xq ? "xq" : !rows ? "rows" : "out");
  bc_status s = bci_check_format(ctx, out->format, "out->format");
  if (s != BC_OK) return s;
  if (xq->format != out->format)
    return bci_fail(ctx, BC_ERR_ARG, "%s: xq's format is not out's ('%s'); the input must be quantized in the output's format", fn,
                    out->format->name);
  if (!out->rowwise_data && !out->columnwise_data)
    return bci_fail(ctx, BC_ERR_ARG, "%s: out has no direction (rowwise_data and columnwise_data are NULL)", fn);
  /* the same on every split: xq's codes travel as they were rounded, and blocks that straddle
   * ranks are quantized again to nearest */
  if (out->stochastic_rounding)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: out->stochastic_rounding is set; the gather keeps xq's codes as they were rounded "
                    "(quantize xq with stochastic rounding, and clear out's flag)", fn);
  if ((s = make_plan(ctx, fn, comm, rows, out, p)) != BC_OK) return s;
  const bc_format *f = out->format;
  const int64_t m = rows[p->me];
  if (xq->rows != m || xq->cols != out->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: xq is [%lld, %lld] but rank %d holds rows[%d] = %lld rows of a [%lld, %lld] tensor", fn,
                    (long long)xq->rows, (long long)xq->cols, p->me, p->me, (long long)m, (long long)p->M, (long long)out->cols);
  if (out->rows != p->M)
    return bci_fail(ctx, BC_ERR_ARG, "%s: out has %lld rows but the ranks' rows sum to %lld", fn, (long long)out->rows, (long long)p->M);
  /* the directions that travel: every direction out asks, except the columnwise copy of
   * per-tensor and 2D-block formats, built from the rowwise data */
  int need_row = p->comp_row, need_col = p->comp_col;
  if (p->exchange) need_col = 0; /* straddling blocks: the rowwise data is dequantized (below) */
  if ((need_row && !xq->rowwise_data && m > 0 && !p->exchange) || (need_col && !xq->columnwise_data && m > 0))
    return bci_fail(ctx, BC_ERR_ARG, "%s: xq has no %s data; format '%s' gathers it for the directions out asks (the columnwise copy "
                    "of per-tensor and 2D-block formats comes from the rowwise data)", fn, need_row && !xq->rowwise_data ? "rowwise" :
                    "columnwise", f->name);
  if (p->exchange && m > 0 && !xq->rowwise_data)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: blocks of format '%s' straddle ranks (rows not multiples of %lld), so xq is "
                    "dequantized and gathered exactly, which needs its rowwise data; xq has none (quantize xq rowwise too, or "
                    "gather from high precision with bc_all_gather)", fn, f->name, (long long)p->Bm);
  if (needs_amax(f) && (!xq->amax || !out->amax))
    return bci_fail(ctx, BC_ERR_ARG, "%s: format '%s' needs xq->amax (the amax it was quantized with) and out->amax", fn, f->name);
  if (f->block == BC_BLOCK_TENSOR && (!xq->scale || !out->scale))
    return bci_fail(ctx, BC_ERR_ARG, "%s: per-tensor format '%s' needs xq->scale and out->scale", fn, f->name);
  /* out's scale_inv is a copy of xq's (of the direction xq holds) */
  if (f->block == BC_BLOCK_TENSOR && m > 0 && !(xq->rowwise_data ? xq->rowwise_scale_inv : xq->columnwise_scale_inv))
    return bci_fail(ctx, BC_ERR_ARG, "%s: xq has no %s scale_inv; per-tensor format '%s' copies it into out's (bc_quantize_comm "
                    "writes it)", fn, xq->rowwise_data ? "rowwise" : "columnwise", f->name);
  /* the whole output's checks, as bc_quantize_cast makes them */
  bc_tensor xfull = { (void *)(uintptr_t)256, BC_FP32, p->M, p->K, 0 };
  if ((s = dry_cast(ctx, &xfull, out)) != BC_OK) return s;
  if (m > 0 && !p->exchange) {
    /* xq's own buffers, as a cast into it would check them */
    bc_qtensor t = *xq;
    t.stochastic_rounding = 0;
    bc_tensor xl = { (void *)(uintptr_t)256, BC_FP32, m, p->K, 0 };
    if (f->block == BC_BLOCK_TENSOR && !t.scale) t.scale = out->scale;
    if ((s = dry_cast(ctx, &xl, &t)) != BC_OK) return bci_fail(ctx, s, "%s: xq: %s", fn, bc_last_error(ctx));
  }
  const bci_kernel *k;
  if (p->derived && (s = bci_kernel_get(ctx, "bc_comm_transpose", &k)) != BC_OK) return s;
  return bci_kernel_get(ctx, "bc_comm_place", &k);
}

bc_status bc_all_gather_quantized(bc_ctx *ctx, bc_comm *comm, const bc_qtensor *xq, const int64_t *rows, bc_qtensor *out,
                                  void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_all_gather_quantized";
  bc_status s = check_comm(ctx, fn, comm);
  if (s != BC_OK) return s;
  plan *p = malloc(sizeof *p);
  if (!p) return bci_comm_agree(ctx, comm, fn, "", bci_fail(ctx, BC_ERR_NOMEM, "%s: out of memory", fn), stream);
  s = gq_checks(ctx, fn, comm, xq, rows, out, p);
  if (s != BC_OK) {
    free(p);
    return bci_comm_agree(ctx, comm, fn, "", s, stream);
  }
  const bc_format *f = out->format;
  const int me = p->me;
  const int64_t m = rows[me];
  if (p->exchange) {
    /* blocks straddle ranks: dequantize the rowwise data and take the exact path */
    bci_log(ctx, BC_LOG_WARN, BCI_LOG_ONCE_GATHER_FALLBACK,
            "%s: format '%s', %d ranks: the ranks' rows cut blocks of %lld rows, so the quantized inputs are dequantized (rowwise, "
            "fp32) and re-quantized exactly as bc_all_gather does; quantize the rows with bc_all_gather from high precision to "
            "avoid it (reported once per context)", fn, f->name, p->W, (long long)p->Bm);
    float *hp = NULL;
    s = bci_ws_alloc(ctx, (size_t)(m * p->K) * sizeof(float), stream, (void **)&hp);
    bc_tensor xd = { hp, BC_FP32, m, p->K, 0 };
    if (s == BC_OK && m > 0) s = bci_dequantize(ctx, NULL, xq, BC_ROWWISE, &xd, stream);
    free(p);
    if (s != BC_OK) {
      bci_ws_free(hp, stream);
      return bci_comm_agree(ctx, comm, fn, "", s, stream);
    }
    s = gather_hp(ctx, fn, comm, &xd, rows, out, stream);
    bci_ws_free(hp, stream);
    return s;
  }
  char sig[BCI_COMM_SIG];
  snprintf(sig, sizeof sig, "%s fmt=%s cols=%lld ranks=%d rows=%016llx dirs=%d%d swizzled=%d%d", fn, f->name, (long long)p->K, p->W,
           (unsigned long long)rows_hash(rows, p->W), p->want_row, p->want_col, out->scale_swizzled != 0, xq->scale_swizzled != 0);
  /* xq's scale buffers travel whole when swizzled (their last valid entry is not last) */
  const int xs = xq->scale_swizzled != 0;
  size_t rs[BCI_PLACE_MAX_RANKS] = { 0 }, cs[BCI_PLACE_MAX_RANKS] = { 0 }, rs_send[BCI_PLACE_MAX_RANKS] = { 0 },
         cs_send[BCI_PLACE_MAX_RANKS] = { 0 };
  for (int r = 0; r < p->W && f->block != BC_BLOCK_TENSOR; r++) {
    bci_geom g;
    if (!rows[r]) continue;
    if (p->comp_row && bci_geom_get(ctx, fn, f, rows[r], p->K, BC_ROWWISE, xs, &g) == BC_OK) {
      rs[r] = g.scale_bytes;
      rs_send[r] = xs ? g.scale_bytes : scale_send_bytes(&g, f->scale_bytes);
    }
    if (p->comp_col && bci_geom_get(ctx, fn, f, rows[r], p->K, BC_COLUMNWISE, xs, &g) == BC_OK) {
      cs[r] = g.scale_bytes;
      cs_send[r] = xs ? g.scale_bytes : scale_send_bytes(&g, f->scale_bytes);
    }
  }
  size_t need_R = (p->comp_row && !p->want_row) ? (size_t)p->M * p->rb : 0;
  /* compact slabs that are bands of out's scale layout travel straight into out (scales_in_place) */
  const int rs_in = !xs && p->want_row && !out->scale_swizzled && scales_in_place(ctx, p, BC_ROWWISE);
  const int cs_in = !xs && p->comp_col && !out->scale_swizzled && scales_in_place(ctx, p, BC_COLUMNWISE);
  size_t g_rs = rs_in ? 0 : sum(p, rs), g_cd = sum(p, p->cd), g_cs = cs_in ? 0 : sum(p, cs);
  size_t parts[4] = { need_R, g_rs, g_cd, g_cs }, at[5] = { 0 };
  for (int i = 0; i < 4; i++) at[i + 1] = at[i] + (parts[i] + 255) / 256 * 256;
  /* the workspace before the agreement: a rank without it fails every rank there */
  unsigned char *ws = NULL;
  s = bci_ws_alloc(ctx, at[4], stream, (void **)&ws);
  if ((s = bci_comm_agree(ctx, comm, fn, sig, s, stream)) != BC_OK) {
    bci_ws_free(ws, stream);
    free(p);
    return s;
  }
  unsigned char *R = p->want_row ? out->rowwise_data : ws;
  unsigned char *all_rs = rs_in ? out->rowwise_scale_inv : ws + at[1], *all_cd = ws + at[2];
  unsigned char *all_cs = cs_in ? out->columnwise_scale_inv : ws + at[3];
  /* per-tensor scale and NVFP4's global amax: xq's (the same on every rank); the scale_inv of
   * per-tensor formats: xq's, or on a rank without rows 1 / scale as bc_quantize computes it.
   * Nothing where xq's word is out's (rows quantized into out with out's amax and scale). Short
   * kernels that the exchange does not wait for: on the communicator's side stream, beside it
   * (on the caller's stream, they delayed the exchange by a launch each) */
  const float *csrc[4];
  float *cdst[4];
  float *outs[2] = { out->rowwise_scale_inv, out->columnwise_scale_inv };
  int nc = 0, derive[2] = { 0, 0 };
  if (needs_amax(f) && xq->amax != out->amax) csrc[nc] = xq->amax, cdst[nc++] = out->amax;
  if (f->block == BC_BLOCK_TENSOR) {
    if (xq->scale != out->scale) csrc[nc] = xq->scale, cdst[nc++] = out->scale;
    const float *si = xq->rowwise_data ? xq->rowwise_scale_inv : xq->columnwise_scale_inv;
    for (int d = 0; d < 2; d++) {
      if (!outs[d]) continue;
      if (m == 0) derive[d] = 1;
      else if (si != outs[d]) csrc[nc] = si, cdst[nc++] = outs[d];
    }
  }
  void *side = s == BC_OK && (nc || derive[0] || derive[1]) && bci_list_side_on(ctx) ? bci_comm_fork(comm, stream) : NULL;
  void *ss = side ? side : stream;
  for (int i = 0; i < nc && s == BC_OK; i++) s = bci_copy32(ctx, NULL, csrc[i], cdst[i], 1, ss);
  for (int d = 0; d < 2 && s == BC_OK; d++)
    if (derive[d]) s = bci_compute_scale(ctx, NULL, f, out->amax, out->scale, outs[d], ss);
  pieces pc = { xq->rowwise_data, xq->columnwise_data, R, xq->rowwise_scale_inv, xq->columnwise_data, xq->columnwise_scale_inv, rs, cs,
                rs_send, cs_send, all_rs, all_cd, all_cs, xs, rs_in, cs_in };
  s = gather_and_assemble(ctx, comm, sig, s, p, out, &pc, stream);
  if (side) {
    bc_status j = bci_comm_join(ctx, comm, fn, stream);
    if (s == BC_OK) s = j;
  }
  bci_ws_free(ws, stream);
  free(p);
  return s;
}
