/* comm/bc_shard.c: the sharded cast of master weights (ZeRO / FSDP), bc_shard_cast.
 *
 * A rank holds elements [s, e) of a [R, C] weight (flattened row by row). Every element's code
 * depends on its value and on its block's scale (and, for per-tensor and two-level formats, on
 * the tensor's amax), so a rank casts its elements exactly once it knows the amax of every block
 * it touches. A shard is a contiguous range: only the block bands (bh rows: the block's height in
 * the input, 1 for rowwise 1D blocks) containing its first and its last row can hold other ranks'
 * elements. Per direction ("pass") the rank computes its partial amax of those of the two bands
 * it cuts (holds some but not all of), per block column (templates/shard_bamax.cu), into its own
 * slots of a table every rank lays out the same way: [W ranks][2 bands] x (3 id words + nbc
 * amaxes); the tensor amaxes take one word per weight. ONE all-reduce MAX of the whole vector
 * (zeros elsewhere) gives every rank the others' parts. Then, per weight:
 *   interior   rows [A, B) the rank holds whole, aligned to every pass's band height: quantized
 *              straight from the shard, both directions in one read, everything written in
 *              place (all its blocks are the rank's): rowwise data (and MXFP8's untransposed
 *              columnwise data) as rows of the weight's, transposed columnwise data as a band
 *              of the weight's [C, R] rows (the kernel's row spacing), block scales as a
 *              window of the weight's layout (compact or swizzled: window_scales);
 *   direct     per pass, the rows the rank holds whole outside [A, B) in whole bands of that pass
 *              (a 1D "both" cast's rowwise pass: its bands are single rows, the interior's are
 *              the columnwise blocks' height): quantized straight from the shard in that direction
 *              and written in place as the interior is, so that its slabs are only the cut rows;
 *   slabs      per pass the band-aligned rows around the shard's first and last rows: staged as
 *              the shard's elements with zeros around them and, at one element of each cut
 *              block the rank does not hold, the block's amax over all ranks
 *              (templates/shard_stage.cu), so that the normal quantize kernels give that block's
 *              true scale; quantized into the workspace; the rank's own codes and scales placed.
 * Everything is recorded into the context's list (multi/), a few flushes a call whatever the
 * number of weights (a constant number of launches): on the communicator's side stream (of the
 * greatest priority) the zeros of the vector, the partial amaxes, the all-reduce, the group
 * amaxes and scales, the slabs and the direct rows; on the caller's stream the interiors (most of
 * the bytes): those of formats without a tensor amax from the start, beside the rest; two-level
 * formats' (NVFP4) once the all-reduce is done (they read the group amax from the vector);
 * per-tensor ones once their scale is computed. The caller's stream waits for the side stream at
 * the end. */
#include <stdlib.h>
#include <string.h>

#include "comm/bc_comm.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t down(int64_t a, int64_t m) { return a / m * m; }
static size_t align256(size_t a) { return (a + 255) / 256 * 256; }

enum { TOP = 0, BOT = 1 };

typedef struct pass {
  int on;
  bc_direction dir;
  bci_geom g;           /* of the whole weight (the destination's layout) */
  int64_t bh, bw, nbc;  /* blocks in input coordinates; nbc 0: per tensor (no block amaxes) */
  int64_t band[2];      /* first rows of the bands holding the shard's first and last rows */
  size_t tab;           /* this pass's table in the vector (floats): ids [W][2][3], then amx [W][2][nbc] */
  int64_t r0[2], nr[2]; /* the slabs (nr 0: none) */
  int64_t dr0[2], dnr[2]; /* the direct rows above and below the interior (dnr 0: none) */
  size_t hp[2], td[2], ts[2]; /* workspace: staged slab, its quantized data and scales */
  bci_sl sl[2], isl, dsl[2]; /* the compact scale layouts of the slabs', the interior's and the
                                direct rows' quantized rows */
} pass;

typedef struct wplan {
  const bc_format *f;
  int64_t R, C, s, e;
  int tensor_amax;      /* per-tensor or two-level: the tensor amax word */
  size_t amax_at;
  float *gamax;         /* the group amax the quantizes read (NULL: none): two-level formats the
                           vector's word (nothing waits for its copy to q->amax), per tensor
                           q->amax (its scale is computed from it first) */
  int64_t A, B;         /* interior rows [A, B) */
  pass p[2];            /* rowwise, columnwise */
  unsigned cap;         /* CTAs of each launch item of the short kernels (0: as many as the work) */
} wplan;

typedef struct plan {
  int W, n;
  wplan *w;
  size_t nvec;          /* floats of the all-reduce vector */
  size_t bytes;         /* workspace */
} plan;

static const char *FN = "bc_shard_cast";

/* ---- plan ---- */

static bc_status plan_pass(bc_ctx *ctx, int64_t i, const bc_qtensor *q, wplan *w, int d) {
  pass *p = &w->p[d];
  p->on = 1;
  p->dir = d ? BC_COLUMNWISE : BC_ROWWISE;
  bc_status s = bci_geom_get(ctx, FN, w->f, w->R, w->C, p->dir, q->scale_swizzled, &p->g);
  if (s != BC_OK) return bci_fail_entry(ctx, s, FN, "weight", i);
  if (w->f->block == BC_BLOCK_TENSOR) {
    p->bh = 1, p->bw = w->C, p->nbc = 0;
  } else if (d == 0) {
    p->bh = p->g.vbr, p->bw = p->g.vbc, p->nbc = cdiv(w->C, p->bw);
  } else { /* 1D columnwise: 1 x N in the view is N x 1 in the input */
    p->bh = p->g.vbc, p->bw = 1, p->nbc = w->C;
  }
  return BC_OK;
}

static bc_status check_entry(bc_ctx *ctx, int64_t i, const bc_shard *sh, const bc_qtensor *q, wplan *w) {
  const char *what = "weight";
  if (!q->format) return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q->format is NULL", FN, (long long)i);
  bc_status s = bci_check_format(ctx, q->format, "q->format");
  if (s != BC_OK) return bci_fail_entry(ctx, s, FN, what, i);
  const bc_format *f = q->format;
  if ((s = bci_comm_format_ok(ctx, FN, what, i, f)) != BC_OK) return s;
  if (q->rows < 1 || q->cols < 1 || q->rows > BCI_MAX_ELEMS / q->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q is [%lld, %lld]; expected the whole weight's shape (at least 1 x 1)", FN,
                    (long long)i, (long long)q->rows, (long long)q->cols);
  const int64_t N = q->rows * q->cols;
  if (sh->len < 0 || sh->start < 0 || sh->start > N || sh->len > N - sh->start)
    return bci_fail(ctx, BC_ERR_ARG,
                    "%s: weight %lld: the shard is [start %lld, len %lld]; expected 0 <= start and start + len <= %lld (the "
                    "weight's %lld x %lld elements)",
                    FN, (long long)i, (long long)sh->start, (long long)sh->len, (long long)N, (long long)q->rows, (long long)q->cols);
  if (sh->len > 0) {
    if (sh->dtype != BC_FP32 && sh->dtype != BC_BF16 && sh->dtype != BC_FP16)
      return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: the shard's dtype is %d; expected BC_FP32, BC_BF16 or BC_FP16", FN,
                      (long long)i, (int)sh->dtype);
    if (!sh->data || !bci_aligned(sh->data, bc_dtype_size(sh->dtype)))
      return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: the shard's data is %s; expected a device pointer to its %lld elements",
                      FN, (long long)i, sh->data ? "misaligned" : "NULL", (long long)sh->len);
  }
  const int row = q->rowwise_data != NULL, col = q->columnwise_data != NULL;
  if (!row && !col)
    return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q has no data pointer; set rowwise_data and/or columnwise_data", FN,
                    (long long)i);
  if (col && (f->block == BC_BLOCK_TENSOR || f->block == BC_BLOCK_2D))
    return bci_fail(ctx, BC_ERR_ARG,
                    "%s: weight %lld: format '%s' %s, so its columnwise data is the transpose of the rowwise data: cast rowwise "
                    "(columnwise_data NULL) and build columnwise from the gathered rowwise data",
                    FN, (long long)i, f->name, f->block == BC_BLOCK_TENSOR ? "has one scale per tensor" : "scales 2D blocks");
  if ((row && !q->rowwise_scale_inv) || (col && !q->columnwise_scale_inv))
    return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q->%s_scale_inv is NULL; every direction cast needs its scales", FN,
                    (long long)i, row && !q->rowwise_scale_inv ? "rowwise" : "columnwise");
  const size_t sa = f->block == BC_BLOCK_TENSOR ? 4 : (size_t)f->scale_bytes;
  if ((row && !bci_aligned(q->rowwise_scale_inv, sa)) || (col && !bci_aligned(q->columnwise_scale_inv, sa)))
    return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q->%s_scale_inv is misaligned; format '%s' stores %zu-byte scales: pass a "
                    "pointer aligned to %zu bytes", FN, (long long)i, row && !bci_aligned(q->rowwise_scale_inv, sa) ? "rowwise" : "columnwise",
                    f->name, sa, sa);
  if (f->block == BC_BLOCK_TENSOR || f->rule == BCI_RULE_TWO_LEVEL) {
    if (!q->amax || !bci_aligned(q->amax, 4))
      return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q->amax is %s; format '%s' needs a device fp32[1] for the group's amax",
                      FN, (long long)i, q->amax ? "misaligned" : "NULL", f->name);
    if (f->block == BC_BLOCK_TENSOR && (!q->scale || !bci_aligned(q->scale, 4)))
      return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q->scale is %s; format '%s' needs a device fp32[1] (%s)", FN,
                      (long long)i, q->scale ? "misaligned" : "NULL", f->name,
                      sh->given_scale ? "the given scale" : "written with the group's scale");
  }
  if (q->stochastic_rounding)
    return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: stochastic rounding is not offered for the sharded cast; clear "
                    "q->stochastic_rounding", FN, (long long)i);
  if (sh->given_scale && f->block != BC_BLOCK_TENSOR)
    return bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: given_scale is set, but format '%s' scales blocks (a given scale is for "
                    "per-tensor formats); clear it", FN, (long long)i, f->name);
  memset(w, 0, sizeof *w);
  w->f = f;
  w->R = q->rows, w->C = q->cols;
  w->s = sh->start, w->e = sh->start + sh->len;
  w->tensor_amax = f->block == BC_BLOCK_TENSOR || f->rule == BCI_RULE_TWO_LEVEL;
  if (row && (s = plan_pass(ctx, i, q, w, 0)) != BC_OK) return s;
  if (col && (s = plan_pass(ctx, i, q, w, 1)) != BC_OK) return s;
  return BC_OK;
}

/* the regions of a weight with a shard, and the workspace they take (geometry checked) */
static bc_status plan_regions(bc_ctx *ctx, int64_t i, const bc_shard *sh, wplan *w, size_t *bytes) {
  const int64_t R = w->R, C = w->C, s = w->s, e = w->e;
  if (s == e) return BC_OK;
  int64_t H = 1;
  for (int d = 0; d < 2; d++)
    if (w->p[d].on && w->p[d].bh > H) H = w->p[d].bh;
  const int64_t rs = s / C, rl = (e - 1) / C;    /* the shard's first and last rows */
  const int64_t rf = cdiv(s, C), re = e / C;     /* rows held whole: [rf, re) */
  w->A = cdiv(rf, H) * H;
  w->B = re == R ? R : down(re, H);
  if (w->A >= w->B) w->A = w->B = 0;
  const size_t es = bc_dtype_size(sh->dtype);
  const int interior = w->B > w->A;
  for (int d = 0; d < 2; d++) {
    pass *p = &w->p[d];
    if (!p->on) continue;
    p->band[TOP] = down(rs, p->bh);
    p->band[BOT] = down(rl, p->bh);
    const int64_t end = p->band[BOT] + p->bh < R ? p->band[BOT] + p->bh : R;
    /* the rows held whole in whole bands of this pass: [Ap, Bp) (Ap <= A and B <= Bp: the
     * interior's bands are whole bands of every pass); of them, those outside [A, B) are direct */
    const int64_t Ap = cdiv(rf, p->bh) * p->bh, Bp = re == R ? R : down(re, p->bh);
    p->dnr[TOP] = p->dnr[BOT] = 0;
    if (interior || Ap < Bp) { /* without an interior, [Ap, Bp) is all direct (as if A = B = Bp) */
      const int64_t a = interior ? w->A : Bp, b = interior ? w->B : Bp;
      p->r0[TOP] = p->band[TOP], p->nr[TOP] = Ap - p->band[TOP];
      p->dr0[TOP] = Ap, p->dnr[TOP] = a - Ap;
      p->dr0[BOT] = b, p->dnr[BOT] = Bp - b;
      p->r0[BOT] = Bp, p->nr[BOT] = end - Bp;
    } else {
      p->r0[TOP] = p->band[TOP], p->nr[TOP] = end - p->band[TOP];
      p->nr[BOT] = 0;
    }
    for (int k = 0; k < 2; k++) {
      if (p->dnr[k] > 0 && d == 1) /* the columnwise pass's bands are the tallest */
        return bci_fail(ctx, BC_ERR_INTERNAL, "%s: weight %lld: direct columnwise rows planned (bc_shard.c: plan_regions)", FN,
                        (long long)i);
      p->dnr[k] = p->dnr[k] > 0 ? p->dnr[k] : 0;
      p->nr[k] = p->nr[k] > 0 ? p->nr[k] : 0;
      bci_geom tg;
      bc_status st;
      if (p->dnr[k]) { /* direct rows: their compact scale layout */
        if ((st = bci_geom_get(ctx, FN, w->f, p->dnr[k], C, p->dir, 0, &tg)) != BC_OK) return bci_fail_entry(ctx, st, FN, "weight", i);
        p->dsl[k] = tg.sl;
      }
      if (p->nr[k]) { /* a slab: staged rows, their quantized data and scales */
        if ((st = bci_geom_get(ctx, FN, w->f, p->nr[k], C, p->dir, 0, &tg)) != BC_OK) return bci_fail_entry(ctx, st, FN, "weight", i);
        p->hp[k] = *bytes, *bytes += align256((size_t)(p->nr[k] * C) * es);
        p->td[k] = *bytes, *bytes += align256(tg.data_bytes);
        p->ts[k] = *bytes, *bytes += align256(w->f->block == BC_BLOCK_TENSOR ? 4 : tg.scale_bytes);
        p->sl[k] = tg.sl;
      }
    }
    if (interior) {
      bci_geom tg;
      bc_status st = bci_geom_get(ctx, FN, w->f, w->B - w->A, C, p->dir, 0, &tg);
      if (st != BC_OK) return bci_fail_entry(ctx, st, FN, "weight", i);
      p->isl = tg.sl;
    }
  }
  return BC_OK;
}

/* ---- launches ---- */

static unsigned grid(int64_t work, unsigned threads) {
  int64_t g = cdiv(work > 0 ? work : 1, threads);
  return (unsigned)(g < 8192 ? g : 8192);
}

/* the short kernels' grid (their loops stride over it) within w->cap CTAs: beside the interiors
 * (bc_shard_cast) they take few of the SMs' slots, which the interiors' blocks would fill */
static void cap_grid(const wplan *w, unsigned *gx, unsigned *gy) {
  if (!w->cap) return;
  if (*gx > w->cap) *gx = w->cap;
  const unsigned m = w->cap / *gx;
  if (*gy > m) *gy = m ? m : 1;
}

/* whether the band of rows [b, b + bh) holds elements outside the shard [s, e) */
static int band_cut(const wplan *w, const pass *p, int64_t b) {
  const int64_t end = b + p->bh < w->R ? b + p->bh : w->R;
  return w->s > b * w->C || w->e < end * w->C;
}

static bc_status rec_bamax(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, const pass *p, float *vec, int rank,
                           int W, void *stream) {
  const bci_kernel *kk;
  bc_status s = bci_kernel_getf(ctx, &kk, "bc_shard_bamax__%s", bc_dtype_name(sh->dtype));
  if (s != BC_OK) return s;
  const void *in = sh->data;
  int64_t R = w->R, C = w->C, s0 = w->s, e = w->e, bh = p->bh, bw = p->bw, nbc = p->nbc, b0 = p->band[TOP], b1 = p->band[BOT];
  float *ids = vec + p->tab + (size_t)rank * 6;
  float *amx = vec + p->tab + (size_t)W * 6 + (size_t)rank * 2 * (size_t)nbc;
  /* only the bands the shard cuts (holds some but not all of): nobody else holds elements of
   * the others, and nobody looks them up (shard_stage.cu injects amaxes at elements the rank
   * does not hold); their slots stay 0, matching no band. A weight held whole reads nothing here
   * (35 MB of 128-row bands for rank 3 of bench_shard's model) */
  const int cut0 = band_cut(w, p, b0), cut1 = b1 != b0 && band_cut(w, p, b1);
  int nb = cut0 + cut1;
  if (!nb) return BC_OK;
  if (!cut0) b0 = b1, ids += 3, amx += nbc; /* band 1 alone: in its own slot */
  bci_arg args[] = { BCI_ARG(in), BCI_ARG(s0), BCI_ARG(e), BCI_ARG(R), BCI_ARG(C), BCI_ARG(bh), BCI_ARG(bw), BCI_ARG(nbc),
                     BCI_ARG(b0), BCI_ARG(b1), BCI_ARG(nb), BCI_ARG(amx), BCI_ARG(ids) };
  unsigned t = (unsigned)kk->launch.threads;
  unsigned gx = grid(nb * C, t), gy = (unsigned)cdiv(bh, 32); /* BC_BAMAX_ROWS rows a thread */
  cap_grid(w, &gx, &gy);
  return bci_run(ctx, k, kk, gx, gy, 1, t, 0, stream, args, 13);
}

static bc_status rec_stage(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, const pass *p, int which, const float *vec,
                           int W, void *out, void *stream) {
  const bci_kernel *kk;
  bc_status s = bci_kernel_getf(ctx, &kk, "bc_shard_stage__%s", bc_dtype_name(sh->dtype));
  if (s != BC_OK) return s;
  const void *in = sh->data;
  int64_t R = w->R, C = w->C, s0 = w->s, e = w->e, r0 = p->r0[which], nr = p->nr[which], bh = p->bh, bw = p->bw, nbc = p->nbc;
  const float *ids = vec + p->tab, *amx = vec + p->tab + (size_t)W * 6;
  int nslots = nbc > 0 ? 2 * W : 0;
  bci_arg args[] = { BCI_ARG(in), BCI_ARG(s0), BCI_ARG(e), BCI_ARG(R), BCI_ARG(C), BCI_ARG(r0), BCI_ARG(nr), BCI_ARG(bh),
                     BCI_ARG(bw), BCI_ARG(nbc), BCI_ARG(ids), BCI_ARG(amx), BCI_ARG(nslots), BCI_ARG(out) };
  unsigned t = (unsigned)kk->launch.threads;
  /* a thread takes BC_STAGE_ROWS (16) slab rows at a time (shard_stage.cu); a grid row per group
   * where the cap allows (a block per slab row: 13,440 short blocks, 46 us for fp8_block_1x128
   * both in bench_shard on the H200) */
  const int64_t y = cdiv(nr, 16);
  unsigned gx = grid(C, t), gy = (unsigned)(y < 65535 ? y : 65535);
  cap_grid(w, &gx, &gy);
  return bci_run(ctx, k, kk, gx, gy, 1, t, 0, stream, args, 14);
}

/* The stages of a weight's launches (the list launches stage by stage, one launch per kernel and
 * stage for all weights): fixed per step, so that the weights' launches of one step share
 * launches whatever each weight needs. The slabs' and the interior's quantizes are independent,
 * and so are all placements (their bytes are disjoint: regions meet at even rows). */
enum { ST_AMAX = 0, ST_STAGE = 2, ST_QUANT = 3, ST_PLACE = 8 };

/* the rank's codes (do_data) and block scales of the quantized region rows [r0, r0 + nr): a
 * record for the data (rows x 16-byte pieces) and one for the scales, both at ST_PLACE */
static bc_status rec_place(bc_ctx *ctx, bci_sink *k, const wplan *w, const pass *p, int64_t r0, int64_t nr, bci_sl tsl,
                           const void *tdata, void *ddata, int do_data, const void *tscale, void *dscale, void *stream) {
  const bc_format *f = w->f;
  int sbytes = f->block == BC_BLOCK_TENSOR || !tscale ? 0 : f->scale_bytes;
  if (!do_data && !sbytes) return BC_OK;
  bc_status s;
  const bci_kernel *kk;
  if ((s = bci_kernel_get(ctx, "bc_shard_place", &kk)) != BC_OK) return s;
  bci_sl dsl = p->g.sl;
  int64_t R = w->R, C = w->C, s0 = w->s, e = w->e;
  int bits = f->elem.bits, high_first = f->pack_high_first, col = p->dir == BC_COLUMNWISE;
  int mode = col && p->g.data_is_view, vbr = p->g.vbr, vbc = p->g.vbc ? p->g.vbc : 1, per_row = tsl.per_row;
  unsigned t = (unsigned)kk->launch.threads;
  for (int dd = 1; dd >= 0 && s == BC_OK; dd--) {
    if (dd ? !do_data : !sbytes) continue;
    int sb = dd ? 0 : sbytes;
    bci_arg args[] = { BCI_ARG(tdata), BCI_ARG(ddata), BCI_ARG(tscale), BCI_ARG(dscale), BCI_ARG(tsl), BCI_ARG(dsl),
                       BCI_ARG(s0), BCI_ARG(e), BCI_ARG(R), BCI_ARG(C), BCI_ARG(r0), BCI_ARG(nr), BCI_ARG(bits),
                       BCI_ARG(high_first), BCI_ARG(mode), BCI_ARG(dd), BCI_ARG(col), BCI_ARG(vbr), BCI_ARG(vbc),
                       BCI_ARG(per_row), BCI_ARG(sb) };
    /* a thread per (data row, piece slot) or (scale row, entry) (shard_place.cu), ~4 a thread */
    const int64_t rb = (mode ? nr : C) * bits / 8;
    const int64_t units = dd ? (mode ? C : nr) * (rb / 16 + 2) : tsl.lrows * tsl.lcols;
    unsigned ux = grid(cdiv(units, 4), t), uy = 1;
    /* data and scales in one stage (one launch for all placements: their bytes are disjoint) */
    if (k) k->stage = ST_PLACE;
    cap_grid(w, &ux, &uy);
    s = bci_run(ctx, k, kk, ux, uy, 1, t, 0, stream, args, 21);
  }
  return s;
}

static uint8_t *at_bytes(void *p, size_t off) { return (uint8_t *)p + off; }

/* the quantize of rows [r0, r0 + nr) of a weight from x (those rows, dense) into q's layout, or
 * (block formats, dst) into the places dst describes */
static bc_status rec_quantize(bc_ctx *ctx, bci_sink *k, const wplan *w, const bc_qtensor *qw, const bc_tensor *x, bc_qtensor *t,
                              const bci_qdst *dst, void *stream) {
  t->format = w->f;
  t->rows = x->rows, t->cols = x->cols;
  t->scale_swizzled = 0;
  t->stochastic_rounding = 0;
  t->amax = w->tensor_amax ? w->gamax : NULL;
  t->scale = w->f->block == BC_BLOCK_TENSOR ? qw->scale : NULL;
  if (dst) return bci_quantize_block_into(ctx, k, x, t, dst, stream);
  return w->tensor_amax ? bci_quantize_cast(ctx, k, x, t, stream) : bci_quantize(ctx, k, x, t, stream);
}

/* The block scales of a region the rank holds whole (rows [a, ...) in whole bands of the pass: the
 * interior, direct rows), of compact layout rsl, written straight into the whole weight's scale
 * buffer (all the region's blocks are the rank's): a window of its layout (the weight's ld, the
 * region's extent as the padded one: no padding written; swizzled, the offset of its first entry
 * into that entry's atom), and where the window begins: the entry of the block at row a, column 0
 * (as shard_place.cu maps entries), or swizzled the first entry of its atom. */
static void *window_scales(const wplan *w, const pass *p, int64_t a, const bci_sl *rsl, void *dscale, bci_sl *sl) {
  const bci_sl *d = &p->g.sl;
  const int64_t vbr = p->g.vbr, vbc = p->g.vbc ? p->g.vbc : 1;
  const int64_t r0 = p->dir == BC_COLUMNWISE ? 0 : rsl->per_row ? a : a / vbr;
  const int64_t c0 = p->dir == BC_COLUMNWISE ? a / vbc : 0;
  const int64_t ro = d->order == 2 ? r0 % 128 : 0, co = d->order == 2 ? c0 % 4 : 0;
  const int32_t order = d->order == 2 ? BCI_SL_SWZ_WINDOW(ro, co) : d->order;
  *sl = (bci_sl){ d->ld, rsl->lrows, rsl->lcols, rsl->lrows, rsl->lcols, order, rsl->per_row };
  return (uint8_t *)dscale + bci_sl_offset(d, r0 - ro, c0 - co) * w->f->scale_bytes;
}

/* a quantize recorded more launches than the stages reserved for it (ST_QUANT .. ST_PLACE - 1) */
static bc_status quant_stages_fail(bc_ctx *ctx, const bci_sink *k) {
  return bci_fail(ctx, BC_ERR_INTERNAL, "%s: a quantize took %d launches, more than the %d stages reserved for it (bc_shard.c: ST_PLACE)",
                  FN, k->stage - ST_QUANT, ST_PLACE - ST_QUANT);
}

/* Direction d's scales for a region from row a: the tensor's own (per-tensor scaling), or a window of
 * the weight's block scales (window_scales) that dst carries to the kernels. */
static void *region_scales(const wplan *w, int d, int64_t a, const bci_sl *rsl, void *scale, bci_qdst *dst) {
  if (w->f->block == BC_BLOCK_TENSOR) return scale;
  dst->sl_set[d] = 1;
  return window_scales(w, &w->p[d], a, rsl, scale, &dst->sl[d]);
}

/* A region the rank holds whole, rows [a, b) in whole bands of the passes in `on` (bit d: pass
 * d), quantized in one read and written in place: the rowwise data (and MXFP8's columnwise data) as
 * dense rows of the weight's, transposed columnwise data as a band of columns of the weight's
 * [C, R] rows, block scales as a window of the weight's (window_scales; sl[d]: the compact layouts
 * of the region's own quantized rows). */
static bc_status rec_region(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, bc_qtensor *q, int64_t a, int64_t b,
                            int on, const bci_sl *sl[2], void *stream) {
  const bc_format *f = w->f;
  const size_t es = bc_dtype_size(sh->dtype);
  bc_tensor x = { (void *)((const uint8_t *)sh->data + (size_t)(a * w->C - w->s) * es), sh->dtype, b - a, w->C, w->C };
  bc_qtensor t;
  memset(&t, 0, sizeof t);
  bci_qdst dst;
  memset(&dst, 0, sizeof dst);
  const int bits = f->elem.bits;
  const size_t off = (size_t)(a * w->C) * (size_t)bits / 8;
  if (on & 1) {
    t.rowwise_data = at_bytes(q->rowwise_data, off);
    t.rowwise_scale_inv = region_scales(w, 0, a, sl[0], q->rowwise_scale_inv, &dst);
  }
  if (on & 2) {
    if (w->p[1].g.data_is_view) {
      t.columnwise_data = at_bytes(q->columnwise_data, (size_t)a * (size_t)bits / 8);
      dst.col_ld = w->R * bits / 8;
    } else {
      t.columnwise_data = at_bytes(q->columnwise_data, off);
    }
    t.columnwise_scale_inv = region_scales(w, 1, a, sl[1], q->columnwise_scale_inv, &dst);
  }
  k->stage = ST_QUANT;
  bc_status s = rec_quantize(ctx, k, w, q, &x, &t, f->block == BC_BLOCK_TENSOR ? NULL : &dst, stream);
  if (s == BC_OK && k->stage > ST_PLACE) s = quant_stages_fail(ctx, k);
  return s;
}

/* The interior [A, B): both directions in one read. It shares no byte with the slabs or the
 * direct rows: rowwise data meets them at a row boundary (a 4-bit row has an even length),
 * transposed data at columns A and B that are multiples of every pass's band height (or the end),
 * and its scales are its own blocks' (a window without padding); so it may run beside their
 * kernels (bc_shard_cast). */
static bc_status rec_interior(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, bc_qtensor *q, void *stream) {
  if (w->B <= w->A) return BC_OK;
  const int on = (w->p[0].on ? 1 : 0) | (w->p[1].on ? 2 : 0);
  const bci_sl *sl[2] = { &w->p[0].isl, &w->p[1].isl };
  return rec_region(ctx, k, sh, w, q, w->A, w->B, on, sl, stream);
}

/* The direct rows of each pass, in that direction alone: they meet the interior and the slabs at
 * row boundaries, in whole blocks of their pass. Recorded with the slabs (after the all-reduce,
 * beside the interior): bench_shard on an H200 (tests/bench/results/2026-11-29-h200-chain-bound.md)
 * ran fp8_block_1x128 "both" 0.229 -> 0.225 ms with them there, 0.224 with the interiors, where
 * NVFP4's step lost 18 us (the two-level formats' interiors start after the all-reduce). */
static bc_status rec_direct(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, bc_qtensor *q, void *stream) {
  bc_status s = BC_OK;
  for (int d = 0; d < 2 && s == BC_OK; d++)
    for (int j = 0; j < 2 && s == BC_OK; j++) {
      const pass *p = &w->p[d];
      if (!p->on || !p->dnr[j]) continue;
      const bci_sl *sl[2] = { &p->dsl[j], &p->dsl[j] };
      s = rec_region(ctx, k, sh, w, q, p->dr0[j], p->dr0[j] + p->dnr[j], 1 << d, sl, stream);
    }
  return s;
}

/* the group's amax and the scale (per tensor: every rank writes the same), after the all-reduce */
static bc_status rec_scales(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, bc_qtensor *q, const float *vec,
                            void *stream) {
  if (!w->tensor_amax) return BC_OK;
  k->stage = ST_AMAX;
  bc_status s = bci_copy32(ctx, k, vec + w->amax_at, q->amax, 1, stream);
  if (s == BC_OK && w->f->block == BC_BLOCK_TENSOR && !sh->given_scale)
    s = bci_compute_scale(ctx, k, w->f, q->amax, q->scale, (float *)q->rowwise_scale_inv, stream);
  return s;
}

/* the slabs: staged, quantized, placed (after rec_scales) */
static bc_status rec_slabs(bc_ctx *ctx, bci_sink *k, const bc_shard *sh, const wplan *w, bc_qtensor *q, float *vec, int W,
                           void *ws, void *stream) {
  bc_status s = BC_OK;
  const bc_format *f = w->f;
  if (w->s == w->e) {
    if (f->block == BC_BLOCK_TENSOR && sh->given_scale) { /* scale_inv from the given scale: a cast of one zero */
      float *z = (float *)ws; /* the workspace's first word is a zero (the host zeroes it with the vector) */
      bc_tensor x = { z, BC_FP32, 1, 1, 1 };
      bc_qtensor t;
      memset(&t, 0, sizeof t);
      t.rowwise_data = at_bytes(ws, 64), t.rowwise_scale_inv = q->rowwise_scale_inv;
      k->stage = ST_QUANT;
      s = rec_quantize(ctx, k, w, q, &x, &t, NULL, stream);
    }
    return s;
  }
  /* the slabs */
  for (int d = 0; d < 2 && s == BC_OK; d++) {
    const pass *p = &w->p[d];
    for (int j = 0; j < 2 && s == BC_OK && p->on; j++)
      if (p->nr[j] && (k->stage = ST_STAGE)) s = rec_stage(ctx, k, sh, w, p, j, vec, W, at_bytes(ws, p->hp[j]), stream);
  }
  /* the slabs' quantizes and placements, one direction each */
  for (int d = 0; d < 2 && s == BC_OK; d++) {
    const pass *p = &w->p[d];
    for (int j = 0; j < 2 && s == BC_OK && p->on; j++) {
      if (!p->nr[j]) continue;
      bc_tensor x = { at_bytes(ws, p->hp[j]), sh->dtype, p->nr[j], w->C, w->C };
      bc_qtensor t;
      memset(&t, 0, sizeof t);
      void *sc = f->block == BC_BLOCK_TENSOR ? (d ? q->columnwise_scale_inv : q->rowwise_scale_inv) : (void *)at_bytes(ws, p->ts[j]);
      if (d == 0) t.rowwise_data = at_bytes(ws, p->td[j]), t.rowwise_scale_inv = sc;
      else t.columnwise_data = at_bytes(ws, p->td[j]), t.columnwise_scale_inv = sc;
      k->stage = ST_QUANT;
      s = rec_quantize(ctx, k, w, q, &x, &t, NULL, stream);
      if (s == BC_OK && k->stage > ST_PLACE) s = quant_stages_fail(ctx, k);
      if (s == BC_OK && (k->stage = ST_PLACE))
        s = rec_place(ctx, k, w, p, p->r0[j], p->nr[j], p->sl[j], at_bytes(ws, p->td[j]), d ? q->columnwise_data : q->rowwise_data, 1,
                      sc, d ? q->columnwise_scale_inv : q->rowwise_scale_inv, stream);
    }
  }
  return s;
}

/* ---- the call ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

bc_status bc_shard_cast(bc_ctx *ctx, bc_comm *comm, int64_t n, const bc_shard *shards, bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!comm)
    return bci_fail(ctx, BC_ERR_ARG, "%s: argument 'comm' is NULL; expected a communicator (bc_comm_create_local, bc_comm_create_nccl)",
                    FN);
  bc_status s = BC_OK;
  if (n < 0 || n > 0x7FFFFFFF)
    s = bci_fail(ctx, BC_ERR_ARG, "%s: n is %lld; expected the number of weights (0 to 2^31 - 1)", FN, (long long)n);
  else if (n > 0 && (!shards || !q))
    s = bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL; expected an array of %lld entries", FN, shards ? "q" : "shards",
                 (long long)n);
  plan P;
  memset(&P, 0, sizeof P);
  P.W = comm->size;
  P.n = (int)(s == BC_OK ? n : 0);
  if (s == BC_OK && n > 0 && !(P.w = calloc((size_t)n, sizeof *P.w)))
    s = bci_fail(ctx, BC_ERR_NOMEM, "%s: out of memory for the plan of %lld weights", FN, (long long)n);
  /* the vector: the tensor amaxes, then each blocked pass's table; the workspace: one zero word,
   * then the regions */
  uint64_t h = 1469598103934665603ull;
  P.bytes = 256;
  for (int64_t i = 0; i < P.n && s == BC_OK; i++) {
    wplan *w = &P.w[i];
    if ((s = check_entry(ctx, i, &shards[i], &q[i], w)) != BC_OK) break;
    if (w->tensor_amax) w->amax_at = P.nvec++;
    for (int d = 0; d < 2; d++) {
      pass *p = &w->p[d];
      if (!p->on || !p->nbc) continue;
      p->tab = P.nvec;
      P.nvec += (size_t)P.W * 2 * (3 + (size_t)p->nbc);
    }
    s = plan_regions(ctx, i, &shards[i], w, &P.bytes);
    int64_t key[5] = { w->R, w->C, w->p[0].on, w->p[1].on, q[i].scale_swizzled };
    h = fnv(fnv(h, w->f->name, strlen(w->f->name)), key, sizeof key);
  }
  char sig[BCI_COMM_SIG];
  snprintf(sig, sizeof sig, "%s n=%lld vec=%zu layout=%016llx", FN, (long long)n, P.nvec, (unsigned long long)h);
  /* the workspace before the agreement: a rank without it fails every rank there (over NCCL a
   * rank that left after the agreement would leave the others in the all-reduce) */
  void *ws = NULL;
  float *vec = NULL;
  size_t vbytes = align256(P.nvec * sizeof(float) + 4);
  if (s == BC_OK && P.n > 0) {
    s = bci_ws_alloc(ctx, vbytes + P.bytes, stream, &ws);
    if (s == BC_OK) {
      vec = (float *)ws;
      ws = at_bytes(ws, vbytes);
    }
  }
  if ((s = bci_comm_agree(ctx, comm, FN, sig, s, stream)) != BC_OK || P.n == 0) {
    if (vec) bci_ws_free(vec, stream);
    free(P.w);
    return s;
  }
  /* Two streams: the interiors of the weights whose codes need no group amax (most of the
   * bytes: their blocks are all the rank's) on the caller's; the short kernels (partial amaxes,
   * slabs, placements), the all-reduce and what waits for it on the communicator's side stream,
   * of the context's greatest priority, so that their blocks are dispatched as the interiors'
   * retire instead of after them (nothing they write is the interiors': rec_interior). The
   * caller's stream waits for the side stream at the end. Without a side stream, all of it in
   * this order on the caller's stream. */
  void *side = bci_list_side_on(ctx) ? bci_comm_fork(comm, stream) : NULL;
  void *cs = side ? side : stream;
  /* zeros on the side stream (the interiors that start at once do not read them): the vector
   * (other ranks' slots stay 0) and the workspace's first word after it, one memset. A rank
   * that fails here still takes part in the all-reduce below */
  s = bci_cuda_memset32(ctx, vec, 0u, vbytes / 4 + 1, cs);
  for (int64_t i = 0; i < P.n; i++) {
    wplan *w = &P.w[i];
    w->gamax = !w->tensor_amax ? NULL : w->f->block == BC_BLOCK_TENSOR ? q[i].amax : vec + w->amax_at;
  }
  if (side) {
    /* each short kernel's item within half an SM count of CTAs: bench_shard on an H100, same run
     * (tests/bench/results/2026-11-27-shard-side-stream.md): fp8_block_1x128 both 0.311 ms
     * uncapped, 0.302 at sms / 2, 0.351 at sms / 4, 0.70 at sms / 16 (the slabs' chain then
     * outlasts the interior); mxfp4 both 0.283, 0.267, 0.276, 0.52 */
    char arch[16];
    int sms = 0;
    if (bci_cuda_device(ctx, arch, &sms) == BC_OK && sms > 0)
      for (int64_t i = 0; i < P.n; i++) P.w[i].cap = (unsigned)(sms / 2 > 1 ? sms / 2 : 1);
  }
  /* 1: the partial amaxes */
  if (s == BC_OK) s = bci_list_begin(ctx, FN, n, shards, "shards");
  if (s == BC_OK) {
    for (int64_t i = 0; i < P.n && s == BC_OK; i++) {
      const wplan *w = &P.w[i];
      if (w->s == w->e) continue;
      bci_sink *k = bci_list_item(ctx, i);
      if (w->tensor_amax) {
        bc_tensor x = { (void *)shards[i].data, shards[i].dtype, 1, w->e - w->s, w->e - w->s };
        s = bci_amax_range_fold(ctx, k, &x, 0, w->e - w->s, vec + w->amax_at, cs); /* the vector is zeroed */
      }
      /* both passes' partial amaxes in one stage (one launch: they fill disjoint slots) */
      for (int d = 0; d < 2 && s == BC_OK; d++) {
        if (!w->p[d].on || !w->p[d].nbc) continue;
        k->stage = ST_AMAX;
        s = rec_bamax(ctx, k, &shards[i], w, &w->p[d], vec, comm->rank, P.W, cs);
      }
      if (s != BC_OK) s = bci_fail_entry(ctx, s, FN, "weight", i);
    }
    if (s == BC_OK) s = bci_list_flush(ctx, FN, cs);
    s = bci_list_end(ctx, s);
  }
  /* the interiors that need no group amax, on the caller's stream */
  if (s == BC_OK) s = bci_list_begin(ctx, FN, n, shards, "shards");
  if (s == BC_OK) {
    for (int64_t i = 0; i < P.n && s == BC_OK; i++) {
      const wplan *w = &P.w[i];
      if (w->tensor_amax || w->B <= w->A) continue;
      s = rec_interior(ctx, bci_list_item(ctx, i), &shards[i], w, &q[i], stream);
      if (s != BC_OK) s = bci_fail_entry(ctx, s, FN, "weight", i);
    }
    if (s == BC_OK) s = bci_list_flush(ctx, FN, stream);
    s = bci_list_end(ctx, s);
  }
  /* the one collective (a rank that failed still takes part) */
  s = bci_comm_allreduce_max(ctx, comm, sig, s, vec, (int64_t)P.nvec, cs);
  /* 2: the group amaxes and scales (0); the interiors that wait for them on the caller's stream
   * (1, once it waits for the side stream so far); the slabs on the side stream (2). Two-level
   * formats read the group amax from the vector: without a per-tensor interior among the late
   * ones, those go first and the scales beside them */
  int late = 0, late_scaled = 0; /* interiors that wait for the group amax; of them, for a scale */
  for (int64_t i = 0; i < P.n; i++) {
    const wplan *w = &P.w[i];
    late += w->tensor_amax && w->B > w->A;
    late_scaled += w->tensor_amax && w->B > w->A && w->f->block == BC_BLOCK_TENSOR;
  }
  static const int scales_first[3] = { 0, 1, 2 }, interiors_first[3] = { 1, 0, 2 };
  const int *order = late && !late_scaled ? interiors_first : scales_first;
  for (int o = 0; o < 3 && s == BC_OK; o++) {
    const int phase = order[o];
    if (phase == 1 && !late) continue;
    if (phase == 1 && side) s = bci_comm_join(ctx, comm, FN, stream);
    if (s == BC_OK) s = bci_list_begin(ctx, FN, n, shards, "shards");
    if (s != BC_OK) break;
    for (int64_t i = 0; i < P.n && s == BC_OK; i++) {
      bci_sink *k = bci_list_item(ctx, i);
      const wplan *w = &P.w[i];
      if (phase == 0) s = rec_scales(ctx, k, &shards[i], w, &q[i], vec, cs);
      else if (phase == 1) s = w->tensor_amax ? rec_interior(ctx, k, &shards[i], w, &q[i], stream) : BC_OK;
      else if ((s = rec_slabs(ctx, k, &shards[i], w, &q[i], vec, P.W, ws, cs)) == BC_OK) s = rec_direct(ctx, k, &shards[i], w, &q[i], cs);
      if (s != BC_OK) s = bci_fail_entry(ctx, s, FN, "weight", i);
    }
    if (s == BC_OK) s = bci_list_flush(ctx, FN, phase == 1 ? stream : cs);
    s = bci_list_end(ctx, s);
  }
  if (side) {
    bc_status j = bci_comm_join(ctx, comm, FN, stream);
    if (s == BC_OK) s = j;
  }
  if (vec) bci_ws_free(vec, stream);
  free(P.w);
  return s;
}

/* ---- after the gather: the columnwise copy of per-tensor and 2D-block formats ---- */

static bc_status finish_entry(bc_ctx *ctx, bci_sink *k, const bc_qtensor *q, void *stream) {
  const bc_format *f = q->format;
  bci_geom gr, gc;
  bc_status s = bci_geom_get(ctx, "bc_shard_finish", f, q->rows, q->cols, BC_ROWWISE, q->scale_swizzled, &gr);
  if (s == BC_OK) s = bci_geom_get(ctx, "bc_shard_finish", f, q->rows, q->cols, BC_COLUMNWISE, q->scale_swizzled, &gc);
  if (s != BC_OK) return s;
  /* the data: the transpose of the rowwise data (templates/comm_transpose.cu) */
  const bci_kernel *kt;
  if ((s = bci_kernel_get(ctx, "bc_comm_transpose", &kt)) != BC_OK) return s;
  const void *R = q->rowwise_data;
  void *dst = q->columnwise_data;
  int64_t rows = q->rows, cols = q->cols, tiles_c = cdiv(cols, 64), ntiles = tiles_c * cdiv(rows, 64);
  int bits = f->elem.bits, high_first = f->pack_high_first;
  int64_t vq = bits == 8 ? 16 : 32;
  int vin = bci_aligned(R, 16) && cols % vq == 0, vout = bci_aligned(dst, 16) && rows % vq == 0;
  bci_arg ta[] = { BCI_ARG(R), BCI_ARG(rows), BCI_ARG(cols), BCI_ARG(dst), BCI_ARG(bits), BCI_ARG(high_first), BCI_ARG(tiles_c),
                   BCI_ARG(ntiles), BCI_ARG(vin), BCI_ARG(vout) };
  s = bci_run(ctx, k, kt, (unsigned)(ntiles < 65536 ? ntiles : 65536), 1, 1, (unsigned)kt->launch.threads, 0, stream, ta, 10);
  if (s != BC_OK) return s;
  /* the scales: per tensor the same scale_inv; 2D blocks the rowwise block grid transposed */
  if (f->block == BC_BLOCK_TENSOR) return bci_copy32(ctx, k, q->rowwise_scale_inv, q->columnwise_scale_inv, 1, stream);
  const bci_kernel *ks;
  if ((s = bci_kernel_get(ctx, "bc_shard_sctr", &ks)) != BC_OK) return s;
  const void *rs = q->rowwise_scale_inv;
  void *cs = q->columnwise_scale_inv;
  bci_sl rsl = gr.sl, csl = gc.sl;
  int64_t bh = f->block_rows, bw = f->block_cols;
  int sbytes = f->scale_bytes;
  bci_arg sa[] = { BCI_ARG(rs), BCI_ARG(rsl), BCI_ARG(cs), BCI_ARG(csl), BCI_ARG(bh), BCI_ARG(bw), BCI_ARG(sbytes) };
  unsigned t = (unsigned)ks->launch.threads;
  return bci_run(ctx, k, ks, grid(csl.prows * csl.pcols, t), 1, 1, t, 0, stream, sa, 7);
}

bc_status bc_shard_finish(bc_ctx *ctx, int64_t n, const bc_qtensor *q, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  const char *fn = "bc_shard_finish";
  bc_status s = bci_list_begin(ctx, fn, n, q, "q");
  if (s != BC_OK) return s;
  for (int64_t i = 0; i < n && s == BC_OK; i++) {
    const bc_qtensor *e = &q[i];
    if (!e->format) {
      s = bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q->format is NULL", fn, (long long)i);
      break;
    }
    if ((s = bci_check_format(ctx, e->format, "q->format")) != BC_OK) {
      s = bci_fail_entry(ctx, s, fn, "weight", i);
      break;
    }
    const bc_format *f = e->format;
    if ((s = bci_comm_format_ok(ctx, fn, "weight", i, f)) != BC_OK) break;
    if (f->block == BC_BLOCK_1D || !e->columnwise_data) continue; /* nothing to build: bc_shard_cast writes 1D columnwise data */
    if (!e->rowwise_data || !e->rowwise_scale_inv || !e->columnwise_scale_inv) {
      s = bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q needs rowwise_data and rowwise_scale_inv (the gathered rowwise copy) and "
                   "columnwise_scale_inv to build the columnwise copy of format '%s'", fn, (long long)i, f->name);
      break;
    }
    if (e->rows < 1 || e->cols < 1 || e->rows > BCI_MAX_ELEMS / e->cols) {
      s = bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: q is [%lld, %lld]; expected the whole weight's shape (at least 1 x 1)", fn,
                   (long long)i, (long long)e->rows, (long long)e->cols);
      break;
    }
    const size_t sa = f->block == BC_BLOCK_TENSOR ? 4 : (size_t)f->scale_bytes;
    if (!bci_aligned(e->rowwise_scale_inv, sa) || !bci_aligned(e->columnwise_scale_inv, sa)) {
      s = bci_fail(ctx, BC_ERR_ARG, "%s: weight %lld: a scale_inv pointer is misaligned; format '%s' stores %zu-byte scales", fn,
                   (long long)i, f->name, sa);
      break;
    }
    if (!f->has_rowwise || !f->columnwise_transposed) {
      s = bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: weight %lld: format '%s' %s; the columnwise copy of per-tensor and 2D-block formats "
                   "is built by transposing the rowwise data, so it takes formats with a rowwise direction and transposed columnwise "
                   "data", fn, (long long)i, f->name, !f->has_rowwise ? "has no rowwise direction" : "stores its columnwise data untransposed");
      break;
    }
    if (f->block == BC_BLOCK_2D && f->block_rows != f->block_cols) {
      s = bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: weight %lld: format '%s' has %d x %d blocks; the columnwise copy is built for square "
                   "2D blocks only", fn, (long long)i, f->name, f->block_rows, f->block_cols);
      break;
    }
    s = finish_entry(ctx, bci_list_item(ctx, i), e, stream);
    if (s != BC_OK) s = bci_fail_entry(ctx, s, fn, "weight", i);
  }
  if (s == BC_OK) s = bci_list_flush(ctx, fn, stream);
  return bci_list_end(ctx, s);
}
