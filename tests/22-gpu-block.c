/* 22-gpu-block: the GPU tier for the block-scaled formats (fp8_block_1x128, fp8_block_128x128,
 * mxfp8_e4m3, mxfp8_e5m2, mxfp4, nvfp4, nvfp4_2d). Every format x input dtype x direction (row,
 * col, both in one read) against the CPU reference, bit-exact: data, scales (padding included),
 * the NVFP4 global amax; then dequantize of each direction. Aligned and ragged shapes up to
 * 8191x8193, random data with special values (0, -0, denormals, NaN, +-Inf, +-max, past the
 * saturation point) and mostly-zero data (all-zero blocks). Outputs poisoned first. Also: the
 * 128x4 swizzled scale layout and the compact <-> swizzled kernel; shapes a format cannot hold;
 * Dequantize both by row and flat (contiguous outputs with unaligned rows). NVFP4 stochastic
 * rounding (bit-exact vs the reference, identical under another tile shape,
 * unbiased); the FLOOR rule through a spec loaded at run time (NVRTC). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "gpu.h"
#include "tap.h"
#include "testdata.h"

static bc_ctx *ctx;

/* a shape for the format's packing group: 8-bit (1 element), 4-bit (2), 6-bit (4) */
#define SH(info, n8, n4, n6) ((info).element_pack == 4 ? (n6) : (info).element_pack == 2 ? (n4) : (n8))

typedef struct side {
  bc_qlayout lay;
  uint8_t *d_data, *d_scale;  /* device */
  uint8_t *r_data, *r_scale;  /* reference */
  uint8_t *g_data, *g_scale;  /* device results copied back */
} side;

static int side_alloc(const bc_format *f, int64_t rows, int64_t cols, bc_direction dir, int swz, side *s) {
  memset(s, 0, sizeof *s);
  if (bc_qtensor_layout(ctx, f, rows, cols, dir, swz, &s->lay) != BC_OK) return 0;
  s->d_data = dmalloc(s->lay.data_bytes);
  s->d_scale = dmalloc(s->lay.scale_bytes);
  CK(cudaMemset(s->d_data, 0xA5, s->lay.data_bytes));
  CK(cudaMemset(s->d_scale, 0xA5, s->lay.scale_bytes));
  s->r_data = malloc(s->lay.data_bytes);
  s->r_scale = malloc(s->lay.scale_bytes);
  s->g_data = malloc(s->lay.data_bytes);
  s->g_scale = malloc(s->lay.scale_bytes);
  memset(s->r_data, 0x5A, s->lay.data_bytes);
  memset(s->r_scale, 0x5A, s->lay.scale_bytes);
  return 1;
}

static void side_free(side *s) {
  if (s->d_data) cudaFree(s->d_data);
  if (s->d_scale) cudaFree(s->d_scale);
  free(s->r_data); free(s->r_scale); free(s->g_data); free(s->g_scale);
}

typedef struct opts {
  int kind;        /* fill kind; 3: mostly zeros (all-zero blocks) */
  int swz;         /* scale_swizzled */
  int sr;          /* stochastic rounding */
  uint64_t seed, offset;
  int deq;         /* also dequantize (into the input dtype) */
  int cast_amax;   /* two-level: bc_quantize_cast with a given global amax instead of bc_quantize */
  int in_off;      /* the input starts in_off elements into its buffer ... */
  int ld_extra;    /* ... and its rows are cols + ld_extra elements apart (the gaps hold NaN bits) */
} opts;

static void fill_kind(void *h, bc_dtype dt, size_t n, int kind) {
  fill(h, dt, n, kind == 3 ? 0 : kind);
  if (kind == 3) {
    size_t es = bc_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
      if ((next() & 15) != 0 || (i / 4096) % 3 == 0) memset((char *)h + i * es, 0, es);
  }
}

/* one quantize (+ dequantize) case; returns 1 when bit-exact. g_out (optional) gets the device
 * results of the rowwise side for cross-run comparisons. */
/* Which kernel a shape takes, seen in the launch count (bc_get_stats): a thin tensor's two
 * directions are two launches of quantize_thin.cu, a filled tensor's both one tile launch (the
 * exactness of both is run_case's). */
static uint64_t launches_of_quantize(const bc_format *f, int64_t rows, int64_t cols) {
  side r, c;
  side_alloc(f, rows, cols, BC_ROWWISE, 0, &r);
  side_alloc(f, rows, cols, BC_COLUMNWISE, 0, &c);
  void *in = dmalloc((size_t)(rows * cols) * 2);
  CK(cudaMemset(in, 0x3C, (size_t)(rows * cols) * 2));
  float *am = dmalloc(8);
  bc_tensor x = { in, BC_BF16, rows, cols, 0 };
  bc_qtensor q = { f, rows, cols, r.d_data, r.d_scale, c.d_data, c.d_scale, am, am + 1, 0, 0, 0, 0 };
  bc_stats s0, s1;
  bc_get_stats(ctx, &s0);
  bc_status st = bc_quantize(ctx, &x, &q, NULL);
  CK(cudaDeviceSynchronize());
  bc_get_stats(ctx, &s1);
  if (st != BC_OK) diag("  bc_quantize [%lld, %lld]: %s", (long long)rows, (long long)cols, bc_last_error(ctx));
  side_free(&r);
  side_free(&c);
  cudaFree(in);
  cudaFree(am);
  return st == BC_OK ? s1.launches - s0.launches : 0;
}

static int run_case(const bc_format *f, bc_dtype dt, int64_t rows, int64_t cols, int dirs, opts o, const char *tag) {
  size_t es = bc_dtype_size(dt), n = (size_t)(rows * cols);
  void *h_in = malloc(n * es);
  fill_kind(h_in, dt, n, o.kind);
  /* strided / offset input: the rows at in_off + r * ld of a buffer that ends with the last row */
  const int64_t ld = cols + o.ld_extra;
  const size_t dn_in = (size_t)o.in_off + (size_t)((rows - 1) * ld + cols);
  void *d_buf = dmalloc(dn_in * es), *d_in = (char *)d_buf + (size_t)o.in_off * es;
  if (o.in_off || o.ld_extra) {
    char *h_buf = malloc(dn_in * es);
    memset(h_buf, 0xFF, dn_in * es);
    for (int64_t r = 0; r < rows; r++)
      memcpy(h_buf + ((size_t)o.in_off + (size_t)(r * ld)) * es, (char *)h_in + (size_t)(r * cols) * es, (size_t)cols * es);
    CK(cudaMemcpy(d_buf, h_buf, dn_in * es, cudaMemcpyHostToDevice));
    free(h_buf);
  } else {
    CK(cudaMemcpy(d_in, h_in, n * es, cudaMemcpyHostToDevice));
  }
  side sr = { 0 }, sc = { 0 };
  int good = 1;
  if (dirs & 1) good &= side_alloc(f, rows, cols, BC_ROWWISE, o.swz, &sr);
  if (dirs & 2) good &= side_alloc(f, rows, cols, BC_COLUMNWISE, o.swz, &sc);
  if (!good) diag("  layout: %s", bc_last_error(ctx));
  bc_format_info info;
  bc_format_get_info(ctx, f, &info);
  float *d_amax = dmalloc(4);
  float r_amax = 0, g_amax = 0;
  float given = 1000.0f;
  if (o.cast_amax) {
    CK(cudaMemcpy(d_amax, &given, 4, cudaMemcpyHostToDevice));
    r_amax = given;
  } else {
    CK(cudaMemset(d_amax, 0xA5, 4));
  }
  bc_tensor x = { d_in, dt, rows, cols, o.ld_extra ? ld : 0 };
  bc_qtensor q = { f, rows, cols, sr.d_data, sr.d_scale, sc.d_data, sc.d_scale, d_amax, NULL, o.swz, o.sr, o.seed, o.offset };
  bc_tensor hx = { h_in, dt, rows, cols, 0 };
  bc_qtensor hq = { f, rows, cols, sr.r_data, sr.r_scale, sc.r_data, sc.r_scale, &r_amax, NULL, o.swz, o.sr, o.seed, o.offset };
  bc_status s = BC_ERR_INTERNAL, rs = BC_ERR_INTERNAL;
  if (good) {
    s = o.cast_amax ? bc_quantize_cast(ctx, &x, &q, NULL) : bc_quantize(ctx, &x, &q, NULL);
    if (s != BC_OK) diag("  quantize: %s", bc_last_error(ctx));
    CK(cudaDeviceSynchronize());
    rs = o.cast_amax ? bc_ref_quantize_cast(ctx, &hx, &hq) : bc_ref_quantize(ctx, &hx, &hq);
    if (rs != BC_OK) diag("  reference: %s", bc_last_error(ctx));
    good = s == BC_OK && rs == BC_OK;
  }
  side *sides[2] = { &sr, &sc };
  const char *dn[2] = { "rowwise", "columnwise" };
  for (int d = 0; good && d < 2; d++) {
    side *sd = sides[d];
    if (!sd->d_data) continue;
    CK(cudaMemcpy(sd->g_data, sd->d_data, sd->lay.data_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sd->g_scale, sd->d_scale, sd->lay.scale_bytes, cudaMemcpyDeviceToHost));
    char what[64];
    snprintf(what, sizeof what, "%s data", dn[d]);
    good &= first_diff_report(what, sd->g_data, sd->r_data, sd->lay.data_bytes);
    snprintf(what, sizeof what, "%s scale_inv", dn[d]);
    good &= first_diff_report(what, sd->g_scale, sd->r_scale, sd->lay.scale_bytes);
  }
  if (good && info.two_level) {
    CK(cudaMemcpy(&g_amax, d_amax, 4, cudaMemcpyDeviceToHost));
    good &= first_diff_report("global amax", &g_amax, &r_amax, 4);
  }
  int ndeq = 0;
  for (int d = 0; good && o.deq && d < 2; d++) {
    side *sd = sides[d];
    if (!sd->d_data) continue;
    size_t ob = (size_t)(sd->lay.data_rows * sd->lay.data_cols) * es;
    void *dout = dmalloc(ob), *hout = malloc(ob), *rout = malloc(ob);
    CK(cudaMemset(dout, 0xA5, ob));
    memset(rout, 0x5A, ob);
    bc_tensor out = { dout, dt, sd->lay.data_rows, sd->lay.data_cols, 0 }, rout_t = { rout, dt, sd->lay.data_rows, sd->lay.data_cols, 0 };
    bc_status ds = bc_dequantize(ctx, &q, (bc_direction)(d + 1), &out, NULL);
    CK(cudaDeviceSynchronize());
    bc_status rds = bc_ref_dequantize(ctx, &hq, (bc_direction)(d + 1), &rout_t);
    if (ds != BC_OK || rds != BC_OK) diag("  dequantize %s: %s", dn[d], bc_last_error(ctx));
    CK(cudaMemcpy(hout, dout, ob, cudaMemcpyDeviceToHost));
    char what[64];
    snprintf(what, sizeof what, "dequantize %s", dn[d]);
    good &= ds == BC_OK && rds == BC_OK && first_diff_report(what, hout, rout, ob);
    ndeq++;
    cudaFree(dout);
    free(hout);
    free(rout);
  }
  const char *dirn[] = { "", "row", "col", "rowcol" };
  char strided[64] = "";
  if (o.in_off || o.ld_extra) snprintf(strided, sizeof strided, " input +%d elements, ld %lld", o.in_off, (long long)ld);
  ok(good, "%s %s %lldx%lld %s kind %d%s%s%s%s (+%d dequantize)%s%s", info.name, bc_dtype_name(dt), (long long)rows,
     (long long)cols, dirn[dirs], o.kind, o.swz ? " swizzled" : "", o.sr ? " SR" : "", o.cast_amax ? " cast(amax)" : "", strided,
     ndeq, tag ? " " : "", tag ? tag : "");
  side_free(&sr);
  side_free(&sc);
  cudaFree(d_buf);
  cudaFree(d_amax);
  free(h_in);
  return good;
}

/* compact <-> swizzled conversion kernel against quantize's own swizzled output */
static void swizzle_case(const bc_format *f, int64_t rows, int64_t cols, bc_direction dir) {
  size_t n = (size_t)(rows * cols);
  void *h = malloc(n * 2);
  fill(h, BC_BF16, n, 0);
  void *d_in = dmalloc(n * 2);
  CK(cudaMemcpy(d_in, h, n * 2, cudaMemcpyHostToDevice));
  side c, s;
  side_alloc(f, rows, cols, dir, 0, &c);
  side_alloc(f, rows, cols, dir, 1, &s);
  float *amax = dmalloc(4);
  bc_tensor x = { d_in, BC_BF16, rows, cols, 0 };
  int row = dir == BC_ROWWISE;
  bc_qtensor qc = { f, rows, cols, row ? c.d_data : NULL, row ? c.d_scale : NULL, row ? NULL : c.d_data, row ? NULL : c.d_scale, amax, NULL, 0, 0, 0, 0 };
  bc_qtensor qs = qc;
  qs.scale_swizzled = 1;
  if (row) { qs.rowwise_data = s.d_data; qs.rowwise_scale_inv = s.d_scale; }
  else { qs.columnwise_data = s.d_data; qs.columnwise_scale_inv = s.d_scale; }
  int good = bc_quantize(ctx, &x, &qc, NULL) == BC_OK && bc_quantize(ctx, &x, &qs, NULL) == BC_OK;
  uint8_t *conv = dmalloc(s.lay.scale_bytes), *back = dmalloc(c.lay.scale_bytes);
  CK(cudaMemset(conv, 0xA5, s.lay.scale_bytes));
  CK(cudaMemset(back, 0xA5, c.lay.scale_bytes));
  good &= bc_scale_swizzle(ctx, f, rows, cols, dir, c.d_scale, 0, conv, NULL) == BC_OK;
  good &= bc_scale_swizzle(ctx, f, rows, cols, dir, conv, 1, back, NULL) == BC_OK;
  if (!good) diag("  %s", bc_last_error(ctx));
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(s.g_scale, s.d_scale, s.lay.scale_bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(c.g_scale, c.d_scale, c.lay.scale_bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(s.r_scale, conv, s.lay.scale_bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(c.r_scale, back, c.lay.scale_bytes, cudaMemcpyDeviceToHost));
  good = good && first_diff_report("compact -> swizzled", s.r_scale, s.g_scale, s.lay.scale_bytes) &&
         first_diff_report("swizzled -> compact", c.r_scale, c.g_scale, c.lay.scale_bytes);
  bc_format_info info;
  bc_format_get_info(ctx, f, &info);
  ok(good, "%s %lldx%lld %s: swizzle kernel both ways == quantize's swizzled and compact scales", info.name, (long long)rows,
     (long long)cols, row ? "rowwise" : "columnwise");
  side_free(&c);
  side_free(&s);
  cudaFree(conv); cudaFree(back); cudaFree(amax); cudaFree(d_in);
  free(h);
}

/* dequantize into an output with a row stride (elements) of data_cols + extra, against the
 * reference dequantize of the same codes: every combination of aligned / unaligned code rows and
 * output rows, with and without a short last slot; the gaps between output rows keep their poison */
static void deq_stride_case_s(const bc_format *f, bc_dtype dt, int64_t rows, int64_t cols, int64_t extra, int rand_scales);
static void deq_stride_case(const bc_format *f, bc_dtype dt, int64_t rows, int64_t cols, int64_t extra) {
  deq_stride_case_s(f, dt, rows, cols, extra, 0);
}
/* rand_scales (one-byte scales): the scale entries replaced by random bytes over the whole range
 * of the scale type, its extremes among them at a rate that leaves most slots of 8 entries without
 * one (the dequantize's fast paths) and some with (its general ones): e8m0 (rand_scales 1) 1 to 254
 * (factors up to 2^127: above the fold limit of the 4- and 6-bit fast path), 0 (2^-127) and 255
 * (NaN); ue4m3 (rand_scales 2) 1 to 126, 0 and 127 (NaN) */
static void deq_stride_case_s(const bc_format *f, bc_dtype dt, int64_t rows, int64_t cols, int64_t extra, int rand_scales) {
  size_t es = bc_dtype_size(dt), n = (size_t)(rows * cols);
  void *h = malloc(n * es);
  fill(h, dt, n, 0);
  void *d_in = dmalloc(n * es);
  CK(cudaMemcpy(d_in, h, n * es, cudaMemcpyHostToDevice));
  side sr, sc;
  int good = side_alloc(f, rows, cols, BC_ROWWISE, 0, &sr) && side_alloc(f, rows, cols, BC_COLUMNWISE, 0, &sc);
  float *amax = dmalloc(4);
  CK(cudaMemset(amax, 0, 4)); /* written by quantize for two-level formats only, copied back for all */
  bc_tensor x = { d_in, dt, rows, cols, 0 };
  bc_qtensor q = { f, rows, cols, sr.d_data, sr.d_scale, sc.d_data, sc.d_scale, amax, NULL, 0, 0, 0, 0 };
  good = good && bc_quantize(ctx, &x, &q, NULL) == BC_OK;
  if (!good) diag("  %s", bc_last_error(ctx));
  int specials = 0;
  if (good && rand_scales) {
    side *ss[2] = { &sr, &sc };
    uint64_t z = 0x9E3779B97F4A7C15ull;
    for (int d = 0; d < 2; d++) {
      uint8_t *b = malloc(ss[d]->lay.scale_bytes);
      for (size_t i = 0; i < ss[d]->lay.scale_bytes; i++) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        unsigned v = (unsigned)(z >> 32) % 1024u, top = rand_scales == 1 ? 255 : 127;
        b[i] = v == 0 ? 0 : v == 1 ? (uint8_t)top : (uint8_t)(1 + (z >> 8) % (top - 1));
        specials += v < 2;
      }
      CK(cudaMemcpy(ss[d]->d_scale, b, ss[d]->lay.scale_bytes, cudaMemcpyHostToDevice));
      free(b);
    }
  }
  /* the reference dequantizes the device's codes and scales */
  float h_amax = 0;
  if (good) {
    CK(cudaMemcpy(sr.g_data, sr.d_data, sr.lay.data_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sr.g_scale, sr.d_scale, sr.lay.scale_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sc.g_data, sc.d_data, sc.lay.data_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sc.g_scale, sc.d_scale, sc.lay.scale_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&h_amax, amax, 4, cudaMemcpyDeviceToHost));
  }
  bc_qtensor hq = { f, rows, cols, sr.g_data, sr.g_scale, sc.g_data, sc.g_scale, &h_amax, NULL, 0, 0, 0, 0 };
  side *sides[2] = { &sr, &sc };
  for (int d = 0; good && d < 2; d++) {
    int64_t dr = sides[d]->lay.data_rows, dc = sides[d]->lay.data_cols, ld = dc + extra;
    size_t ob = (size_t)(dr * ld) * es, cb = (size_t)(dr * dc) * es;
    void *dout = dmalloc(ob), *g = malloc(ob), *want = malloc(ob), *ref = malloc(cb);
    CK(cudaMemset(dout, 0xA5, ob));
    bc_tensor out = { dout, dt, dr, dc, ld }, rt = { ref, dt, dr, dc, 0 };
    good &= bc_dequantize(ctx, &q, (bc_direction)(d + 1), &out, NULL) == BC_OK;
    good &= bc_ref_dequantize(ctx, &hq, (bc_direction)(d + 1), &rt) == BC_OK;
    if (!good) diag("  %s", bc_last_error(ctx));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(g, dout, ob, cudaMemcpyDeviceToHost));
    memset(want, 0xA5, ob);
    for (int64_t r = 0; r < dr; r++) memcpy((char *)want + (size_t)(r * ld) * es, (char *)ref + (size_t)(r * dc) * es, (size_t)dc * es);
    good &= first_diff_report(d ? "columnwise strided dequantize" : "rowwise strided dequantize", g, want, ob);
    cudaFree(dout);
    free(g); free(want); free(ref);
  }
  bc_format_info info;
  bc_format_get_info(ctx, f, &info);
  ok(good, "%s %s %lldx%lld: dequantize into rows %lld elements longer == reference, gaps untouched%s", info.name,
     bc_dtype_name(dt), (long long)rows, (long long)cols, (long long)extra,
     rand_scales ? (specials ? ", random scale entries (0 and the NaN code among them)" : ", random scale entries (NO 0 or NaN drawn)")
                 : "");
  if (rand_scales && !specials) ok(0, "random scale entries drew no 0 or NaN code");
  side_free(&sr);
  side_free(&sc);
  cudaFree(d_in); cudaFree(amax);
  free(h);
}

/* stochastic rounding is unbiased: x constant per row, mean of the dequantized values over many
 * elements within 3 sigma of x */
static void sr_mean_case(const bc_format *f) {
  const int64_t rows = 64, cols = 4096;
  size_t n = (size_t)(rows * cols);
  float *h = malloc(n * 4);
  double xs[64];
  for (int64_t r = 0; r < rows; r++) {
    xs[r] = 0.1 + 5.3 * (double)r / rows;  /* spans several e2m1 binades at block scale 1 */
    for (int64_t c = 0; c < cols; c++) h[r * cols + c] = (float)xs[r];
    h[r * cols] = 6.0f;  /* every block's amax 6 at column 0 of the block */
    for (int64_t c = 0; c < cols; c += 16) h[r * cols + c] = 6.0f;
  }
  float *d_in = dmalloc(n * 4), *d_out = dmalloc(n * 4);
  CK(cudaMemcpy(d_in, h, n * 4, cudaMemcpyHostToDevice));
  side s;
  side_alloc(f, rows, cols, BC_ROWWISE, 0, &s);
  float *amax = dmalloc(4);
  float ga = 2688.0f;  /* S_enc = 1: block scale ue4m3(6 / 6) = 1 */
  CK(cudaMemcpy(amax, &ga, 4, cudaMemcpyHostToDevice));
  bc_tensor x = { d_in, BC_FP32, rows, cols, 0 }, out = { d_out, BC_FP32, rows, cols, 0 };
  bc_qtensor q = { f, rows, cols, s.d_data, s.d_scale, NULL, NULL, amax, NULL, 0, 1, 1234, 99 };
  int good = bc_quantize_cast(ctx, &x, &q, NULL) == BC_OK && bc_dequantize(ctx, &q, BC_ROWWISE, &out, NULL) == BC_OK;
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(h, d_out, n * 4, cudaMemcpyDeviceToHost));
  static const double grid[] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
  int worst_row = -1;
  double worst = 0;
  for (int64_t r = 0; r < rows && good; r++) {
    double x0 = xs[r], lo = 0, hi = 6, sum = 0;
    for (int i = 0; i < 7; i++)
      if (grid[i] <= x0 && x0 < grid[i + 1]) { lo = grid[i]; hi = grid[i + 1]; }
    double p = (x0 - lo) / (hi - lo), m = 0;
    for (int64_t c = 0; c < cols; c++)
      if (c % 16) { sum += h[r * cols + c]; m++; }
    double mean = sum / m, sigma = (hi - lo) * sqrt(p * (1 - p) / m) + 1e-12;
    double z = fabs(mean - ((float)x0)) / sigma;
    if (z > worst) { worst = z; worst_row = (int)r; }
  }
  ok(good && worst < 3.0, "%s stochastic rounding unbiased: worst |mean - x| = %.2f sigma (row %d) over %lld samples per value",
     "nvfp4", worst, worst_row, (long long)(cols - cols / 16));
  side_free(&s);
  cudaFree(d_in); cudaFree(d_out); cudaFree(amax);
  free(h);
}

/* The end of the run: the context and the test's cache directory go. */
static int finish(bc_ctx *ctx, const char *cache) {
  bc_ctx_destroy(ctx);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
  if (system(cmd) != 0) diag("could not remove %s", cache);
  return done_testing();
}

/* `name` is an entry of the comma-separated list */
static int listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
}

int main(void) {
  gpu_init_or_skip();
  char cache[] = "/tmp/bc-gpu-cache-XXXXXX";
  if (!mkdtemp(cache)) { printf("Bail out! mkdtemp\n"); return 1; }
  setenv("BLOCKCAST_CACHE_DIR", cache, 1);
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  diag("device: %s", gpu_name());
  const int quick = getenv("BC_TEST_QUICK") != NULL;
  if (quick) diag("BC_TEST_QUICK: shapes up to 4096x4096 only for bf16");
  /* BC_TEST_MAX_ELEMS=N (runs under compute-sanitizer): the format x shape cases up to N elements */
  const long long max_elems = getenv("BC_TEST_MAX_ELEMS") ? atoll(getenv("BC_TEST_MAX_ELEMS")) : 0;
  if (max_elems) diag("BC_TEST_MAX_ELEMS: shapes up to %lld elements", max_elems);
  const char *fmts[] = { "fp8_block_1x128", "fp8_block_128x128", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "nvfp4", "nvfp4_2d",
                         "mxfp6_e3m2", "mxfp6_e2m3" };
  const int nf = (int)(sizeof fmts / sizeof *fmts);
  /* shapes: the list, and one with rows shorter than 8 elements; sub-byte formats need rows
   * (transposed columnwise) and cols that are whole packing groups: 2 elements (4-bit), 4 (6-bit) */
  int64_t shapes8[][2] = { { 1, 1 }, { 33, 65 }, { 127, 129 }, { 256, 512 }, { 4096, 4096 }, { 8191, 8193 }, { 5, 3 },
                           { 4096, 1 }, { 1, 4096 }, { 3001, 5 }, { 7, 2001 } };
  int64_t shapes4[][2] = { { 2, 2 }, { 34, 66 }, { 126, 130 }, { 256, 512 }, { 4096, 4096 }, { 8190, 8194 }, { 6, 2 },
                           { 4096, 2 }, { 2, 4096 }, { 3002, 6 }, { 8, 2002 } };
  int64_t shapes6[][2] = { { 4, 4 }, { 36, 68 }, { 124, 132 }, { 256, 512 }, { 4096, 4096 }, { 8188, 8196 }, { 12, 4 },
                           { 4096, 4 }, { 4, 4096 }, { 3004, 8 }, { 8, 2004 } };
  /* 6: rows shorter than a slot of 8 (a flat slot spans several rows); 7-10: thin tensors (a few
   * rows or columns: 1D-block formats quantize them with quantize_thin.cu, one thread per block) */
  const int ns = 11;
  /* BC_TEST_FORMATS=a,b (to split the tier over processes): only those formats; the tests after
   * the per-format loop (NVFP4 stochastic rounding, tuning override, FLOOR spec) with nvfp4 */
  const char *only = getenv("BC_TEST_FORMATS");
  if (only) {
    diag("BC_TEST_FORMATS: %s", only);
    /* a misspelt name would silently test nothing */
    for (const char *p = only; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
      size_t n = strcspn(p, ",");
      int known = 0;
      for (int fi = 0; fi < nf; fi++) known |= strlen(fmts[fi]) == n && strncmp(p, fmts[fi], n) == 0;
      if (!known) ok(0, "BC_TEST_FORMATS: '%.*s' is not one of the block formats tested here", (int)n, p);
    }
  }
  for (int fi = 0; fi < nf; fi++) {
    if (only && !listed(only, fmts[fi])) continue;
    const bc_format *f;
    if (bc_format_get(ctx, fmts[fi], &f) != BC_OK) { ok(0, "format %s: %s", fmts[fi], bc_last_error(ctx)); continue; }
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    for (int si = 0; si < ns; si++) {
      int64_t r = SH(info, shapes8[si][0], shapes4[si][0], shapes6[si][0]);
      int64_t c = SH(info, shapes8[si][1], shapes4[si][1], shapes6[si][1]);
      int big = r * c >= 4096LL * 4096;
      for (int dt = 0; dt < 3; dt++) {
        if (quick && big && dt != BC_BF16) continue;
        if (quick && r * c > 4096LL * 4096) continue;
        if (max_elems && r * c > max_elems) continue;
        for (int dirs = 1; dirs <= 3; dirs++) {
          opts o = { 0 };
          o.deq = 1;
          run_case(f, (bc_dtype)dt, r, c, dirs, o, NULL);
          if (!big) {
            o.kind = 1; run_case(f, (bc_dtype)dt, r, c, dirs, o, NULL);
            o.kind = 2; o.deq = 0; run_case(f, (bc_dtype)dt, r, c, dirs, o, NULL);
            o.kind = 3; run_case(f, (bc_dtype)dt, r, c, dirs, o, NULL);
          }
        }
      }
    }
    /* swizzled scales straight from quantize, and the conversion kernel */
    for (int dirs = 1; dirs <= 3; dirs++) {
      opts o = { 0 };
      o.swz = 1;
      o.deq = 1;
      run_case(f, BC_BF16, SH(info, 127, 126, 124), SH(info, 129, 130, 132), dirs, o, NULL);
      run_case(f, BC_FP32, 256, 512, dirs, o, NULL);
      /* thin tensors (quantize_thin.cu) with swizzled scales: their padding's tail and side */
      if (info.block == BC_BLOCK_1D)
        for (int si = 7; si < ns; si++)
          run_case(f, BC_BF16, SH(info, shapes8[si][0], shapes4[si][0], shapes6[si][0]), SH(info, shapes8[si][1], shapes4[si][1], shapes6[si][1]),
                   dirs, o, NULL);
    }
    /* a tile cut by the last column with 16-byte aligned output rows (320 columns: whole 16-byte
     * pieces for every element width, not a multiple of the 128-column tiles): each tile row's
     * stored pieces end early (6-bit: BC_ROW_STAGED's aligned write of staged runs) */
    for (int dirs = 1; dirs <= 3; dirs++) {
      opts o = { 0 };
      o.deq = 1;
      run_case(f, BC_BF16, 200, 320, dirs, o, NULL);
      run_case(f, BC_FP32, 200, 320, dirs, o, NULL);
    }
    /* inputs whose rows are not 16-byte aligned, in whole tiles (element loads) and with output
     * rows that are not either (the shifted row writes of bc_write_rows): rows of an odd length,
     * with the tile holding the last row whole; an offset, strided input (gaps of NaN bits: a
     * kernel reading them would change the amaxes); an offset dense one (every row shifted alike) */
    for (int dt = 0; dt < 3; dt++)
      for (int dirs = 1; dirs <= 3; dirs++) {
        opts o = { 0 };
        run_case(f, (bc_dtype)dt, 256, SH(info, 513, 514, 516), dirs, o, NULL);
        o.in_off = 1; o.ld_extra = 3;
        run_case(f, (bc_dtype)dt, 200, 520, dirs, o, NULL);
        o.in_off = 3; o.ld_extra = 0;
        run_case(f, (bc_dtype)dt, 256, 512, dirs, o, NULL);
      }
    /* strided outputs: aligned codes + unaligned output rows, unaligned codes + aligned output
     * rows with a short last slot, both unaligned */
    {
      deq_stride_case(f, BC_BF16, 256, 512, 3);
      deq_stride_case(f, BC_FP32, 256, 512, 1);
      deq_stride_case(f, BC_BF16, SH(info, 81, 84, 84), 84, 4);
      deq_stride_case(f, BC_FP16, SH(info, 65, 66, 68), SH(info, 67, 70, 68), 5);
      int rs = !strcmp(info.scale_type, "e8m0") ? 1 : !strcmp(info.scale_type, "ue4m3") ? 2 : 0;
      if (rs) {
        deq_stride_case_s(f, BC_BF16, 256, 512, 0, rs);
        deq_stride_case_s(f, BC_FP32, SH(info, 97, 98, 100), SH(info, 131, 130, 132), 3, rs);
        deq_stride_case_s(f, BC_FP16, 128, 256, 0, rs);
      }
    }
    swizzle_case(f, 300, 520, BC_ROWWISE);
    swizzle_case(f, 300, 520, BC_COLUMNWISE);
    if (info.block == BC_BLOCK_1D && info.has_rowwise && info.has_columnwise) {
      const int64_t pk = info.element_pack;
      uint64_t thin = launches_of_quantize(f, 4096, pk), filled = launches_of_quantize(f, 256, 512);
      ok(thin > 0 && filled > 0 && thin == filled + 1, "%s: [4096, %lld] both directions takes quantize_thin.cu (%llu launches, one "
         "more than a filled [256, 512]'s %llu)", info.name, (long long)pk, (unsigned long long)thin, (unsigned long long)filled);
    }
    /* a shape the format cannot hold */
    if (info.element_pack > 1) {
      bc_qlayout l;
      char mult[32];
      snprintf(mult, sizeof mult, "multiple of %d", info.element_pack);
      bc_status s = bc_qtensor_layout(ctx, f, 4, 6 + info.element_pack + 1, BC_ROWWISE, 0, &l);
      ok(s == BC_ERR_ARG && strstr(bc_last_error(ctx), "cols") && strstr(bc_last_error(ctx), mult),
         "%s: [4, %d] rowwise refused, naming cols and the multiple: %s", info.name, 6 + info.element_pack + 1, bc_last_error(ctx));
      s = bc_qtensor_layout(ctx, f, 6 + info.element_pack + 1, 4, BC_COLUMNWISE, 0, &l);
      ok(s == BC_ERR_ARG && strstr(bc_last_error(ctx), "rows") && strstr(bc_last_error(ctx), mult),
         "%s: [%d, 4] columnwise refused, naming rows and the multiple: %s", info.name, 6 + info.element_pack + 1, bc_last_error(ctx));
    }
    /* two-level: the cast with a given (e.g. all-reduced) global amax */
    if (info.two_level) {
      opts o = { 0 };
      o.cast_amax = 1;
      o.deq = 1;
      run_case(f, BC_BF16, 126, 130, 3, o, NULL);
    }
    /* stochastic rounding: bit-exact against the reference */
    if (info.stochastic_rounding) {
      for (int dirs = 1; dirs <= 3; dirs++) {
        opts o = { 0 };
        o.sr = 1; o.seed = 0x123456789ull; o.offset = 7; o.deq = 1;
        run_case(f, BC_BF16, 126, 130, dirs, o, NULL);
        run_case(f, BC_FP32, 512, 1024, dirs, o, NULL);
      }
    }
  }
  bc_stats st;
  bc_get_stats(ctx, &st);
  is_int(st.nvrtc_compiles, 0, "built-in block formats used AOT kernels only: no NVRTC call (%llu AOT kernels loaded)",
         (unsigned long long)st.aot_hits);
  if (only && !listed(only, "nvfp4")) return finish(ctx, cache);
  const bc_format *nv;
  bc_format_get(ctx, "nvfp4", &nv);
  sr_mean_case(nv);

  /* stochastic rounding does not depend on the tile shape: the same (seed, offset) through
   * kernels compiled with another tile and thread count (a tuning override, NVRTC) */
  {
    char tpath[256];
    snprintf(tpath, sizeof tpath, "/tmp/bc-tuning-%ld.lua", (long)getpid());
    FILE *fp = fopen(tpath, "wb");
    fputs("amax = { threads = 256, unroll = 2 }\nquantize_row = { threads = 128, unroll = 2 }\n"
          "quantize_tile = { threads = 256, tile_rows = 64, tile_cols = 64, col_vec = 16 }\n"
          "dequantize = { threads = 128, unroll = 2 }\nquantize_block = { threads = 128, tile_rows = 128, tile_cols = 128 }\n"
          "dequantize_block = { threads = 128, blocks_per_sm = 2 }\n", fp);
    fclose(fp);
    setenv("BLOCKCAST_TUNING", tpath, 1);
    bc_ctx *c2;
    bc_ctx *c1 = ctx;
    if (bc_ctx_create(&c2, err, sizeof err) == BC_OK) {
      const bc_format *f2;
      bc_format_get(c2, "nvfp4", &f2);
      ctx = c2;
      for (int dirs = 1; dirs <= 3; dirs++) {
        opts o = { 0 };
        o.sr = 1; o.seed = 0x123456789ull; o.offset = 7;
        run_case(f2, BC_BF16, 126, 130, dirs, o, "(128 threads, 128x128 tiles)");
      }
      bc_get_stats(c2, &st);
      ok(st.nvrtc_compiles >= 3, "the other tile shape was compiled with NVRTC (%llu compiles)", (unsigned long long)st.nvrtc_compiles);
      ctx = c1;
      bc_ctx_destroy(c2);
    } else {
      ok(0, "context with a tuning override: %s", err);
    }
    unsetenv("BLOCKCAST_TUNING");
    unlink(tpath);
  }

  /* formats that exist only as specs, loaded at run time and compiled by NVRTC: nan_policy
   * "scale_nan" for an e8m0 (RCEIL), a two-level ue4m3 and an fp32-scaled format; MXFP6 with the
   * other packing order and the FLOOR rule */
  {
    static const char *const specs[] = {
      "name = \"mxfp4_nanblock\"\ndescription = \"MXFP4, NaN marks the block\"\nelement = \"e2m1\"\n"
      "block = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"rceil\" }\npacking = \"low_first\"\n"
      "nan_policy = \"scale_nan\"\n"
      "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
      "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
      "name = \"nvfp4_nanblock\"\ndescription = \"NVFP4, NaN marks the block\"\nelement = \"e2m1\"\n"
      "block = { rows = 1, cols = 16 }\nscale = { type = \"ue4m3\", rule = \"two_level\" }\npacking = \"low_first\"\n"
      "nan_policy = \"scale_nan\"\n"
      "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
      "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
      "name = \"fp8_1x128_nanblock\"\ndescription = \"FP8 1x128, NaN marks the block\"\nelement = \"e4m3\"\n"
      "block = { rows = 1, cols = 128 }\nscale = { type = \"fp32\", rule = \"amax\" }\nnan_policy = \"scale_nan\"\n"
      "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\" } }\n"
      "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\" } }\n",
      "name = \"mxfp6_e2m3_hf_floor\"\ndescription = \"MXFP6 e2m3, high_first, FLOOR\"\nelement = \"e2m3\"\n"
      "block = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"floor\" }\npacking = \"high_first\"\n"
      "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
      "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
      char path[256];
      snprintf(path, sizeof path, "/tmp/bc-spec-%ld-%zu.lua", (long)getpid(), i);
      FILE *fp = fopen(path, "wb");
      fputs(specs[i], fp);
      fclose(fp);
      const bc_format *sf = NULL;
      is_int(bc_format_load(ctx, path, &sf), BC_OK, "spec %zu loads at run time: %s", i, sf ? "" : bc_last_error(ctx));
      unlink(path);
      if (!sf) continue;
      bc_format_info si;
      bc_format_get_info(ctx, sf, &si);
      for (int dirs = 1; dirs <= 3; dirs++) {
        opts o = { 0 };
        o.deq = 1;
        run_case(sf, BC_BF16, SH(si, 127, 126, 124), SH(si, 129, 130, 132), dirs, o, NULL);
        o.kind = 1;
        run_case(sf, BC_FP32, 64, 96, dirs, o, NULL);
        o.kind = 0;
        run_case(sf, BC_FP16, 256, 512, dirs, o, NULL);
      }
    }
  }

  /* the FLOOR rule (OCP reference) as a spec option, loaded at run time and compiled by NVRTC */
  {
    char path[256];
    snprintf(path, sizeof path, "/tmp/bc-floor-%ld.lua", (long)getpid());
    FILE *fp = fopen(path, "wb");
    fputs("name = \"mxfp8_e4m3_floor\"\ndescription = \"MXFP8 e4m3, FLOOR scale rule\"\nelement = \"e4m3\"\n"
          "block = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"floor\" }\n"
          "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
          "columnwise = { layout = \"rowmajor\", scale_layout = { order = \"transposed\", pad_rows = 4, pad_cols = 128 } }\n", fp);
    fclose(fp);
    const bc_format *ff;
    is_int(bc_format_load(ctx, path, &ff), BC_OK, "FLOOR-rule spec loads at run time");
    unlink(path);
    if (ff)
      for (int dirs = 1; dirs <= 3; dirs++) {
        opts o = { 0 };
        o.deq = 1;
        run_case(ff, BC_BF16, 127, 129, dirs, o, NULL);
        o.kind = 1;
        run_case(ff, BC_FP32, 64, 96, dirs, o, NULL);
      }
  }
  return finish(ctx, cache);
}
