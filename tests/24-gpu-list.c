/* 24-gpu-list: the list and grouped calls against the single-tensor calls, on the GPU.
 *
 * For every format, lists of 1, 7, 100 and 1000 tensors (5000 for two formats) of mixed shapes
 * (empty, 1-element, ragged, a few large), and 300 with ~15 large ones, input dtypes,
 * directions, strided rows and misaligned buffers: bc_quantize_list, bc_quantize_cast_list,
 * bc_dequantize_list, bc_amax_list, bc_compute_scale_list and bc_scale_swizzle_list write
 * exactly the bytes of the same single calls made tensor by tensor. Both runs write into arenas
 * of the same layout, poisoned alike before each run, and the arenas are compared whole (data,
 * scales, padding, amax, scale).
 * Launches per list are counted (bc_stats.launches) and must not grow with the list.
 * Grouped quantize with random expert splits (0-row and 1-row experts included) equals the
 * single quantize of each group at the bc_grouped_layout offsets and the CPU reference
 * bc_ref_quantize_grouped. Bad lists fail naming the index and launch nothing. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockcast.h"
#include "gpu.h"
#include "tap.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t next32(void) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static int64_t urand(int64_t lo, int64_t hi) { return lo + (int64_t)(next32() % (uint32_t)(hi - lo + 1)); }

static bc_ctx *ctx;

/* ---- an arena: bump allocation with a chosen misalignment ---- */
typedef struct arena {
  size_t len;
} arena;
static size_t take(arena *a, size_t bytes, size_t misalign) {
  size_t off = (a->len + 255) / 256 * 256 + misalign;
  a->len = off + bytes;
  return off;
}

/* one tensor of a list: offsets of its buffers in the input arena and the output arenas */
typedef struct tcase {
  const bc_format *f;
  bc_format_info fi;
  int64_t rows, cols, ld;
  bc_dtype dt, odt;
  int rw, cw, swz;
  size_t x_off, rd, rs, cd, cs, amax, scale, ro, co; /* SIZE_MAX: absent */
  size_t rd_n, rs_n, cd_n, cs_n, ro_n, co_n;
} tcase;

static int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/* pack: the format's packing group (rows and cols made whole groups) */
static void pick_shape(tcase *t, int small, int pack) {
  int k = (int)(next32() % 20);
  if (k == 0) t->rows = 0, t->cols = urand(1, 64);
  else if (k == 1) t->rows = 1, t->cols = 1;
  else if (k == 2 && !small) t->rows = urand(500, 1500), t->cols = urand(500, 1500);
  else if (k == 3) t->rows = urand(1, 4), t->cols = urand(1, 600);
  else if (k == 4) t->rows = urand(200, small ? 600 : 3000), t->cols = urand(1, 6); /* thin: quantize_thin.cu for 1D blocks */
  else t->rows = urand(1, small ? 80 : 300), t->cols = urand(1, small ? 80 : 300);
  t->rows = round_up(t->rows, pack);
  t->cols = round_up(t->cols, pack);
}

static size_t lay_bytes(const bc_format *f, int64_t r, int64_t c, bc_direction d, int swz, size_t *scale) {
  bc_qlayout L;
  if (bc_qtensor_layout(ctx, f, r, c, d, swz, &L) != BC_OK) {
    diag("layout: %s", bc_last_error(ctx));
    exit(1);
  }
  *scale = L.scale_bytes;
  return L.data_bytes;
}

static void plan_case(tcase *t, const bc_format *f, int small, arena *in, arena *out) {
  memset(t, 0, sizeof *t);
  t->f = f;
  bc_format_get_info(ctx, f, &t->fi);
  pick_shape(t, small, t->fi.element_pack);
  t->dt = (bc_dtype)(next32() % 3);
  t->odt = (bc_dtype)(next32() % 3);
  int dirs = (int)(next32() % 3) + 1; /* 1 row, 2 col, 3 both */
  t->rw = (dirs & 1) && t->fi.has_rowwise;
  t->cw = (dirs & 2) && t->fi.has_columnwise;
  if (!t->rw && !t->cw) t->rw = t->fi.has_rowwise, t->cw = !t->rw;
  t->swz = t->fi.block != BC_BLOCK_TENSOR && (next32() % 3 == 0);
  t->ld = t->cols + ((next32() % 4 == 0) ? urand(1, 9) : 0);
  size_t es = bc_dtype_size(t->dt);
  size_t mis_in = (next32() % 5 == 0) ? es : 0;
  t->x_off = take(in, (size_t)(t->rows ? (t->rows - 1) * t->ld + t->cols : 0) * es + 16, mis_in);
  t->rd = t->rs = t->cd = t->cs = t->ro = t->co = SIZE_MAX;
  int64_t r = t->rows ? t->rows : t->fi.element_pack;
  if (t->rw) {
    t->rd_n = lay_bytes(f, r, t->cols, BC_ROWWISE, t->swz, &t->rs_n);
    t->rd = take(out, t->rd_n, (next32() % 4 == 0) ? urand(1, 15) : 0);
    t->rs = take(out, t->rs_n, 0);
    t->ro_n = (size_t)r * t->cols * bc_dtype_size(t->odt);
    t->ro = take(out, t->ro_n, 0);
  }
  if (t->cw) {
    t->cd_n = lay_bytes(f, r, t->cols, BC_COLUMNWISE, t->swz, &t->cs_n);
    t->cd = take(out, t->cd_n, (next32() % 4 == 0) ? urand(1, 15) : 0);
    t->cs = take(out, t->cs_n, 0);
    t->co_n = (size_t)r * t->cols * bc_dtype_size(t->odt);
    t->co = take(out, t->co_n, 0);
  }
  t->amax = take(out, 4, 0);
  t->scale = take(out, 4, 0);
}

static void *at(void *base, size_t off) { return off == SIZE_MAX ? NULL : (char *)base + off; }

static bc_tensor xt(const tcase *t, void *in) {
  bc_tensor x = { at(in, t->x_off), t->dt, t->rows, t->cols, t->ld };
  return x;
}
static bc_qtensor qt(const tcase *t, void *out) {
  bc_qtensor q;
  memset(&q, 0, sizeof q);
  q.format = t->f;
  q.rows = t->rows;
  q.cols = t->cols;
  q.rowwise_data = at(out, t->rd);
  q.rowwise_scale_inv = at(out, t->rs);
  q.columnwise_data = at(out, t->cd);
  q.columnwise_scale_inv = at(out, t->cs);
  q.amax = at(out, t->amax);
  q.scale = at(out, t->scale);
  q.scale_swizzled = t->swz;
  return q;
}
static bc_tensor outt(const tcase *t, void *out, int col) {
  int trans = col && t->fi.columnwise_transposed;
  bc_tensor o = { at(out, col ? t->co : t->ro), t->odt, trans ? t->cols : t->rows, trans ? t->rows : t->cols, 0 };
  return o;
}

static void fill_input(void *d, size_t bytes) {
  size_t n = bytes / 2;
  uint16_t *h = malloc(n * 2);
  for (size_t i = 0; i < n; i++) {
    /* bf16/fp16 halves of random magnitudes; fp32 inputs see pairs of them */
    uint32_t e = next32();
    h[i] = (uint16_t)((e & 0x8000u) | ((0x3800u + (e >> 20) % 0x1000u) & 0x7FFFu) | (e & 0x3Fu));
  }
  CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
  free(h);
}

/* n random elements of dtype dt on the host, some NaN (amax ignores them) */
static void fill_input_dtype(void *h, bc_dtype dt, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t e = next32();
    int nan = e % 61 == 0;
    if (dt == BC_FP32) {
      uint32_t b = nan ? 0x7FC00000u : ((e & 0x80000000u) | ((0x30000000u + (e >> 8) % 0x10000000u) & 0x7FFFFFFFu));
      memcpy((char *)h + i * 4, &b, 4);
    } else {
      uint16_t b = (uint16_t)((e & 0x8000u) | ((0x3800u + (e >> 20) % 0x1000u) & 0x7FFFu) | (e & 0x3Fu));
      if (nan) b = dt == BC_BF16 ? 0x7FC0 : 0x7E00;
      memcpy((char *)h + i * 2, &b, 2);
    }
  }
}

/* which tensor and buffer holds byte `off` of an output arena */
static void where(const tcase *t, int64_t n, size_t off) {
  for (int64_t i = 0; i < n; i++) {
    const size_t o[] = { t[i].rd, t[i].rs, t[i].cd, t[i].cs, t[i].ro, t[i].co, t[i].amax, t[i].scale };
    const size_t l[] = { t[i].rd_n, t[i].rs_n, t[i].cd_n, t[i].cs_n, t[i].ro_n, t[i].co_n, 4, 4 };
    const char *nm[] = { "rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "row out", "col out", "amax", "scale" };
    for (int k = 0; k < 8; k++)
      if (o[k] != SIZE_MAX && off >= o[k] && off < o[k] + l[k])
        diag("  byte %zu: tensor %lld (%s [%lld, %lld] %s) %s + %zu", off, (long long)i, t[i].fi.name,
             (long long)t[i].rows, (long long)t[i].cols, bc_dtype_name(t[i].dt), nm[k], off - o[k]);
  }
}

static int same_arena(const char *what, const tcase *t, int64_t n, void *a, void *b, size_t len) {
  unsigned char *ha = malloc(len), *hb = malloc(len);
  CK(cudaMemcpy(ha, a, len, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb, b, len, cudaMemcpyDeviceToHost));
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < len; i++)
    if (ha[i] != hb[i] && bad++ == 0) first = i;
  if (bad) {
    diag("%s: %zu bytes differ; the first:", what, bad);
    where(t, n, first);
  }
  free(ha);
  free(hb);
  return bad == 0;
}

static uint64_t launches(void) {
  bc_stats s;
  bc_get_stats(ctx, &s);
  return s.launches;
}

#define TRY(call)                                                                 \
  do {                                                                            \
    bc_status st_ = (call);                                                       \
    if (st_ != BC_OK) {                                                           \
      diag("%s:%d: %s: %s", __FILE__, __LINE__, #call, bc_last_error(ctx));       \
      ok_all = 0;                                                                 \
    }                                                                             \
  } while (0)

/* one list of n tensors of format f through every list call; large: with ~1 in 20 tensors of
 * 500-1500 rows and columns whatever n (else only lists under 100 have them) */
static void run_list(const bc_format *f, int64_t n, int large) {
  bc_format_info fi;
  bc_format_get_info(ctx, f, &fi);
  int tensor = fi.block == BC_BLOCK_TENSOR;
  arena in = { 0 }, out = { 0 };
  tcase *t = malloc((size_t)n * sizeof *t);
  for (int64_t i = 0; i < n; i++) plan_case(&t[i], f, n >= 100 && !large, &in, &out);
  void *din = dmalloc(in.len), *dl = dmalloc(out.len), *ds = dmalloc(out.len);
  fill_input(din, in.len);
  bc_tensor *x = malloc((size_t)n * sizeof *x), *o = malloc((size_t)n * sizeof *o);
  bc_qtensor *ql = malloc((size_t)n * sizeof *ql), *qs = malloc((size_t)n * sizeof *qs);
  for (int64_t i = 0; i < n; i++) {
    x[i] = xt(&t[i], din);
    ql[i] = qt(&t[i], dl);
    qs[i] = qt(&t[i], ds);
  }
  int ok_all = 1;
  char tag[160];
  snprintf(tag, sizeof tag, "%s, %lld tensors%s", fi.name, (long long)n, large ? " (some large)" : "");

  /* quantize */
  CK(cudaMemset(dl, 0xA5, out.len));
  CK(cudaMemset(ds, 0xA5, out.len));
  uint64_t l0 = launches();
  TRY(bc_quantize_list(ctx, n, x, ql, NULL));
  uint64_t nl = launches() - l0;
  for (int64_t i = 0; i < n; i++)
    if (t[i].rows > 0) TRY(bc_quantize(ctx, &x[i], &qs[i], NULL));
  CK(cudaDeviceSynchronize());
  ok(ok_all && same_arena("quantize", t, n, dl, ds, out.len), "%s: bc_quantize_list == bc_quantize each (%llu launches)", tag,
     (unsigned long long)nl);
  /* launches: per (stage, kernel); kernels: dtype x direction variants (x vec/elems) */
  /* (stage, kernel, shared memory) groups. per-tensor: zero, amax x 3 dtypes, scale, cast x 3
   * dtypes x (row, row_elems at stage 3 or 4, col, rowcol); NVFP4: zero, amax x 3, cast x 3 x 3
   * x (rows aligned or staged); other block formats: cast x 3 x 3 x 2; 1D blocks also the thin
   * kernel x 3 dtypes x (row, col). A block cast group may be two launches (its large items
   * through the parameter entry, the rest through the table: runtime/multi/bc_list.c) */
  const unsigned thin = fi.block == BC_BLOCK_1D ? 6 : 0;
  unsigned bound = tensor ? 1 + 3 + 1 + 15 : (fi.two_level ? 1 + 3 + 2 * 18 : 2 * 18) + thin;
  ok(nl <= bound, "%s: %llu launches for the list (at most %u whatever n)", tag, (unsigned long long)nl, bound);

  /* quantize with the given scale (per-tensor), global amax (NVFP4), else the same */
  CK(cudaMemset(dl, 0x5A, out.len));
  CK(cudaMemset(ds, 0x5A, out.len));
  float *hv = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) hv[i] = ldexpf(1.0f + (float)(next32() % 1000) / 1000.0f, (int)(next32() % 16) - 8);
  for (int64_t i = 0; i < n; i++) {
    CK(cudaMemcpy(at(dl, t[i].scale), &hv[i], 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(at(ds, t[i].scale), &hv[i], 4, cudaMemcpyHostToDevice));
    float a = hv[i] * 3.0f;
    CK(cudaMemcpy(at(dl, t[i].amax), &a, 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(at(ds, t[i].amax), &a, 4, cudaMemcpyHostToDevice));
  }
  TRY(bc_quantize_cast_list(ctx, n, x, ql, NULL));
  for (int64_t i = 0; i < n; i++)
    if (t[i].rows > 0) TRY(bc_quantize_cast(ctx, &x[i], &qs[i], NULL));
  CK(cudaDeviceSynchronize());
  ok(ok_all && same_arena("quantize_cast", t, n, dl, ds, out.len), "%s: bc_quantize_cast_list == bc_quantize_cast each", tag);

  /* dequantize each present direction (the rest of the list skipped: 0-row entries) */
  for (int d = 0; d < 2; d++) {
    bc_direction dir = d ? BC_COLUMNWISE : BC_ROWWISE;
    bc_qtensor *sub = malloc((size_t)n * sizeof *sub);
    bc_qtensor *subs = malloc((size_t)n * sizeof *subs);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
      if ((d ? t[i].cw : t[i].rw)) {
        sub[m] = ql[i];
        subs[m] = qs[i];
        o[m++] = outt(&t[i], dl, d);
      }
    TRY(bc_dequantize_list(ctx, m, sub, dir, o, NULL));
    m = 0;
    for (int64_t i = 0; i < n; i++)
      if ((d ? t[i].cw : t[i].rw)) {
        bc_tensor os = outt(&t[i], ds, d);
        if (t[i].rows > 0) TRY(bc_dequantize(ctx, &subs[m], dir, &os, NULL));
        m++;
      }
    CK(cudaDeviceSynchronize());
    ok(ok_all && same_arena("dequantize", t, n, dl, ds, out.len), "%s: bc_dequantize_list %s == bc_dequantize each", tag,
       d ? "columnwise" : "rowwise");
    free(sub);
    free(subs);
  }

  /* amax: one fp32[n] array; empty tensors give 0 */
  float *da = dmalloc((size_t)n * 4), *dsa = dmalloc((size_t)n * 4);
  CK(cudaMemset(da, 0xA5, (size_t)n * 4));
  CK(cudaMemset(dsa, 0, (size_t)n * 4));
  TRY(bc_amax_list(ctx, n, x, da, NULL));
  for (int64_t i = 0; i < n; i++)
    if (t[i].rows > 0) TRY(bc_amax(ctx, &x[i], dsa + i, NULL));
  CK(cudaDeviceSynchronize());
  ok(ok_all && same_arena("amax", t, 0, da, dsa, (size_t)n * 4), "%s: bc_amax_list == bc_amax each", tag);
  if (tensor) {
    float *sc = dmalloc((size_t)n * 8), *scs = dmalloc((size_t)n * 8);
    CK(cudaMemset(sc, 0xA5, (size_t)n * 8));
    CK(cudaMemset(scs, 0xA5, (size_t)n * 8));
    TRY(bc_compute_scale_list(ctx, f, n, da, sc, sc + n, NULL));
    for (int64_t i = 0; i < n; i++) TRY(bc_compute_scale(ctx, f, dsa + i, scs + i, scs + n + i, NULL));
    CK(cudaDeviceSynchronize());
    ok(ok_all && same_arena("scale", t, 0, sc, scs, (size_t)n * 8), "%s: bc_compute_scale_list == bc_compute_scale each", tag);
    CK(cudaFree(sc));
    CK(cudaFree(scs));
  } else {
    /* swizzle the scales each tensor wrote (compact ones to the swizzle, swizzled ones back) */
    for (int from = 0; from < 2; from++) {
      bc_swizzle_job *jobs = malloc((size_t)n * 2 * sizeof *jobs);
      int64_t m = 0;
      arena sw = { 0 };
      size_t *offs = malloc((size_t)n * 2 * sizeof *offs);
      for (int64_t i = 0; i < n; i++)
        for (int d = 0; d < 2; d++) {
          if (!(d ? t[i].cw : t[i].rw) || t[i].swz != from || t[i].rows == 0) continue;
          size_t sb;
          lay_bytes(f, t[i].rows, t[i].cols, d ? BC_COLUMNWISE : BC_ROWWISE, !from, &sb);
          offs[m] = take(&sw, sb, 0);
          jobs[m++] = (bc_swizzle_job){ f, t[i].rows, t[i].cols, d ? BC_COLUMNWISE : BC_ROWWISE, at(ds, d ? t[i].cs : t[i].rs), NULL };
        }
      void *w1 = dmalloc(sw.len), *w2 = dmalloc(sw.len);
      CK(cudaMemset(w1, 0xA5, sw.len));
      CK(cudaMemset(w2, 0xA5, sw.len));
      for (int64_t j = 0; j < m; j++) jobs[j].dst = (char *)w1 + offs[j];
      TRY(bc_scale_swizzle_list(ctx, m, jobs, from, NULL));
      for (int64_t j = 0; j < m; j++)
        TRY(bc_scale_swizzle(ctx, f, jobs[j].rows, jobs[j].cols, jobs[j].dir, jobs[j].src, from, (char *)w2 + offs[j], NULL));
      CK(cudaDeviceSynchronize());
      ok(ok_all && same_arena("swizzle", t, 0, w1, w2, sw.len), "%s: bc_scale_swizzle_list (%s, %lld jobs) == bc_scale_swizzle each",
         tag, from ? "from swizzled" : "to swizzled", (long long)m);
      CK(cudaFree(w1));
      CK(cudaFree(w2));
      free(jobs);
      free(offs);
    }
  }
  CK(cudaFree(da));
  CK(cudaFree(dsa));
  CK(cudaFree(din));
  CK(cudaFree(dl));
  CK(cudaFree(ds));
  free(t);
  free(x);
  free(o);
  free(ql);
  free(qs);
  free(hv);
}

/* a uniform list (1000 x 64x64 bf16, rowwise, aligned) takes the fewest launches. With `big`
 * more tensors of 1024x1024 (more items than a block cast launch's parameters hold, its large
 * ones fitting), a block cast takes one launch more: the large tensors through the parameter
 * entry, the rest through the table (runtime/multi/bc_list.c: wants_split) */
static void uniform_launches(const bc_format *f, int64_t big) {
  bc_format_info fi;
  bc_format_get_info(ctx, f, &fi);
  const bc_direction dir = fi.has_rowwise ? BC_ROWWISE : BC_COLUMNWISE;
  int64_t n = 1000 + big;
  size_t per[2], db[2], sb[2];
  const int64_t side[2] = { 64, 1024 };
  for (int k = 0; k < 2; k++) {
    db[k] = lay_bytes(f, side[k], side[k], dir, 0, &sb[k]);
    per[k] = (db[k] + 255) / 256 * 256 + (sb[k] + 255) / 256 * 256 + 256;
  }
  const size_t in_bytes = (size_t)1000 * 64 * 64 * 2 + (size_t)big * 1024 * 1024 * 2;
  char *in = dmalloc(in_bytes), *out = dmalloc((size_t)1000 * per[0] + (size_t)big * per[1]);
  fill_input(in, in_bytes);
  bc_tensor *x = calloc((size_t)n, sizeof *x);
  bc_qtensor *q = calloc((size_t)n, sizeof *q);
  size_t xo = 0, oo = 0;
  for (int64_t i = 0; i < n; i++) {
    const int k = i >= 1000;
    const int64_t r = side[k], c = side[k];
    x[i] = (bc_tensor){ in + xo, BC_BF16, r, c, 0 };
    char *b = out + oo;
    xo += (size_t)r * c * 2;
    oo += per[k];
    q[i].format = f;
    q[i].rows = r;
    q[i].cols = c;
    if (fi.has_rowwise) q[i].rowwise_data = b, q[i].rowwise_scale_inv = b + (db[k] + 255) / 256 * 256;
    else q[i].columnwise_data = b, q[i].columnwise_scale_inv = b + (db[k] + 255) / 256 * 256;
    q[i].amax = (float *)(b + per[k] - 256);
    q[i].scale = (float *)(b + per[k] - 128);
  }
  uint64_t l0 = launches();
  bc_status st = bc_quantize_list(ctx, n, x, q, NULL);
  uint64_t nl = launches() - l0;
  CK(cudaDeviceSynchronize());
  const int tensor = fi.block == BC_BLOCK_TENSOR;
  int want = tensor ? 4 : fi.two_level ? 3 : 1;
  if (big && !tensor) want++;
  const char *casts = big && !tensor ? "cast of the large ones, cast of the rest" : "cast";
  ok(st == BC_OK && nl == (uint64_t)want, "%s: 1000 tensors of 64x64 bf16 and %lld of 1024x1024: %llu launches (want %d: %s%s)",
     fi.name, (long long)big, (unsigned long long)nl, want, tensor ? "zero, amax, scale, " : fi.two_level ? "zero, amax, " : "",
     casts);
  CK(cudaFree(in));
  CK(cudaFree(out));
  free(x);
  free(q);
}

/* grouped quantize == each group alone at its offsets == the CPU reference */
static void run_grouped(const bc_format *f, int swz, int dirs) {
  bc_format_info fi;
  bc_format_get_info(ctx, f, &fi);
  const int64_t pk = fi.element_pack;
  int64_t groups = urand(1, 24), cols = pk * urand(1, 400 / pk);
  int64_t *gr = malloc((size_t)groups * sizeof *gr), rows = 0;
  for (int64_t g = 0; g < groups; g++) {
    int k = (int)(next32() % 6);
    gr[g] = k == 0 ? 0 : k == 1 ? 1 : urand(2, 300);
    if (dirs & 2) gr[g] = round_up(gr[g], pk);
    rows += gr[g];
  }
  if (rows == 0) gr[0] = rows = 2 * pk;
  bc_group_offsets *off = malloc((size_t)(groups + 1) * sizeof *off);
  int rw = (dirs & 1) && fi.has_rowwise, cw = (dirs & 2) && fi.has_columnwise;
  bc_status st = bc_grouped_layout(ctx, f, groups, gr, cols, (rw ? BC_ROWWISE : 0) | (cw ? BC_COLUMNWISE : 0), swz, off);
  if (st != BC_OK) {
    ok(0, "bc_grouped_layout: %s", bc_last_error(ctx));
    return;
  }
  bc_dtype dt = (bc_dtype)(next32() % 3);
  size_t es = bc_dtype_size(dt), xb = (size_t)rows * cols * es;
  const bc_group_offsets *tot = &off[groups];
  size_t sizes[4] = { rw ? tot->rowwise_data : 0, rw ? tot->rowwise_scale_inv : 0, cw ? tot->columnwise_data : 0,
                      cw ? tot->columnwise_scale_inv : 0 };
  size_t all = 0, pos[6];
  for (int k = 0; k < 4; k++) pos[k] = all, all += (sizes[k] + 255) / 256 * 256;
  pos[4] = all, all += (size_t)groups * 4;
  pos[5] = all, all += (size_t)groups * 4;
  char *dx = dmalloc(xb), *d1 = dmalloc(all), *d2 = dmalloc(all);
  fill_input(dx, xb);
  CK(cudaMemset(d1, 0xA5, all));
  CK(cudaMemset(d2, 0xA5, all));
  bc_tensor x = { dx, dt, rows, cols, 0 };
  bc_qtensor q1, q2;
  memset(&q1, 0, sizeof q1);
  q1.format = f;
  q1.rows = rows;
  q1.cols = cols;
  q1.scale_swizzled = swz;
  q2 = q1;
  if (rw) q1.rowwise_data = d1 + pos[0], q1.rowwise_scale_inv = d1 + pos[1], q2.rowwise_data = d2 + pos[0], q2.rowwise_scale_inv = d2 + pos[1];
  if (cw)
    q1.columnwise_data = d1 + pos[2], q1.columnwise_scale_inv = d1 + pos[3], q2.columnwise_data = d2 + pos[2], q2.columnwise_scale_inv = d2 + pos[3];
  q1.amax = (float *)(d1 + pos[4]);
  q1.scale = (float *)(d1 + pos[5]);
  q2.amax = (float *)(d2 + pos[4]);
  q2.scale = (float *)(d2 + pos[5]);
  int ok_all = 1;
  TRY(bc_quantize_grouped(ctx, &x, groups, gr, &q1, NULL));
  int64_t r0 = 0;
  for (int64_t g = 0; g < groups; g++) {
    if (gr[g] > 0) {
      bc_tensor xg = { dx + (size_t)r0 * cols * es, dt, gr[g], cols, 0 };
      bc_qtensor qg = q2;
      qg.rows = gr[g];
      if (rw) qg.rowwise_data = (char *)q2.rowwise_data + off[g].rowwise_data, qg.rowwise_scale_inv = (char *)q2.rowwise_scale_inv + off[g].rowwise_scale_inv;
      if (cw)
        qg.columnwise_data = (char *)q2.columnwise_data + off[g].columnwise_data,
        qg.columnwise_scale_inv = (char *)q2.columnwise_scale_inv + off[g].columnwise_scale_inv;
      qg.amax = q2.amax + g;
      qg.scale = q2.scale + g;
      qg.sr_offset = (uint64_t)g;
      TRY(bc_quantize(ctx, &xg, &qg, NULL));
    }
    r0 += gr[g];
  }
  CK(cudaDeviceSynchronize());
  char tag[200];
  snprintf(tag, sizeof tag, "%s %s%s grouped, %lld experts [%lld rows total] x %lld %s", fi.name, rw && cw ? "rowcol" : rw ? "row" : "col",
           swz ? " swizzled" : "", (long long)groups, (long long)rows, (long long)cols, bc_dtype_name(dt));
  ok(ok_all && same_arena("grouped", NULL, 0, d1, d2, all), "%s == each expert alone", tag);
  /* the CPU reference, on host copies */
  char *hx = malloc(xb), *h1 = malloc(all), *hr = malloc(all);
  CK(cudaMemcpy(hx, dx, xb, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h1, d1, all, cudaMemcpyDeviceToHost));
  memset(hr, 0xA5, all);
  bc_tensor hxt = { hx, dt, rows, cols, 0 };
  bc_qtensor qh = q1;
  if (rw) qh.rowwise_data = hr + pos[0], qh.rowwise_scale_inv = hr + pos[1];
  if (cw) qh.columnwise_data = hr + pos[2], qh.columnwise_scale_inv = hr + pos[3];
  qh.amax = (float *)(hr + pos[4]);
  qh.scale = (float *)(hr + pos[5]);
  st = bc_ref_quantize_grouped(ctx, &hxt, groups, gr, &qh);
  if (st != BC_OK) diag("%s", bc_last_error(ctx));
  /* NVFP4 2D and block formats: the reference writes what the GPU writes, padding included */
  size_t bad = 0;
  for (size_t i = 0; i < all; i++) bad += h1[i] != hr[i];
  ok(st == BC_OK && bad == 0, "%s == bc_ref_quantize_grouped (%zu bytes differ)", tag, bad);
  free(hx);
  free(h1);
  free(hr);
  CK(cudaFree(dx));
  CK(cudaFree(d1));
  CK(cudaFree(d2));
  free(gr);
  free(off);
}

static void bad_lists(const bc_format *f) {
  int64_t n = 5;
  char *in = dmalloc(4096), *out = dmalloc(1 << 16);
  CK(cudaMemset(out, 0x77, 1 << 16));
  bc_tensor x[5];
  bc_qtensor q[5];
  for (int i = 0; i < 5; i++) {
    x[i] = (bc_tensor){ in, BC_BF16, 16, 16, 0 };
    memset(&q[i], 0, sizeof q[i]);
    q[i].format = f;
    q[i].rows = q[i].cols = 16;
    q[i].rowwise_data = out + i * 4096;
    q[i].rowwise_scale_inv = out + i * 4096 + 2048;
    q[i].amax = (float *)(out + i * 4096 + 3072);
    q[i].scale = (float *)(out + i * 4096 + 3584);
  }
  x[3].data = NULL;
  uint64_t l0 = launches();
  bc_status st = bc_quantize_list(ctx, n, x, q, NULL);
  ok(st == BC_ERR_ARG && strstr(bc_last_error(ctx), "tensor 3") && launches() == l0, "NULL entry: %s", bc_last_error(ctx));
  x[3].data = in;
  q[4].rowwise_data = q[1].rowwise_data;
  st = bc_quantize_list(ctx, n, x, q, NULL);
  ok(st == BC_ERR_ARG && strstr(bc_last_error(ctx), "overlap") && strstr(bc_last_error(ctx), "tensor 1") && launches() == l0,
     "overlapping outputs: %s", bc_last_error(ctx));
  unsigned char h[1 << 16];
  CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  size_t touched = 0;
  for (size_t i = 0; i < sizeof h; i++) touched += h[i] != 0x77;
  ok(touched == 0, "a refused list writes nothing (%zu bytes changed)", touched);
  CK(cudaFree(in));
  CK(cudaFree(out));
}

/* name is one of the comma-separated entries of list */
/* bc_amax_range and bc_amax_range_list: ranges of a flattened tensor (contiguous and strided
 * rows, every dtype; empty, one element, inside a row, across rows, to the end) against
 * bc_ref_amax of the same elements copied into one host row */
static void amax_ranges(void) {
  const int64_t shapes[3][3] = { { 37, 45, 45 }, { 20, 64, 80 }, { 1, 300, 300 } };
  for (int dt = 0; dt < 3; dt++)
    for (int si = 0; si < 3; si++) {
      const int64_t R = shapes[si][0], K = shapes[si][1], ld = shapes[si][2], n = R * K;
      const size_t es = bc_dtype_size((bc_dtype)dt);
      unsigned char *h = malloc((size_t)(R * ld) * es), *flat = malloc((size_t)n * es);
      fill_input_dtype(h, (bc_dtype)dt, (size_t)(R * ld));
      for (int64_t r = 0; r < R; r++) memcpy(flat + (size_t)(r * K) * es, h + (size_t)(r * ld) * es, (size_t)K * es);
      void *d = dmalloc((size_t)(R * ld) * es);
      CK(cudaMemcpy(d, h, (size_t)(R * ld) * es, cudaMemcpyHostToDevice));
      bc_tensor x = { d, (bc_dtype)dt, R, K, ld };
      enum { NR = 10 };
      int64_t st[NR] = { 0, 0, 5, 3, K - 2, K + 1, n - 1, 2 * K, n / 3, 7 }, ln[NR] = { n, 0, 1, K - 6 > 0 ? K - 6 : 1, 5, 2 * K, 1, K, n / 2, n - 7 };
      for (int i = 0; i < NR; i++) {
        if (st[i] > n) st[i] = n;
        if (ln[i] > n - st[i]) ln[i] = n - st[i];
      }
      float *dam = dmalloc(NR * sizeof(float)), *dlist = dmalloc(NR * sizeof(float)), want[NR], got[NR], gotl[NR];
      CK(cudaMemset(dam, 0xA5, NR * sizeof(float)));
      CK(cudaMemset(dlist, 0xA5, NR * sizeof(float)));
      int good = 1;
      for (int i = 0; i < NR; i++) {
        want[i] = 0;
        if (ln[i]) {
          bc_tensor hx = { flat + (size_t)st[i] * es, (bc_dtype)dt, 1, ln[i], 0 };
          good &= bc_ref_amax(ctx, &hx, &want[i]) == BC_OK;
        }
        if (bc_amax_range(ctx, &x, st[i], ln[i], dam + i, NULL) != BC_OK) {
          diag("  bc_amax_range: %s", bc_last_error(ctx));
          good = 0;
        }
      }
      bc_tensor xs[NR];
      for (int i = 0; i < NR; i++) xs[i] = x;
      uint64_t l0 = launches();
      if (bc_amax_range_list(ctx, NR, xs, st, ln, dlist, NULL) != BC_OK) {
        diag("  bc_amax_range_list: %s", bc_last_error(ctx));
        good = 0;
      }
      uint64_t nl = launches() - l0;
      CK(cudaMemcpy(got, dam, sizeof got, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(gotl, dlist, sizeof gotl, cudaMemcpyDeviceToHost));
      for (int i = 0; i < NR; i++)
        if (memcmp(&got[i], &want[i], 4) || memcmp(&gotl[i], &want[i], 4)) {
          diag("  range %d [%lld, +%lld): single %a, list %a, reference %a", i, (long long)st[i], (long long)ln[i], got[i], gotl[i],
               want[i]);
          good = 0;
        }
      ok(good && nl <= 4, "amax over ranges of a %s [%lld, %lld] tensor (row stride %lld): 10 ranges, single calls and one list (%llu launches) "
         "== the reference", bc_dtype_name((bc_dtype)dt), (long long)R, (long long)K, (long long)ld, (unsigned long long)nl);
      cudaFree(d);
      cudaFree(dam);
      cudaFree(dlist);
      free(h);
      free(flat);
    }
  float *one = dmalloc(4);
  bc_tensor x = { one, BC_FP32, 2, 3, 0 };
  ok(bc_amax_range(ctx, &x, 4, 3, one, NULL) == BC_ERR_ARG && strstr(bc_last_error(ctx), "not inside x's 6 elements"),
     "a range past the end is refused: %s", bc_last_error(ctx));
  int64_t st2[2] = { 0, -1 }, ln2[2] = { 1, 1 };
  bc_tensor xs2[2] = { x, x };
  ok(bc_amax_range_list(ctx, 2, xs2, st2, ln2, one, NULL) == BC_ERR_ARG && strstr(bc_last_error(ctx), "tensor 1"),
     "a bad range in a list names its entry: %s", bc_last_error(ctx));
  cudaFree(one);
}

static int listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
}

int main(void) {
  gpu_init_or_skip();
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
  diag("device: %s", gpu_name());
  const char *only = getenv("BC_TEST_FORMATS");
  size_t nf = bc_format_count(ctx);
  for (size_t fi = 0; fi < nf; fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (only && !listed(only, info.name)) continue;
    const int64_t sizes[] = { 1, 7, 100, 1000, 5000 };
    int big = !strcmp(info.name, "fp8_e4m3_tensor") || !strcmp(info.name, "nvfp4");
    for (int k = 0; k < (big ? 5 : 4); k++) run_list(f, sizes[k], 0);
    /* more items than a launch's parameters hold (129 of block quantize's), ~15 of them large:
     * the large ones through the parameter entry, the rest through the table on the side stream
     * (runtime/multi/bc_list.c: wants_split) */
    run_list(f, 300, 1);
    uniform_launches(f, 0);
    uniform_launches(f, 4);
    for (int rep = 0; rep < 4; rep++) run_grouped(f, info.block != BC_BLOCK_TENSOR && rep % 2, rep < 2 ? 1 : 3);
  }
  const bc_format *f;
  bc_format_get(ctx, "fp8_e4m3_tensor", &f);
  bad_lists(f);
  amax_ranges();
  /* contexts made after others were destroyed (their records may sit at the old addresses):
   * each context's lookups are its own (the per-thread kernel memos are keyed by context id) */
  char name[64] = "mxfp8_e4m3";
  if (only) snprintf(name, sizeof name, "%.*s", (int)strcspn(only, ","), only);
  for (int again = 0; again < 3; again++) {
    bc_ctx_destroy(ctx);
    if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
    if (bc_format_get(ctx, name, &f) != BC_OK) { printf("Bail out! %s\n", bc_last_error(ctx)); return 1; }
    run_list(f, 7, 0);
  }
  bc_ctx_destroy(ctx);
  done_testing();
  return tap_failed ? 1 : 0;
}
