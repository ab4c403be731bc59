/* 14-block-ref: the CPU reference of the block formats (fp8_block_1x128, fp8_block_128x128,
 * mxfp8_e4m3, mxfp8_e5m2, mxfp4, nvfp4, nvfp4_2d, mxfp6_e3m2, mxfp6_e2m3), checked against what
 * DESIGN.md says, computed here independently: the layout table (plain and 128x4-swizzled scales),
 * hand-computed vectors (scale codes, element codes, nibble order, 6-bit groups of 4 elements in
 * 3 bytes in both packing orders, NaN/Inf, zero padding), nan_policy (satfinite and scale_nan
 * specs loaded at run time), 2D blocks (per-row scales,
 * columnwise = exact transpose), Philox4x32-10 known answers, stochastic rounding (determinism,
 * unbiasedness), nearest-code and scale-rule properties on random data with specials in every
 * dtype and direction, exact round trips, and argument errors. CPU only. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ref/bc_ref.h"
#include "tap.h"

static bc_ctx *ctx;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t rup(int64_t a, int64_t m) { return cdiv(a, m) * m; }
static float f32(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bits32(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd64(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double unif(void) { return (double)(rnd64() >> 11) / 9007199254740992.0; }
static double gauss(void) {
  double u = unif() + 1e-300, v = unif();
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* ---- the formats, as the spec files and DESIGN.md describe them ---- */

enum { R_AMAX, R_RCEIL, R_TWO };
typedef struct tfmt {
  const char *name;
  int bits;          /* element bits */
  int blk;           /* block length (2D: the square's side) */
  int two_d;
  int se;            /* bytes per scale entry */
  int rule;
  int scale_tr[2];   /* the stored compact scale matrix is the transpose of the logical one */
  int col_data_tr;   /* columnwise data is [K, M] */
  int per_row;       /* one scale entry per view row (the 2D block's scale repeated) */
  double emax;
} tfmt;

static const tfmt FMTS[] = {
  { "fp8_block_1x128", 8, 128, 0, 4, R_AMAX, { 1, 1 }, 1, 0, 448 },
  { "fp8_block_128x128", 8, 128, 1, 4, R_AMAX, { 0, 0 }, 1, 0, 448 },
  { "mxfp8_e4m3", 8, 32, 0, 1, R_RCEIL, { 0, 1 }, 0, 0, 448 },
  { "mxfp8_e5m2", 8, 32, 0, 1, R_RCEIL, { 0, 1 }, 0, 0, 57344 },
  { "mxfp4", 4, 32, 0, 1, R_RCEIL, { 0, 0 }, 1, 0, 6 },
  { "nvfp4", 4, 16, 0, 1, R_TWO, { 0, 0 }, 1, 0, 6 },
  { "nvfp4_2d", 4, 16, 1, 1, R_TWO, { 0, 0 }, 1, 1, 6 },
  { "mxfp6_e3m2", 6, 32, 0, 1, R_RCEIL, { 0, 0 }, 1, 0, 28 },
  { "mxfp6_e2m3", 6, 32, 0, 1, R_RCEIL, { 0, 0 }, 1, 0, 7.5 },
};
#define NFMTS (int)(sizeof FMTS / sizeof FMTS[0])

static const bc_format *fmt(const char *name) {
  const bc_format *f = NULL;
  if (bc_format_get(ctx, name, &f) != BC_OK) {
    printf("Bail out! format %s: %s\n", name, bc_last_error(ctx));
    exit(1);
  }
  return f;
}

/* elements per packing group and bytes per group (a data row holds whole groups): 8-bit 1 / 1,
 * 4-bit 2 / 1, 6-bit 4 / 3 */
static int pack_n(const tfmt *t) { return t->bits == 4 ? 2 : t->bits == 6 ? 4 : 1; }
static int pack_bytes(const tfmt *t) { return t->bits == 6 ? 3 : 1; }

/* element values written out by hand: e4m3 / e5m2 (sign bit 7), e2m1 (sign bit 3), e3m2 / e2m3
 * (sign bit 5), ue4m3 */
static double e2m1_value(unsigned c) {
  static const double v[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
  return (c & 8) ? -v[c & 7] : v[c & 7];
}
static double fp8_value(unsigned c, int eb, int mb, int bias) {
  unsigned s = (c >> 7) & 1, e = (c >> mb) & ((1u << eb) - 1), m = c & ((1u << mb) - 1);
  double v = e ? ldexp(1.0 + m / (double)(1 << mb), (int)e - bias) : ldexp((double)m, 1 - bias - mb);
  return s ? -v : v;
}
/* 6-bit: sign bit 5; no Inf, no NaN codes */
static double fp6_value(unsigned c, int eb, int mb, int bias) {
  unsigned s = (c >> 5) & 1, e = (c >> mb) & ((1u << eb) - 1), m = c & ((1u << mb) - 1);
  double v = e ? ldexp(1.0 + m / (double)(1 << mb), (int)e - bias) : ldexp((double)m, 1 - bias - mb);
  return s ? -v : v;
}
/* value of element code c of format t; NaN for NaN codes, Inf for e5m2's Inf */
static double elem_value(const tfmt *t, unsigned c) {
  if (t->bits == 4) return e2m1_value(c);
  if (t->bits == 6) return t->emax == 28 ? fp6_value(c, 3, 2, 3) : fp6_value(c, 2, 3, 1);
  if (t->emax == 448) return (c & 0x7F) == 0x7F ? NAN : fp8_value(c, 4, 3, 7);
  if ((c & 0x7F) == 0x7C) return (c & 0x80) ? -INFINITY : INFINITY;
  if ((c & 0x7F) > 0x7C) return NAN;
  return fp8_value(c, 5, 2, 15);
}
static double ue4m3_value(unsigned c) { return c == 0x7F ? NAN : fp8_value(c & 0x7F, 4, 3, 7); }
static int sign_bit(const tfmt *t) { return t->bits == 4 ? 8 : t->bits == 6 ? 0x20 : 0x80; }
static unsigned max_code(const tfmt *t) { return t->bits == 4 ? 0x7 : t->bits == 6 ? 0x1F : t->emax == 448 ? 0x7E : 0x7B; }
/* e2m1, e3m2 and e2m3 have no NaN: +max */
static unsigned nan_code(const tfmt *t) { return t->bits == 4 ? 0x7 : t->bits == 6 ? 0x1F : 0x7F; }

/* the positive finite values of the element, ascending */
static int pos_values(const tfmt *t, double *v) {
  int n = 0;
  for (unsigned c = 0; c <= max_code(t); c++) v[n++] = elem_value(t, c);
  return n;
}

/* the code values next to a (0 <= a < max): lo <= a < hi */
static void bracket(const double *pv, int npv, double a, double *lo, double *hi) {
  int i = 0;
  while (i + 2 < npv && pv[i + 1] <= a) i++;
  *lo = pv[i];
  *hi = pv[i + 1];
}

/* ---- layouts ---- */

static bc_status layout(const bc_format *f, int64_t rows, int64_t cols, bc_direction dir, int swz, bc_qlayout *L) {
  memset(L, 0, sizeof *L);
  return bc_qtensor_layout(ctx, f, rows, cols, dir, swz, L);
}

/* DESIGN.md's table for [M, K]; lr x lc: the logical scale matrix (one row per data row, or per
 * block row for 128x128; one column per block along the row), which the swizzle takes. */
static void design_layout(const tfmt *t, int64_t M, int64_t K, int col, int swz, bc_qlayout *E) {
  memset(E, 0, sizeof *E);
  E->data_rows = col && t->col_data_tr ? K : M;
  E->data_cols = col && t->col_data_tr ? M : K;
  E->data_bytes = (size_t)(E->data_rows * E->data_cols * t->bits / 8);
  int64_t sr, sc, vr, vc, lr, lc;
  if (strcmp(t->name, "fp8_block_1x128") == 0) {
    /* rowwise fp32 [ceil(K/128), roundup(M,4)]; columnwise [ceil(M/128), roundup(K,4)] */
    sr = col ? cdiv(M, 128) : cdiv(K, 128);
    sc = col ? rup(K, 4) : rup(M, 4);
    vr = sr; vc = col ? K : M;
    lr = vc; lc = vr;
  } else if (strcmp(t->name, "fp8_block_128x128") == 0) {
    /* rowwise [ceil(M/128), roundup(ceil(K/128),4)]; columnwise [ceil(K/128), roundup(ceil(M/128),4)] */
    sr = col ? cdiv(K, 128) : cdiv(M, 128);
    vc = col ? cdiv(M, 128) : cdiv(K, 128);
    sc = rup(vc, 4); vr = sr;
    lr = vr; lc = vc;
  } else if (t->bits == 8) {
    /* MXFP8: rowwise e8m0 [roundup(M,128), roundup(ceil(K/32),4)]; columnwise
     * [roundup(ceil(M/32),4), roundup(K,128)] */
    if (!col) { sr = rup(M, 128); sc = rup(cdiv(K, 32), 4); vr = M; vc = cdiv(K, 32); lr = vr; lc = vc; }
    else { sr = rup(cdiv(M, 32), 4); sc = rup(K, 128); vr = cdiv(M, 32); vc = K; lr = K; lc = vr; }
  } else {
    /* MXFP4 / NVFP4 (1D and 2D): rowwise [roundup(M,128), roundup(ceil(K/b),4)], columnwise
     * [roundup(K,128), roundup(ceil(M/b),4)] */
    int64_t b = t->blk;
    if (!col) { sr = rup(M, 128); sc = rup(cdiv(K, b), 4); vr = M; vc = cdiv(K, b); }
    else { sr = rup(K, 128); sc = rup(cdiv(M, b), 4); vr = K; vc = cdiv(M, b); }
    lr = vr; lc = vc;
  }
  if (swz) { sr = rup(lr, 128); sc = rup(lc, 4); vr = lr; vc = lc; }
  E->scale_rows = sr;
  E->scale_cols = sc;
  E->scale_valid_rows = vr;
  E->scale_valid_cols = vc;
  E->scale_elem_bytes = (size_t)t->se;
  E->scale_bytes = (size_t)(sr * sc * t->se);
}

static int same_layout(const bc_qlayout *a, const bc_qlayout *b) {
  return a->data_rows == b->data_rows && a->data_cols == b->data_cols && a->data_bytes == b->data_bytes &&
         a->scale_rows == b->scale_rows && a->scale_cols == b->scale_cols && a->scale_valid_rows == b->scale_valid_rows &&
         a->scale_valid_cols == b->scale_valid_cols && a->scale_elem_bytes == b->scale_elem_bytes &&
         a->scale_bytes == b->scale_bytes;
}

static void show_layout(const char *what, const bc_qlayout *L) {
  diag("%s: data [%lld, %lld] %zu bytes; scale [%lld, %lld] valid [%lld, %lld] x %zu = %zu bytes", what,
       (long long)L->data_rows, (long long)L->data_cols, L->data_bytes, (long long)L->scale_rows, (long long)L->scale_cols,
       (long long)L->scale_valid_rows, (long long)L->scale_valid_cols, L->scale_elem_bytes, L->scale_bytes);
}

static void test_layouts(void) {
  static const int64_t shapes[][2] = { { 1, 1 }, { 33, 65 }, { 127, 129 }, { 256, 512 }, { 8191, 8193 }, { 2, 2 },
                                       { 34, 66 }, { 130, 258 }, { 8190, 8194 }, { 128, 128 }, { 1, 4096 }, { 4096, 1 },
                                       { 600, 30 }, { 4, 4 }, { 36, 68 }, { 132, 260 }, { 8188, 8196 }, { 12, 100 },
                                       { 6, 8 }, { 8, 6 } };
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  for (int i = 0; i < NFMTS; i++) {
    const tfmt *t = &FMTS[i];
    const bc_format *f = fmt(t->name);
    for (int col = 0; col < 2; col++)
      for (int swz = 0; swz < 2; swz++) {
        int bad = 0, errs = 0, n = 0;
        for (int k = 0; k < nshapes; k++) {
          int64_t M = shapes[k][0], K = shapes[k][1];
          /* the length of a data row: cols rowwise, rows for the (transposed) columnwise data */
          int64_t row_len = col && t->col_data_tr ? M : K;
          bc_qlayout L, E;
          bc_status s = layout(f, M, K, col ? BC_COLUMNWISE : BC_ROWWISE, swz, &L);
          if (row_len % pack_n(t)) {
            /* a data row that does not hold whole packing groups cannot be stored: the error says
             * the group, names the dimension and the multiple */
            char want[96], why[160];
            snprintf(want, sizeof want, "%s is %lld; expected a multiple of %d", col && t->col_data_tr ? "rows" : "cols",
                     (long long)row_len, pack_n(t));
            snprintf(why, sizeof why, "format '%s' packs %d %d-bit elements in %d byte(s), so its %s data rows must hold whole groups",
                     t->name, pack_n(t), t->bits, pack_bytes(t), col ? "columnwise" : "rowwise");
            const char *msg = bc_last_error(ctx);
            if (s != BC_ERR_ARG || !strstr(msg, want) || !strstr(msg, why)) {
              errs++;
              diag("%s %s [%lld, %lld]: status %d, message: %s", t->name, col ? "columnwise" : "rowwise", (long long)M,
                   (long long)K, (int)s, msg);
            }
            continue;
          }
          n++;
          design_layout(t, M, K, col, swz, &E);
          if (s != BC_OK || !same_layout(&L, &E)) {
            if (bad++ < 3) {
              diag("%s %s%s [%lld, %lld]: status %d %s", t->name, col ? "columnwise" : "rowwise", swz ? " swizzled" : "",
                   (long long)M, (long long)K, (int)s, s ? bc_last_error(ctx) : "");
              show_layout("  got     ", &L);
              show_layout("  expected", &E);
            }
          }
        }
        ok(bad == 0 && errs == 0, "%s %s%s: layouts of %d shapes = DESIGN.md's table%s", t->name,
           col ? "columnwise" : "rowwise", swz ? " (128x4 swizzled scales)" : "", n,
           pack_n(t) > 1 ? "; rows of partial packing groups rejected naming the dimension" : "");
      }
  }
  /* the messages themselves */
  const bc_format *f = fmt("mxfp4");
  bc_qlayout L;
  is_int(layout(f, 33, 65, BC_ROWWISE, 0, &L), BC_ERR_ARG, "mxfp4 rowwise [33, 65]: BC_ERR_ARG");
  is_str_has(bc_last_error(ctx), "cols is 65; expected a multiple of 2", "  message names cols and the multiple");
  is_int(layout(fmt("nvfp4"), 33, 64, BC_COLUMNWISE, 0, &L), BC_ERR_ARG, "nvfp4 columnwise [33, 64]: BC_ERR_ARG");
  is_str_has(bc_last_error(ctx), "rows is 33; expected a multiple of 2", "  message names rows and the multiple");
  is_int(layout(fmt("nvfp4"), 33, 64, BC_ROWWISE, 0, &L), BC_OK, "nvfp4 rowwise [33, 64] is fine (only columnwise needs even rows)");
  is_int(layout(f, 2, 7, BC_ROWWISE, 0, &L), BC_ERR_ARG, "mxfp4 rowwise [2, 7]: BC_ERR_ARG");
  is_str_has(bc_last_error(ctx),
             "format 'mxfp4' packs 2 4-bit elements in 1 byte(s), so its rowwise data rows must hold whole groups: cols is 7; "
             "expected a multiple of 2",
             "  the whole message");
  /* 6-bit: 4 elements in 3 bytes, so rows of a multiple of 4 (an even length is not enough) */
  is_int(layout(fmt("mxfp6_e2m3"), 4, 7, BC_ROWWISE, 0, &L), BC_ERR_ARG, "mxfp6_e2m3 rowwise [4, 7]: BC_ERR_ARG");
  is_str_has(bc_last_error(ctx),
             "format 'mxfp6_e2m3' packs 4 6-bit elements in 3 byte(s), so its rowwise data rows must hold whole groups: cols is 7; "
             "expected a multiple of 4",
             "  the whole message");
  is_int(layout(fmt("mxfp6_e3m2"), 4, 6, BC_ROWWISE, 0, &L), BC_ERR_ARG, "mxfp6_e3m2 rowwise [4, 6]: BC_ERR_ARG (even, not a multiple of 4)");
  is_str_has(bc_last_error(ctx), "cols is 6; expected a multiple of 4", "  message names cols and the multiple");
  is_int(layout(fmt("mxfp6_e3m2"), 6, 8, BC_COLUMNWISE, 0, &L), BC_ERR_ARG, "mxfp6_e3m2 columnwise [6, 8]: BC_ERR_ARG");
  is_str_has(bc_last_error(ctx),
             "format 'mxfp6_e3m2' packs 4 6-bit elements in 3 byte(s), so its columnwise data rows must hold whole groups: rows is 6; "
             "expected a multiple of 4",
             "  the whole message names rows");
  is_int(layout(fmt("mxfp6_e3m2"), 6, 8, BC_ROWWISE, 0, &L), BC_OK, "mxfp6_e3m2 rowwise [6, 8] is fine (only columnwise needs rows of a multiple of 4)");
  ok(L.data_rows == 6 && L.data_cols == 8 && L.data_bytes == 36, "  data [6, 8] in 36 bytes (8 elements in 6 bytes a row)");
  is_int(layout(fmt("mxfp6_e2m3"), 4, 6, BC_COLUMNWISE, 0, &L), BC_OK, "mxfp6_e2m3 columnwise [4, 6] is fine");
  ok(L.data_rows == 6 && L.data_cols == 4 && L.data_bytes == 18, "  columnwise data transposed [6, 4] in 18 bytes");
}

/* ---- quantized buffers ---- */

typedef struct qbuf {
  bc_qtensor q;
  bc_qlayout L[2];
  uint8_t *data[2], *scale[2];
  float amax;
} qbuf;

/* dirs: 1 rowwise, 2 columnwise, 3 both; buffers poisoned with `poison` */
static void qalloc(qbuf *b, const bc_format *f, int64_t M, int64_t K, int dirs, int swz, int poison) {
  memset(b, 0, sizeof *b);
  b->q.format = f;
  b->q.rows = M;
  b->q.cols = K;
  b->q.scale_swizzled = swz;
  b->q.amax = &b->amax;
  for (int d = 0; d < 2; d++) {
    if (!(dirs & (1 << d))) continue;
    if (layout(f, M, K, d ? BC_COLUMNWISE : BC_ROWWISE, swz, &b->L[d]) != BC_OK) {
      printf("Bail out! layout: %s\n", bc_last_error(ctx));
      exit(1);
    }
    b->data[d] = malloc(b->L[d].data_bytes);
    b->scale[d] = malloc(b->L[d].scale_bytes);
    memset(b->data[d], poison, b->L[d].data_bytes);
    memset(b->scale[d], poison, b->L[d].scale_bytes);
  }
  b->q.rowwise_data = b->data[0];
  b->q.rowwise_scale_inv = b->scale[0];
  b->q.columnwise_data = b->data[1];
  b->q.columnwise_scale_inv = b->scale[1];
}

static void qfree(qbuf *b) {
  for (int d = 0; d < 2; d++) { free(b->data[d]); free(b->scale[d]); }
}

/* 6-bit, low_first: a group of 4 elements in 3 bytes, e0 | e1 << 6 | e2 << 12 | e3 << 18 little-endian:
 * byte0 = e0 | (e1 & 3) << 6, byte1 = e1 >> 2 | (e2 & 0xF) << 4, byte2 = e2 >> 4 | e3 << 2 */
static unsigned fp6_get(const uint8_t *g, int k) {
  switch (k) {
  case 0: return g[0] & 0x3F;
  case 1: return (unsigned)(g[0] >> 6) | (unsigned)(g[1] & 0xF) << 2;
  case 2: return (unsigned)(g[1] >> 4) | (unsigned)(g[2] & 0x3) << 4;
  default: return g[2] >> 2;
  }
}
static void fp6_pack(const unsigned e[4], uint8_t *g) {
  g[0] = (uint8_t)(e[0] | (e[1] & 3) << 6);
  g[1] = (uint8_t)(e[1] >> 2 | (e[2] & 0xF) << 4);
  g[2] = (uint8_t)(e[2] >> 4 | e[3] << 2);
}

static unsigned code_at(const tfmt *t, const qbuf *b, int d, int64_t i) {
  if (t->bits == 8) return b->data[d][i];
  if (t->bits == 6) return fp6_get(b->data[d] + i / 4 * 3, (int)(i % 4));
  return (b->data[d][i / 2] >> ((i & 1) ? 4 : 0)) & 0xF; /* element 2j in the low nibble */
}

/* offset of logical scale entry (r, c) in the stored buffer of direction d */
static int64_t scale_off(const tfmt *t, const qbuf *b, int d, int64_t r, int64_t c) {
  const bc_qlayout *L = &b->L[d];
  if (b->q.scale_swizzled) {
    int64_t cols = L->scale_cols; /* padded to 4: ceil(cols / 4) groups of 4 */
    return (r / 128) * (cols / 4) * 512 + (c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
  }
  return t->scale_tr[d] ? c * L->scale_cols + r : r * L->scale_cols + c;
}

/* logical scale entry of view element (vr, vc) */
static void scale_rc(const tfmt *t, int64_t vr, int64_t vc, int64_t *r, int64_t *c) {
  *r = t->per_row ? vr : t->two_d ? vr / t->blk : vr;
  *c = vc / t->blk;
}

static uint32_t scale_entry(const tfmt *t, const qbuf *b, int d, int64_t vr, int64_t vc) {
  int64_t r, c;
  scale_rc(t, vr, vc, &r, &c);
  int64_t off = scale_off(t, b, d, r, c);
  if (t->se == 4) { uint32_t v; memcpy(&v, b->scale[d] + off * 4, 4); return v; }
  return b->scale[d][off];
}

/* data index of view element (vr, vc) */
static int64_t data_index(const tfmt *t, const qbuf *b, int d, int64_t vr, int64_t vc) {
  int as_view = d == 0 || t->col_data_tr;
  return as_view ? vr * b->L[d].data_cols + vc : vc * b->L[d].data_cols + vr;
}

/* the two-level S_enc / S_dec for global amax g (DESIGN.md) */
static void two_level(float g, float *senc, float *sdec) {
  float s = fminf(2688.0f / g, FLT_MAX);
  if (g == 0.0f || s == 0.0f) s = 1.0f;
  *senc = s;
  *sdec = (float)(1.0 / (double)s);
}

/* dequant factor of a stored scale entry */
static double factor_of(const tfmt *t, uint32_t e, float sdec) {
  if (t->rule == R_AMAX) return f32(e);
  if (t->rule == R_RCEIL) return e == 255 ? NAN : ldexp(1.0, (int)e - 127);
  return ue4m3_value(e) * sdec;
}

/* the logical positions no block uses must be zero, and every position one uses must be written */
static int padding_ok(const tfmt *t, const qbuf *b, int d, int poison, const char *what) {
  const bc_qlayout *L = &b->L[d];
  int64_t n = (int64_t)(L->scale_bytes / L->scale_elem_bytes);
  char *used = calloc((size_t)n, 1);
  int64_t lr = t->scale_tr[d] && !b->q.scale_swizzled ? L->scale_valid_cols : L->scale_valid_rows;
  int64_t lc = t->scale_tr[d] && !b->q.scale_swizzled ? L->scale_valid_rows : L->scale_valid_cols;
  int bad = 0;
  for (int64_t r = 0; r < lr; r++)
    for (int64_t c = 0; c < lc; c++) {
      int64_t off = scale_off(t, b, d, r, c);
      if (off < 0 || off >= n) { bad++; continue; }
      used[off] = 1;
    }
  int64_t unused = 0, nonzero = 0, unwritten = 0;
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *p = b->scale[d] + i * (int64_t)L->scale_elem_bytes;
    int z = 1, pz = 1;
    for (size_t k = 0; k < L->scale_elem_bytes; k++) { z &= p[k] == 0; pz &= p[k] == (uint8_t)poison; }
    if (!used[i]) { unused++; nonzero += !z; }
    else unwritten += pz;
  }
  free(used);
  if (bad || nonzero || unwritten)
    diag("%s: %d entries outside the buffer, %lld of %lld padding entries not zero, %lld used entries still poisoned", what,
         bad, (long long)nonzero, (long long)unused, (long long)unwritten);
  return !bad && !nonzero && !unwritten;
}

/* ---- input tensors ---- */

static uint16_t to_bf16(float f) {
  if (isnan(f)) return 0x7FFF;
  uint32_t b = bits32(f);
  uint32_t lower = b & 0xFFFF, upper = b >> 16;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) upper++;
  return (uint16_t)upper;
}
static uint16_t to_fp16(float f) {
  if (isnan(f)) return 0x7E00;
  uint16_t s = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (a >= 65520.0) return s | 0x7C00;
  if (a < ldexp(1, -14)) return s | (uint16_t)nearbyint(a * ldexp(1, 24));
  int e;
  double m = frexp(a, &e);
  e -= 1;
  double q = nearbyint((2 * m - 1) * 1024);
  if (q == 1024) { q = 0; e++; }
  if (e + 15 >= 31) return s | 0x7C00;
  return s | (uint16_t)(((e + 15) << 10) | (int)q);
}
static float from_fp16(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (float)(s ? -v : v);
}

typedef struct hp {
  bc_tensor t;
  float *v; /* the values as fp32 (after rounding to the dtype) */
} hp;

static void hp_alloc(hp *h, bc_dtype dt, int64_t M, int64_t K, int64_t stride) {
  h->t.dtype = dt;
  h->t.rows = M;
  h->t.cols = K;
  h->t.row_stride = stride;
  int64_t ld = stride ? stride : K;
  h->t.data = calloc((size_t)(M * ld), 4);
  h->v = calloc((size_t)(M * K), sizeof(float));
}
static void hp_set(hp *h, int64_t r, int64_t c, float x) {
  int64_t ld = h->t.row_stride ? h->t.row_stride : h->t.cols, i = r * ld + c;
  float v = x;
  switch (h->t.dtype) {
  case BC_FP32: ((float *)h->t.data)[i] = x; break;
  case BC_BF16: { uint16_t b = to_bf16(x); ((uint16_t *)h->t.data)[i] = b; v = f32((uint32_t)b << 16); break; }
  case BC_FP16: { uint16_t b = to_fp16(x); ((uint16_t *)h->t.data)[i] = b; v = from_fp16(b); break; }
  }
  h->v[r * h->t.cols + c] = v;
}
static float hp_get(const hp *h, int64_t r, int64_t c) { return h->v[r * h->t.cols + c]; }
static void hp_free(hp *h) { free(h->t.data); free(h->v); }

static bc_tensor out_f32(float *p, int64_t rows, int64_t cols) {
  bc_tensor o = { p, BC_FP32, rows, cols, 0 };
  return o;
}

/* ---- (2) hand-computed vectors ---- */

static void test_mxfp8_hand(void) {
  const tfmt *t = &FMTS[2];
  const bc_format *f = fmt("mxfp8_e4m3");
  hp x;
  hp_alloc(&x, BC_FP32, 1, 160, 0);
  /* block 0: amax 448 (-> 127, encode factor 1): 448, then the values of codes 0x31..0x4F */
  hp_set(&x, 0, 0, 448.0f);
  for (int j = 1; j < 32; j++) hp_set(&x, 0, j, (float)fp8_value(0x30 + (unsigned)j, 4, 3, 7));
  /* block 1: amax 449 (-> 128, factor 1/2): 449 -> 224.5 -> 224 (0x76); 3 -> 1.5 (0x3C) */
  hp_set(&x, 0, 32, 449.0f);
  hp_set(&x, 0, 33, 3.0f);
  /* block 2: all +0 -> code 0, data 0 */
  /* block 3: Inf -> 254 (factor 2^-127): Inf -> 0x7E, -Inf -> 0xFE, 1e30 -> tiny -> 0x00, NaN -> 0x7F */
  hp_set(&x, 0, 96, INFINITY);
  hp_set(&x, 0, 97, -INFINITY);
  hp_set(&x, 0, 98, 1e30f);
  hp_set(&x, 0, 99, NAN);
  /* block 4: amax 2^-140 (v = 2^-140 / 448 -> code 0, factor 2^127): NaN ignored for the amax */
  hp_set(&x, 0, 128, ldexpf(1.0f, -140));
  hp_set(&x, 0, 129, NAN);
  qbuf b;
  qalloc(&b, f, 1, 160, 1, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "mxfp8_e4m3 [1, 160]: quantize");
  uint8_t *s = b.scale[0], *d = b.data[0];
  is_int(s[0], 127, "  amax 448 -> e8m0 127");
  is_int(s[1], 128, "  amax 449 -> e8m0 128");
  is_int(s[2], 0, "  amax 0 -> e8m0 0");
  is_int(s[3], 254, "  amax Inf -> e8m0 254");
  is_int(s[4], 0, "  amax 2^-140 -> e8m0 0 (2^-127 is the smallest)");
  int vals = 0;
  for (int j = 1; j < 32; j++) vals += d[j] == 0x30 + j;
  ok(d[0] == 0x7E && vals == 31, "  block 0: 448 -> 0x7E, code values 0x31..0x4F keep their codes (factor 1)");
  is_int(d[32], 0x76, "  block 1: 449 * 2^-1 = 224.5 -> 224 (0x76)");
  is_int(d[33], 0x3C, "  block 1: 3 * 2^-1 = 1.5 (0x3C)");
  int zeros = 0;
  for (int j = 64; j < 96; j++) zeros += d[j] == 0;
  is_int(zeros, 32, "  block 2: all-zero data");
  ok(d[96] == 0x7E && d[97] == 0xFE && d[98] == 0x00 && d[99] == 0x7F, "  block 3: Inf 0x7E, -Inf 0xFE, 1e30 -> 0, NaN 0x7F");
  ok(d[128] == 0x00 && d[129] == 0x7F, "  block 4: 2^-140 * 2^127 = 2^-13 -> 0; NaN 0x7F");
  ok(padding_ok(t, &b, 0, 0xA5, "mxfp8 [1,160]"), "  scale padding: zeros ([128, 8] stored, [1, 5] used)");
  float out[160];
  bc_tensor o = out_f32(out, 1, 160);
  is_int(bc_ref_dequantize(ctx, &b.q, BC_ROWWISE, &o), BC_OK, "  dequantize");
  ok(out[0] == 448.0f && out[5] == (float)fp8_value(0x35, 4, 3, 7) && out[32] == 448.0f && out[33] == 3.0f && out[64] == 0.0f &&
     out[96] == 448.0f * ldexpf(1, 127) && out[99] != out[99],
     "  dequantized: 448, value of 0x35, 224*2 = 448, 3, 0, 448*2^127, NaN");
  qfree(&b);
  hp_free(&x);

  /* columnwise: one block is 32 consecutive rows of a column; data not transposed */
  hp_alloc(&x, BC_FP32, 64, 2, 0);
  for (int r = 0; r < 64; r++) { hp_set(&x, r, 0, r == 5 ? 449.0f : 1.0f); hp_set(&x, r, 1, r == 40 ? -448.0f : 2.0f); }
  qalloc(&b, f, 64, 2, 2, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "mxfp8_e4m3 columnwise [64, 2]: quantize");
  /* logical [K=2, ceil(64/32)=2] stored transposed [roundup(2,4)=4, roundup(2,128)=128]: (k, blk) at blk*128 + k */
  s = b.scale[1];
  ok(s[0] == 128 && s[128] == 119 && s[1] == 120 && s[129] == 127,
     "  scales: col 0 rows 0-31 amax 449 -> 128, rows 32-63 amax 1 -> 119 (2^-8 >= 1/448); col 1 amax 2 -> 120, amax 448 -> 127 (got %d %d %d %d)",
     s[0], s[128], s[1], s[129]);
  d = b.data[1];
  ok(d[5 * 2 + 0] == 0x76 && d[40 * 2 + 1] == 0xFE && d[0] == 0x30 && d[33 * 2] == 0x78,
     "  data [M, K]: (5,0) 0x76, (40,1) -448 0xFE, (0,0) 1*2^-1 0x30, (33,0) 1*2^8 0x78");
  ok(padding_ok(t, &b, 1, 0xA5, "mxfp8 col [64,2]"), "  scale padding: zeros");
  qfree(&b);
  hp_free(&x);
}

static void test_fp8_block_hand(void) {
  const tfmt *t = &FMTS[0];
  const bc_format *f = fmt("fp8_block_1x128");
  hp x;
  hp_alloc(&x, BC_FP32, 2, 130, 0);
  hp_set(&x, 0, 0, 1.0f);   /* row 0, block 0: amax 1 -> 448 -> pow2 256 */
  hp_set(&x, 0, 1, 0.5f);
  hp_set(&x, 0, 2, -0.25f);
  hp_set(&x, 1, 0, 3.0f);   /* row 1, block 0: amax 3 -> 149.3 -> 128 */
  hp_set(&x, 1, 1, 1.0f);
  hp_set(&x, 0, 128, ldexpf(1, -149)); /* row 0, block 1: 448 / 2^-149 = Inf -> FLT_MAX -> 2^127 */
  /* row 1, block 1: zeros -> scale 1 */
  qbuf b;
  qalloc(&b, f, 2, 130, 3, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "fp8_block_1x128 [2, 130]: quantize both directions");
  float *s = (float *)b.scale[0];
  /* rowwise scale_inv [ceil(130/128)=2, roundup(2,4)=4]: (row r, block k) at k*4 + r */
  ok(s[0] == 1.0f / 256 && s[1] == 1.0f / 128 && s[4] == ldexpf(1, -127) && s[5] == 1.0f,
     "  scale_inv: amax 1 -> 1/256, amax 3 -> 1/128, amax 2^-149 -> 2^-127, amax 0 -> 1 (got %g %g %g %g)", s[0], s[1], s[4], s[5]);
  ok(bits32(s[4]) == 0x00400000u, "  2^-127 is the fp32 denormal 0x00400000");
  uint8_t *d = b.data[0];
  ok(d[0] == 0x78 && d[1] == 0x70 && d[2] == 0xE8 && d[130] == 0x7C && d[131] == 0x70 && d[128] == 0x00,
     "  data: 1*256 0x78, 0.5*256 0x70, -0.25*256 0xE8, 3*128 0x7C, 1*128 0x70, 2^-149*2^127 = 2^-22 -> 0");
  ok(padding_ok(t, &b, 0, 0xA5, "1x128 row"), "  rowwise scale padding zeros");
  /* columnwise: data [130, 2]; scale_inv [ceil(2/128)=1, roundup(130,4)=132]: column c at c */
  s = (float *)b.scale[1];
  ok(s[0] == 1.0f / 128 && s[1] == 1.0f / 256 && s[2] == 1.0f / 1024 && s[3] == 1.0f && s[128] == ldexpf(1, -127) &&
     s[129] == 1.0f,
     "  columnwise scale_inv: column 0 amax 3 -> 1/128, 1 amax 1 -> 1/256, 2 amax .25 -> 1/1024, 3 amax 0 -> 1, 128 -> 2^-127");
  d = b.data[1];
  ok(d[0] == 0x70 && d[1] == 0x7C && d[2] == 0x70 && d[3] == 0x78, "  columnwise data transposed: (0,0) 1*128, (0,1) 3*128, (1,0) .5*256, (1,1) 1*256");
  ok(padding_ok(t, &b, 1, 0xA5, "1x128 col"), "  columnwise scale padding zeros");
  qfree(&b);
  hp_free(&x);

  /* bf16 input: an Inf scale becomes bf16's max (0x7F7F), then pow2 -> 2^127 */
  hp_alloc(&x, BC_BF16, 1, 128, 0);
  hp_set(&x, 0, 0, ldexpf(1, -133)); /* bf16's smallest denormal */
  qalloc(&b, f, 1, 128, 1, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "fp8_block_1x128 bf16 amax 2^-133: quantize");
  ok(bits32(*(float *)b.scale[0]) == 0x00400000u && b.data[0][0] == 0x08,
     "  scale -> 3.39e38 -> pow2 2^127: scale_inv 2^-127; 2^-133 * 2^127 = 2^-6 -> 0x08");
  qfree(&b);
  hp_free(&x);
}

static void test_nvfp4_hand(void) {
  const tfmt *t = &FMTS[5];
  const bc_format *f = fmt("nvfp4");
  hp x;
  hp_alloc(&x, BC_FP32, 1, 32, 0);
  const float b0[8] = { 6.0f, 3.0f, -0.5f, 1.0f, NAN, 0.0f, -0.0f, 2.5f };
  for (int j = 0; j < 8; j++) hp_set(&x, 0, j, b0[j]);
  hp_set(&x, 0, 16, 2688.0f);
  hp_set(&x, 0, 17, -100.0f);
  qbuf b;
  qalloc(&b, f, 1, 32, 1, 0, 0xA5);
  b.amax = -1;
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "nvfp4 [1, 32]: quantize");
  ok(b.amax == 2688.0f, "  global amax 2688 written to q->amax (NaN ignored)");
  uint8_t *s = b.scale[0], *d = b.data[0];
  is_int(s[0], 0x38, "  S_enc 1: block amax 6 -> ue4m3(6 * (1/6)) = 1.0 = 0x38");
  is_int(s[1], 0x7E, "  block amax 2688 -> 448 = 0x7E");
  /* codes: 6 0x7, 3 0x5, -0.5 0x9, 1 0x2, NaN 0x7, 0 0x0, -0 0x8, 2.5 -> tie 2 / 3 -> even code 2 (0x4) */
  ok(d[0] == 0x57 && d[1] == 0x29 && d[2] == 0x07 && d[3] == 0x48,
     "  packed low nibble first: 0x57 0x29 0x07 0x48 (got %02X %02X %02X %02X)", d[0], d[1], d[2], d[3]);
  /* 2688 / 448 = 6 -> 0x7; -100 / 448 = -0.223 -> -0 (0x8) */
  is_int(d[8], 0x87, "  block 1: 2688 -> 0x7 (low), -100/448 -> -0 0x8 (high)");
  ok(padding_ok(t, &b, 0, 0xA5, "nvfp4 [1,32]"), "  scale padding zeros ([128, 4] stored)");
  float out[32];
  bc_tensor o = out_f32(out, 1, 32);
  is_int(bc_ref_dequantize(ctx, &b.q, BC_ROWWISE, &o), BC_OK, "  dequantize");
  ok(out[0] == 6 && out[1] == 3 && out[2] == -0.5f && out[4] == 6 && signbit(out[6]) && out[7] == 2 && out[16] == 2688,
     "  dequantized: 6 3 -0.5 . 6(NaN) . -0 2 .. 2688");
  /* bc_ref_quantize_cast reads q->amax: 5376 -> S_enc 0.5, S_dec 2: block amax 6 -> ue4m3(0.5) = 0x30 */
  b.amax = 5376.0f;
  is_int(bc_ref_quantize_cast(ctx, &x.t, &b.q), BC_OK, "nvfp4 quantize_cast with q->amax 5376");
  ok(b.amax == 5376.0f && s[0] == 0x30 && d[0] == 0x57, "  q->amax read, not written; scale 0x30, same codes");
  is_int(bc_ref_dequantize(ctx, &b.q, BC_ROWWISE, &o), BC_OK, "  dequantize");
  ok(out[0] == 6 && out[1] == 3, "  dequant = code * 0.5 * 2");
  qfree(&b);
  hp_free(&x);

  /* the order of the fp32 steps matters: m = S_enc * (1.0f/6.0f), not S_enc / 6. With global amax
   * G = 0x1.03b334p+0 (S_enc = 0x1.4b3682p+11) a block amax of 0x1.3b599cp-9 gives amax * m =
   * 0x1.100002p+0 -> ue4m3 1.125 (0x39), where S_enc / 6 would give exactly 1.0625 -> 1.0 (0x38). */
  hp_alloc(&x, BC_FP32, 1, 32, 0);
  hp_set(&x, 0, 0, f32(0x3F81D99Au)); /* 0x1.03b334p+0 */
  hp_set(&x, 0, 16, 0x1.3b599cp-9f);
  qalloc(&b, f, 1, 32, 1, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "nvfp4 G 0x1.03b334p+0: quantize");
  {
    float senc, sdec;
    two_level(b.amax, &senc, &sdec);
    const float inv6 = 1.0f / 6.0f;
    float m = senc * inv6, p1 = 0x1.3b599cp-9f * m, p2 = 0x1.3b599cp-9f * (senc / 6.0f);
    ok(b.amax == 0x1.03b334p+0f && senc == 0x1.4b3682p+11f && p1 == 0x1.100002p+0f && p2 == 0x1.1p+0f,
       "  S_enc 0x1.4b3682p+11; amax * (S_enc * (1/6)) = 0x1.100002p+0 (S_enc / 6 would give 0x1.1p+0)");
  }
  is_int(b.scale[0][1], 0x39, "  block scale ue4m3(0x1.100002p+0) = 1.125 (0x39)");
  qfree(&b);
  hp_free(&x);

  /* all-zero tensor: G 0 -> S_enc 1, scales 0, enc FLT_MAX, codes 0 */
  hp_alloc(&x, BC_FP32, 2, 16, 0);
  hp_set(&x, 1, 3, -0.0f);
  qalloc(&b, f, 2, 16, 3, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "nvfp4 zeros: quantize");
  ok(b.amax == 0 && b.scale[0][0] == 0 && b.scale[0][4] == 0 && b.data[0][0] == 0 && b.data[0][9] == 0x80,
     "  amax 0, scales 0, data 0 (-0 keeps its sign: 0x8 in the high nibble of byte 9)");
  qfree(&b);
  hp_free(&x);
}

static void unpack(const tfmt *t, const qbuf *b, int d, unsigned *codes) {
  int64_t n = b->L[d].data_rows * b->L[d].data_cols;
  for (int64_t i = 0; i < n; i++) codes[i] = code_at(t, b, d, i);
}

static void fill_random(hp *x, double spread) {
  for (int64_t r = 0; r < x->t.rows; r++)
    for (int64_t c = 0; c < x->t.cols; c++) hp_set(x, r, c, (float)(gauss() * ldexp(1, (int)(unif() * spread) - (int)(spread / 2))));
}

/* ---- MXFP6: hand-computed vectors ---- */

/* One block of 32 values whose amax (NaN ignored) is the element's max, so RCEIL (and FLOOR)
 * give e8m0 127, encode factor 1. The codes are worked out by hand from the element's values
 * (e2m3: subnormal step 1/8, [1,2) step 1/8, [2,4) 1/4, [4,7.5] 1/2; e3m2: subnormal step 1/16,
 * [0.25,0.5) 1/16, [0.5,1) 1/8, [1,2) 1/4, [2,4) 1/2, [4,8) 1, [8,16) 2, [16,28] 4), ties to the
 * even code; NaN -> 0x1F (+max, no NaN code); -0 and tiny negatives keep the sign. The bytes are
 * the codes packed 4 to 3 bytes, low_first and high_first, written out. */
typedef struct fp6_vec {
  const char *name;
  float x[32];
  unsigned codes[32];
  uint8_t lf[24], hf[24];
  float back[32]; /* the dequantized values: the codes' values */
} fp6_vec;

static const fp6_vec FP6_VECS[2] = {
  { "mxfp6_e2m3",
    { 7.5f, -7.5f, 0.0f, -0.0f, 1.0f, 0.125f, 0.0625f /* tie 0 / 0.125 -> 0 */, 0.1875f /* tie 1 / 2 -> 2 */,
      -0.3125f /* tie 2 / 3 -> 2 */, 3.25f, 3.375f /* tie 3.25 / 3.5 -> m 6 */, 7.0f, 7.25f /* tie 7 / 7.5 -> 7 */, NAN,
      0.9f /* 0.875 */, -1.9375f /* tie 1.875 (0x0F) / 2 (0x10) -> 0x10 */, 5.0f, -6.0f, 2.0f, -0.5f, 1e-30f, -1e-30f,
      4.74f /* 4.5 */, 4.76f /* 5 */, 1.125f, -2.75f, 0.625f, 6.5f, 1.5f, -3.9f /* -4 */, 0.3f /* 0.25 */, 2.25f },
    { 0x1F, 0x3F, 0x00, 0x20, 0x08, 0x01, 0x00, 0x02, 0x22, 0x15, 0x16, 0x1E, 0x1E, 0x1F, 0x07, 0x30,
      0x1A, 0x3C, 0x10, 0x24, 0x00, 0x20, 0x19, 0x1A, 0x09, 0x33, 0x05, 0x1D, 0x0C, 0x38, 0x02, 0x11 },
    { 0xDF, 0x0F, 0x80, 0x48, 0x00, 0x08, 0x62, 0x65, 0x79, 0xDE, 0x77, 0xC0,
      0x1A, 0x0F, 0x91, 0x00, 0x98, 0x69, 0xC9, 0x5C, 0x74, 0x0C, 0x2E, 0x44 },
    { 0x20, 0xF0, 0x7F, 0x02, 0x10, 0x20, 0x9E, 0x55, 0x89, 0xF0, 0xF1, 0x79,
      0x24, 0xC4, 0x6B, 0x5A, 0x06, 0x02, 0x5D, 0x31, 0x27, 0x91, 0x80, 0x33 },
    { 7.5f, -7.5f, 0.0f, -0.0f, 1.0f, 0.125f, 0.0f, 0.25f, -0.25f, 3.25f, 3.5f, 7.0f, 7.0f, 7.5f, 0.875f, -2.0f,
      5.0f, -6.0f, 2.0f, -0.5f, 0.0f, -0.0f, 4.5f, 5.0f, 1.125f, -2.75f, 0.625f, 6.5f, 1.5f, -4.0f, 0.25f, 2.25f } },
  { "mxfp6_e3m2",
    { 28.0f, -28.0f, 0.0f, -0.0f, 1.0f, 0.0625f, 0.03125f /* tie 0 / 1 -> 0 */, 0.09375f /* tie 1 / 2 -> 2 */,
      -0.15625f /* tie 2 / 3 -> 2 */, 20.0f, 18.0f /* tie 16 / 20 -> 16 */, 26.0f /* tie 24 / 28 -> 24 */, 27.0f /* 28 */, NAN,
      0.21875f /* tie 0x03 / 0x04 -> 0x04 */, -15.0f /* tie 14 (0x1B) / 16 (0x1C) -> 16 */, 5.0f, -6.0f, 3.5f, -0.5f, 1e-30f,
      -1e-30f, 9.9f /* 10 */, 0.3f /* 0.3125 */, 0.75f, -1.25f, 2.5f, 12.0f, 7.0f, -0.875f, 1.6f /* 1.5 */, 0.4375f },
    { 0x1F, 0x3F, 0x00, 0x20, 0x0C, 0x01, 0x00, 0x02, 0x22, 0x1D, 0x1C, 0x1E, 0x1F, 0x1F, 0x04, 0x3C,
      0x15, 0x36, 0x13, 0x28, 0x00, 0x20, 0x19, 0x05, 0x0A, 0x2D, 0x11, 0x1A, 0x17, 0x2B, 0x0E, 0x07 },
    { 0xDF, 0x0F, 0x80, 0x4C, 0x00, 0x08, 0x62, 0xC7, 0x79, 0xDF, 0x47, 0xF0,
      0x95, 0x3D, 0xA1, 0x00, 0x98, 0x15, 0x4A, 0x1B, 0x69, 0xD7, 0xEA, 0x1C },
    { 0x20, 0xF0, 0x7F, 0x02, 0x10, 0x30, 0x1E, 0xD7, 0x89, 0x3C, 0xF1, 0x7D,
      0xE8, 0x64, 0x57, 0x45, 0x06, 0x02, 0x5A, 0xD4, 0x2A, 0x87, 0xB3, 0x5E },
    { 28.0f, -28.0f, 0.0f, -0.0f, 1.0f, 0.0625f, 0.0f, 0.125f, -0.125f, 20.0f, 16.0f, 24.0f, 28.0f, 28.0f, 0.25f, -16.0f,
      5.0f, -6.0f, 3.5f, -0.5f, 0.0f, -0.0f, 10.0f, 0.3125f, 0.75f, -1.25f, 2.5f, 12.0f, 7.0f, -0.875f, 1.5f, 0.4375f } },
};

static const tfmt *tfmt_of(const char *name) {
  for (int i = 0; i < NFMTS; i++)
    if (strcmp(FMTS[i].name, name) == 0) return &FMTS[i];
  printf("Bail out! no test table entry for %s\n", name);
  exit(1);
}

/* a spec written to a temporary file and loaded with bc_format_load */
static const bc_format *load_spec(const char *text, const char *tag) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/bc14-%ld-%s.lua", (long)getpid(), tag);
  FILE *fp = fopen(path, "wb");
  if (!fp) {
    ok(0, "spec %s: cannot write %s", tag, path);
    return NULL;
  }
  fputs(text, fp);
  fclose(fp);
  const bc_format *f = NULL;
  bc_status s = bc_format_load(ctx, path, &f);
  remove(path);
  if (!ok(s == BC_OK && f, "spec %s loads at run time", tag)) {
    diag("%s", bc_last_error(ctx));
    return NULL;
  }
  return f;
}

/* the values of out[] against want[] bit for bit (NaN: any NaN) */
static int same_floats(const float *got, const float *want, int n, const char *what) {
  int bad = 0;
  for (int j = 0; j < n; j++)
    if (isnan(want[j]) ? !isnan(got[j]) : bits32(got[j]) != bits32(want[j])) {
      if (bad++ < 3) diag("%s: element %d = %a, expected %a", what, j, got[j], want[j]);
    }
  return bad == 0;
}

static void test_mxfp6_hand(void) {
  for (int v = 0; v < 2; v++) {
    const fp6_vec *h = &FP6_VECS[v];
    const tfmt *t = tfmt_of(h->name);
    const bc_format *f = fmt(h->name);
    /* the test's own tables agree: the hand codes packed by the group rule are the hand bytes */
    uint8_t packed[24];
    for (int g = 0; g < 8; g++) fp6_pack(h->codes + 4 * g, packed + 3 * g);
    ok(!memcmp(packed, h->lf, 24) && max_code(t) == 0x1F && elem_value(t, 0x1F) == t->emax && elem_value(t, 0x3F) == -t->emax,
       "%s: the hand codes pack into the hand bytes; code 0x1F = %g, 0x3F = -%g (this test's tables)", h->name, t->emax, t->emax);

    hp x;
    hp_alloc(&x, BC_FP32, 1, 32, 0);
    for (int j = 0; j < 32; j++) hp_set(&x, 0, j, h->x[j]);
    qbuf b;
    qalloc(&b, f, 1, 32, 1, 0, 0xA5);
    is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "%s [1, 32]: quantize", h->name);
    is_int(b.L[0].data_bytes, 24, "  32 elements in 24 bytes");
    is_int(b.scale[0][0], 127, "  amax %g (NaN ignored) -> e8m0 127 (factor 1)", t->emax);
    is_bytes(b.data[0], h->lf, 24, "  the 24 data bytes: groups of 4 codes in 3 bytes, low_first (ties to even, NaN -> 0x1F, -0 kept)");
    int codes = 0;
    for (int j = 0; j < 32; j++) codes += code_at(t, &b, 0, j) == h->codes[j];
    is_int(codes, 32, "  each code read back by the group rule is the hand code");
    ok(padding_ok(t, &b, 0, 0xA5, h->name), "  scale padding zeros ([128, 4] stored, [1, 1] used)");
    float out[32];
    bc_tensor o = out_f32(out, 1, 32);
    is_int(bc_ref_dequantize(ctx, &b.q, BC_ROWWISE, &o), BC_OK, "  dequantize");
    ok(same_floats(out, h->back, 32, h->name), "  dequantized: the codes' values bit for bit (NaN -> %g, -0 kept)", t->emax);
    qfree(&b);
    hp_free(&x);

    /* columnwise [32, 4]: column 0 = the vector, 1 = its negation, 2 = half of it (scale 126, same
     * codes), 3 = zeros (scale 0). Data transposed [4, 32]: 24 bytes a row. */
    hp_alloc(&x, BC_FP32, 32, 4, 0);
    for (int r = 0; r < 32; r++) {
      hp_set(&x, r, 0, h->x[r]);
      hp_set(&x, r, 1, -h->x[r]);
      hp_set(&x, r, 2, h->x[r] / 2);
    }
    qalloc(&b, f, 32, 4, 2, 0, 0xA5);
    is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "%s columnwise [32, 4]: quantize", h->name);
    ok(b.L[1].data_rows == 4 && b.L[1].data_cols == 32 && b.L[1].data_bytes == 96, "  data [4, 32] in 96 bytes");
    /* scale [roundup(4,128), roundup(1,4)]: column k at k * 4 */
    uint8_t *s = b.scale[1];
    ok(s[0] == 127 && s[4] == 127 && s[8] == 126 && s[12] == 0, "  scales: 127, 127, 126 (amax %g), 0 (got %d %d %d %d)",
       t->emax / 2, s[0], s[4], s[8], s[12]);
    unsigned neg[32];
    uint8_t want[96];
    float back[128];
    for (int j = 0; j < 32; j++) neg[j] = isnan(h->x[j]) ? 0x1F : h->codes[j] ^ 0x20; /* -NaN is still +max */
    memcpy(want, h->lf, 24);
    for (int g = 0; g < 8; g++) fp6_pack(neg + 4 * g, want + 24 + 3 * g);
    memcpy(want + 48, h->lf, 24);
    memset(want + 72, 0, 24);
    is_bytes(b.data[1], want, 96, "  data rows: the vector's bytes, its negation's, the vector's again, zeros");
    for (int j = 0; j < 32; j++) {
      back[j] = h->back[j];
      back[32 + j] = isnan(h->x[j]) ? (float)t->emax : -h->back[j];
      back[64 + j] = h->back[j] / 2;
      back[96 + j] = 0.0f;
    }
    float out4[128];
    o = out_f32(out4, 4, 32);
    is_int(bc_ref_dequantize(ctx, &b.q, BC_COLUMNWISE, &o), BC_OK, "  dequantize columnwise");
    ok(same_floats(out4, back, 128, h->name), "  dequantized [4, 32]: the values, negated, halved, zeros");
    ok(padding_ok(t, &b, 1, 0xA5, h->name), "  scale padding zeros");
    qfree(&b);
    hp_free(&x);
  }

  /* the other packing order, as a spec loaded at run time: element k of a group at bits
   * [(3 - k) * 6, (4 - k) * 6) of the little-endian group; FLOOR: 2^(floor(log2 amax) - emax_exp)
   * = 2^0 for amax 7.5 (e2m3) and 28 (e3m2) */
  for (int v = 0; v < 2; v++) {
    const fp6_vec *h = &FP6_VECS[v];
    const char *el = v ? "e3m2" : "e2m3";
    char spec[1024], tag[64];
    snprintf(tag, sizeof tag, "mxfp6_%s_hf_floor14", el);
    snprintf(spec, sizeof spec,
             "name = \"%s\"\ndescription = \"MXFP6 %s, high_first, FLOOR\"\nelement = \"%s\"\n"
             "block = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"floor\" }\npacking = \"high_first\"\n"
             "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
             "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
             tag, el, el);
    const bc_format *f = load_spec(spec, tag);
    if (!f) continue;
    bc_format_info fi;
    is_int(bc_format_get_info(ctx, f, &fi), BC_OK, "  info");
    ok(fi.element_bits == 6 && fi.element_pack == 4 && fi.element_pack_bytes == 3 && fi.nan_policy &&
       !strcmp(fi.nan_policy, "satfinite") && fi.scale_rule && !strcmp(fi.scale_rule, "floor"),
       "  6 bits, 4 elements in 3 bytes, nan_policy satfinite (the default), rule floor");
    hp x;
    hp_alloc(&x, BC_FP32, 1, 32, 0);
    for (int j = 0; j < 32; j++) hp_set(&x, 0, j, h->x[j]);
    qbuf b;
    qalloc(&b, f, 1, 32, 1, 0, 0xA5);
    is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "%s [1, 32]: quantize", tag);
    is_int(b.scale[0][0], 127, "  FLOOR: amax %s -> e8m0 127", v ? "28" : "7.5");
    is_bytes(b.data[0], h->hf, 24, "  the 24 data bytes, high_first: e0 in the top 6 bits of each group");
    float out[32];
    bc_tensor o = out_f32(out, 1, 32);
    is_int(bc_ref_dequantize(ctx, &b.q, BC_ROWWISE, &o), BC_OK, "  dequantize");
    ok(same_floats(out, h->back, 32, tag), "  dequantized: the same values as low_first");
    qfree(&b);
    hp_free(&x);
  }
}

/* ---- nan_policy ---- */

/* x quantized (both directions) with a satfinite format fs, with fs after the NaN at view (nr, nc)
 * is replaced by 0, and with fn, the same format with nan_policy "scale_nan". Checks:
 *   satfinite: the NaN encodes as the element's NaN code (+max without one), and every scale entry
 *              and every other code is what the input with 0 in place of the NaN gives (the
 *              block amax, and the global amax of two-level formats, ignore NaN);
 *   scale_nan: the entry of the NaN's block is snan and its codes all cnan (x * NaN encoded),
 *              every other entry and code as satfinite, padding zero; dequantize gives NaN for
 *              every element of that block and the satfinite values elsewhere. */
static void nan_pair(const char *what, const tfmt *t, const bc_format *fs, const bc_format *fn, const hp *x, int64_t nr,
                     int64_t nc, uint32_t snan, unsigned cnan, qbuf *a, qbuf *n) {
  int64_t M = x->t.rows, K = x->t.cols;
  hp x0;
  hp_alloc(&x0, x->t.dtype, M, K, 0);
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < K; c++) {
      float v = hp_get(x, r, c);
      hp_set(&x0, r, c, isnan(v) ? 0.0f : v);
    }
  qbuf z;
  qalloc(a, fs, M, K, 3, 0, 0xA5);
  qalloc(&z, fs, M, K, 3, 0, 0xA5);
  qalloc(n, fn, M, K, 3, 0, 0xA5); /* 0xA5: no scale entry of these inputs (a negative ue4m3 or fp32, e8m0 2^38) */
  a->amax = z.amax = n->amax = -1;
  int good = bc_ref_quantize(ctx, &x->t, &a->q) == BC_OK;
  good &= bc_ref_quantize(ctx, &x0.t, &z.q) == BC_OK;
  good &= bc_ref_quantize(ctx, &x->t, &n->q) == BC_OK;
  if (!ok(good, "%s [%lld, %lld], NaN at (%lld, %lld): quantize with satfinite, with the NaN replaced by 0, with scale_nan", what,
          (long long)M, (long long)K, (long long)nr, (long long)nc))
    diag("%s", bc_last_error(ctx));
  if (t->rule == R_TWO)
    ok(a->amax == z.amax && n->amax == z.amax && isfinite(z.amax) && z.amax > 0,
       "  global amax %g ignores the NaN (satfinite %g, scale_nan %g)", z.amax, a->amax, n->amax);
  for (int d = 0; d < 2; d++) {
    int64_t vrows = d ? K : M, vcols = d ? M : K, mvr = d ? nc : nr, mvc = d ? nr : nc;
    int64_t dr = a->L[d].data_rows, dc = a->L[d].data_cols;
    float *oa = malloc(sizeof(float) * (size_t)(dr * dc)), *on = malloc(sizeof(float) * (size_t)(dr * dc));
    bc_tensor ta = out_f32(oa, dr, dc), tn = out_f32(on, dr, dc);
    int dq = bc_ref_dequantize(ctx, &a->q, d ? BC_COLUMNWISE : BC_ROWWISE, &ta) == BC_OK &&
             bc_ref_dequantize(ctx, &n->q, d ? BC_COLUMNWISE : BC_ROWWISE, &tn) == BC_OK;
    int64_t bad_sat = 0, bad_nan = 0, bad_blk = 0, bad_deq = 0, marked = 0;
    for (int64_t vr = 0; vr < vrows; vr++)
      for (int64_t vc = 0; vc < vcols; vc++) {
        int in_block = vr == mvr && vc / t->blk == mvc / t->blk, at_nan = vr == mvr && vc == mvc;
        int64_t i = data_index(t, a, d, vr, vc);
        uint32_t sa = scale_entry(t, a, d, vr, vc), sz = scale_entry(t, &z, d, vr, vc), sn = scale_entry(t, n, d, vr, vc);
        unsigned ca = code_at(t, a, d, i), cz = code_at(t, &z, d, i), cn = code_at(t, n, d, i);
        if (sa != sz || ca != (at_nan ? nan_code(t) : cz)) {
          if (bad_sat++ < 3)
            diag("%s dir %d satfinite view (%lld, %lld): scale 0x%X code 0x%X; expected scale 0x%X code 0x%X", what, d, (long long)vr,
                 (long long)vc, sa, ca, sz, at_nan ? nan_code(t) : cz);
        }
        if (sn != (in_block ? snan : sa) || (!in_block && cn != ca)) {
          if (bad_nan++ < 3)
            diag("%s dir %d scale_nan view (%lld, %lld): scale 0x%X code 0x%X; expected scale 0x%X code 0x%X", what, d, (long long)vr,
                 (long long)vc, sn, cn, in_block ? snan : sa, ca);
        }
        if (in_block && cn != cnan) {
          if (bad_blk++ < 3)
            diag("%s dir %d scale_nan view (%lld, %lld) in the NaN's block: x %a -> code 0x%X; expected 0x%X (x * NaN)", what, d,
                 (long long)vr, (long long)vc, hp_get(x, d ? vc : vr, d ? vr : vc), cn, cnan);
        }
        marked += in_block;
        if (in_block ? !isnan(on[i]) : (bits32(on[i]) != bits32(oa[i]) && !(isnan(on[i]) && isnan(oa[i])))) {
          if (bad_deq++ < 3) diag("%s dir %d view (%lld, %lld): scale_nan dequantized %a, satfinite %a", what, d, (long long)vr,
                                  (long long)vc, on[i], oa[i]);
        }
      }
    const char *dn = d ? "columnwise" : "rowwise";
    ok(bad_sat == 0, "  %s satfinite: the NaN encodes as 0x%X; scales and other codes as with 0 in its place", dn, nan_code(t));
    ok(bad_nan == 0 && padding_ok(t, n, d, 0xA5, what), "  %s scale_nan: the NaN's block has scale 0x%X, other scales and codes as satfinite",
       dn, snan);
    ok(bad_blk == 0, "  %s scale_nan: every code of the NaN's block is 0x%X (x * NaN encoded)", dn, cnan);
    ok(dq && bad_deq == 0 && marked > 0, "  %s scale_nan dequantize: NaN for the %lld elements of the block, satfinite's values elsewhere",
       dn, (long long)marked);
    free(oa);
    free(on);
  }
  qfree(&z);
  hp_free(&x0);
}

static const char *const NANBLOCK_SPECS[4] = {
  "name = \"mxfp4_nanblock14\"\ndescription = \"MXFP4, NaN marks the block\"\nelement = \"e2m1\"\n"
  "block = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"rceil\" }\npacking = \"low_first\"\n"
  "nan_policy = \"scale_nan\"\n"
  "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
  "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
  "name = \"nvfp4_nanblock14\"\ndescription = \"NVFP4, NaN marks the block\"\nelement = \"e2m1\"\n"
  "block = { rows = 1, cols = 16 }\nscale = { type = \"ue4m3\", rule = \"two_level\" }\npacking = \"low_first\"\n"
  "nan_policy = \"scale_nan\"\n"
  "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
  "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
  /* fp8_block_1x128's spec, plus the policy */
  "name = \"fp8_1x128_nanblock14\"\ndescription = \"FP8 1x128, NaN marks the block\"\nelement = \"e4m3\"\n"
  "block = { rows = 1, cols = 128 }\n"
  "scale = { type = \"fp32\", rule = \"amax\", eps = 0, pow2 = true, inf_value = \"dtype_max\" }\n"
  "nan_policy = \"scale_nan\"\n"
  "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"transposed\", pad_rows = 1, pad_cols = 4 } }\n"
  "columnwise = { layout = \"transposed\", scale_layout = { order = \"transposed\", pad_rows = 1, pad_cols = 4 } }\n",
  "name = \"mxfp6_e3m2_nanblock14\"\ndescription = \"MXFP6 e3m2, NaN marks the block\"\nelement = \"e3m2\"\n"
  "block = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"rceil\" }\npacking = \"low_first\"\n"
  "nan_policy = \"scale_nan\"\n"
  "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n"
  "columnwise = { layout = \"transposed\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n",
};

static void test_nan_policy(void) {
  static const char *const twin[4] = { "mxfp4", "nvfp4", "fp8_block_1x128", "mxfp6_e3m2" };
  static const char *const tags[4] = { "mxfp4_nanblock14", "nvfp4_nanblock14", "fp8_1x128_nanblock14", "mxfp6_e3m2_nanblock14" };
  /* the scale type's NaN (e8m0 0xFF, ue4m3 0x7F, fp32 0x7FFFFFFF) and the element's NaN encode */
  static const uint32_t snan[4] = { 0xFF, 0x7F, 0x7FFFFFFFu, 0xFF };
  static const unsigned cnan[4] = { 0x7, 0x7, 0x7F, 0x1F };
  static const int64_t shape[4][2] = { { 2, 64 }, { 2, 32 }, { 2, 256 }, { 4, 64 } }, at[4][2] = { { 0, 5 }, { 0, 20 }, { 1, 130 }, { 2, 37 } };
  for (int i = 0; i < 4; i++) {
    const tfmt *t = tfmt_of(twin[i]);
    const bc_format *fs = fmt(twin[i]), *fn = load_spec(NANBLOCK_SPECS[i], tags[i]);
    if (!fn) continue;
    bc_format_info fi, si;
    bc_format_get_info(ctx, fn, &fi);
    bc_format_get_info(ctx, fs, &si);
    ok(fi.nan_policy && !strcmp(fi.nan_policy, "scale_nan") && si.nan_policy && !strcmp(si.nan_policy, "satfinite") &&
       fi.element_pack == pack_n(t) && fi.element_pack_bytes == pack_bytes(t),
       "  info: nan_policy scale_nan (%s: satfinite), %d element(s) in %d byte(s)", twin[i], pack_n(t), pack_bytes(t));
    int64_t M = shape[i][0], K = shape[i][1];
    hp x;
    hp_alloc(&x, BC_FP32, M, K, 0);
    if (i == 0) {
      /* mxfp4 by hand: row 0 block 0 amax 3 (-> e8m0 126) and a NaN at (0, 5); block 1 amax 6 (127);
       * row 1 amax 0.5 (-> 124) and 4 (-> 127) */
      for (int64_t c = 0; c < 32; c++) {
        hp_set(&x, 0, c, c == 0 ? 3.0f : c == 5 ? NAN : (float)(c % 7 - 3) * 0.5f);
        hp_set(&x, 0, 32 + c, c == 1 ? -6.0f : (float)(c % 5 - 2) * 1.5f);
        hp_set(&x, 1, c, (float)(c % 3) * 0.25f);
        hp_set(&x, 1, 32 + c, c == 0 ? 4.0f : (float)(c % 2));
      }
    } else {
      fill_random(&x, 8);
      hp_set(&x, at[i][0], at[i][1], NAN);
    }
    qbuf a, n;
    char what[128];
    snprintf(what, sizeof what, "%s / %s", twin[i], tags[i]);
    nan_pair(what, t, fs, fn, &x, at[i][0], at[i][1], snan[i], cnan[i], &a, &n);
    if (i == 0) {
      uint8_t *s = a.scale[0], *sn = n.scale[0];
      ok(s[0] == 126 && s[1] == 127 && s[4] == 124 && s[5] == 127 && code_at(t, &a, 0, 5) == 0x7,
         "  mxfp4: scales 126 (amax 3, NaN ignored) 127 124 127, the NaN's code 0x7 (got %d %d %d %d, 0x%X)", s[0], s[1], s[4], s[5],
         code_at(t, &a, 0, 5));
      int sev = 0;
      for (int j = 0; j < 16; j++) sev += n.data[0][j] == 0x77;
      ok(sn[0] == 0xFF && sn[1] == 127 && sn[4] == 124 && sn[5] == 127 && sev == 16,
         "  mxfp4_nanblock: scales 0xFF 127 124 127, the block's 16 bytes 0x77 (got %d %d %d %d, %d bytes)", sn[0], sn[1], sn[4], sn[5], sev);
      /* columnwise: [64, 2] data, column 5's block (rows 0-1) at scale offset 5 * 4 */
      ok(a.scale[1][20] == 124 && n.scale[1][20] == 0xFF && n.data[1][5] == 0x77 && a.data[1][5] == 0x67,
         "  columnwise: column 5's scale 124 (amax 0.5 below the NaN) / 0xFF; its data byte 0x67 (NaN 0x7, 0.5 * 2^3 = 4: 0x6) / 0x77 "
         "(got 0x%02X 0x%02X)", a.data[1][5], n.data[1][5]);
      float out[128];
      bc_tensor o = out_f32(out, 2, 64);
      bc_ref_dequantize(ctx, &a.q, BC_ROWWISE, &o);
      ok(out[5] == 3.0f && out[0] == 3.0f && out[33] == -6.0f, "  satfinite dequantized: the NaN -> 6 * 2^-1 = 3");
    }
    qfree(&a);
    qfree(&n);
    hp_free(&x);
  }
}

/* bc_format_get_info: element bits, packing groups and nan_policy of every built-in block format */
static void test_format_info(void) {
  for (int i = 0; i < NFMTS; i++) {
    const tfmt *t = &FMTS[i];
    bc_format_info fi;
    memset(&fi, 0, sizeof fi);
    is_int(bc_format_get_info(ctx, fmt(t->name), &fi), BC_OK, "%s: bc_format_get_info", t->name);
    ok(fi.element_bits == t->bits && fi.element_pack == pack_n(t) && fi.element_pack_bytes == pack_bytes(t) && fi.nan_policy &&
       !strcmp(fi.nan_policy, "satfinite") && fi.element_max == (float)t->emax,
       "  %d-bit elements, %d a group in %d byte(s), max %g, nan_policy satfinite (got %d, %d, %d, %g, %s)", t->bits, pack_n(t),
       pack_bytes(t), t->emax, fi.element_bits, fi.element_pack, fi.element_pack_bytes, fi.element_max,
       fi.nan_policy ? fi.nan_policy : "(null)");
  }
  bc_format_info fi;
  bc_format_get_info(ctx, fmt("mxfp6_e2m3"), &fi);
  ok(fi.element_pack == 4 && fi.element_pack_bytes == 3 && !strcmp(fi.nan_policy, "satfinite") && !strcmp(fi.element, "e2m3") &&
     fi.block == BC_BLOCK_1D && fi.block_rows == 1 && fi.block_cols == 32 && !strcmp(fi.scale_type, "e8m0") &&
     !strcmp(fi.scale_rule, "rceil") && fi.scale_bytes == 1 && fi.columnwise_transposed && fi.has_rowwise && fi.has_columnwise &&
     !fi.two_level,
     "mxfp6_e2m3: e2m3, 4 in 3 bytes, satfinite, 1x32 blocks, e8m0 rceil, columnwise transposed");
  bc_format_get_info(ctx, fmt("mxfp6_e3m2"), &fi);
  ok(fi.element_pack == 4 && fi.element_pack_bytes == 3 && !strcmp(fi.element, "e3m2") && fi.element_max == 28.0f &&
     fi.block_cols == 32 && !strcmp(fi.scale_rule, "rceil") && fi.columnwise_transposed,
     "mxfp6_e3m2: e3m2 (max 28), 4 in 3 bytes, 1x32 blocks, rceil, columnwise transposed");
  bc_format_get_info(ctx, fmt("nvfp4"), &fi);
  ok(fi.element_pack == 2 && fi.element_pack_bytes == 1, "nvfp4: 2 elements in 1 byte");
  bc_format_get_info(ctx, fmt("mxfp8_e4m3"), &fi);
  ok(fi.element_pack == 1 && fi.element_pack_bytes == 1, "mxfp8_e4m3: 1 element in 1 byte");
}


static void test_2d(void) {
  /* nvfp4_2d: a 16x16 block's scale repeated over its 16 rows; columnwise = exact transpose */
  const tfmt *t = &FMTS[6];
  const bc_format *f = fmt("nvfp4_2d");
  int64_t M = 40, K = 50;
  hp x;
  hp_alloc(&x, BC_FP32, M, K, 0);
  fill_random(&x, 12);
  qbuf b;
  qalloc(&b, f, M, K, 3, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "nvfp4_2d [40, 50]: quantize both");
  int rep = 0, trans = 0, n = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < K; c++) {
      uint32_t a = scale_entry(t, &b, 0, r, c), first = scale_entry(t, &b, 0, r / 16 * 16, c);
      uint32_t ct = scale_entry(t, &b, 1, c, r);
      rep += a == first;
      trans += a == ct;
      n++;
    }
  is_int(rep, n, "  rowwise scale: the same entry on all 16 rows of a block");
  is_int(trans, n, "  columnwise scale of (c, r) = rowwise scale of (r, c)");
  unsigned *rc = malloc(sizeof(unsigned) * (size_t)(M * K)), *cc = malloc(sizeof(unsigned) * (size_t)(M * K));
  unpack(t, &b, 0, rc);
  unpack(t, &b, 1, cc);
  int same = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < K; c++) same += rc[r * K + c] == cc[c * M + r];
  is_int(same, M * K, "  columnwise data [50, 40] is the exact transpose of rowwise [40, 50]");
  ok(padding_ok(t, &b, 0, 0xA5, "2d row") && padding_ok(t, &b, 1, 0xA5, "2d col"), "  both scale paddings zero");
  free(rc);
  free(cc);
  qfree(&b);
  hp_free(&x);

  /* fp8_block_128x128 */
  t = &FMTS[1];
  f = fmt("fp8_block_128x128");
  M = 200; K = 300;
  hp_alloc(&x, BC_BF16, M, K, 0);
  fill_random(&x, 30);
  qalloc(&b, f, M, K, 3, 0, 0xA5);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "fp8_block_128x128 bf16 [200, 300]: quantize both");
  trans = 0;
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 3; j++) {
      float a, c;
      memcpy(&a, b.scale[0] + (i * 4 + j) * 4, 4);
      memcpy(&c, b.scale[1] + (j * 4 + i) * 4, 4);
      trans += bits32(a) == bits32(c);
    }
  is_int(trans, 6, "  columnwise scale_inv [3, 4] is the transpose of rowwise [2, 4]");
  same = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < K; c++) same += b.data[0][r * K + c] == b.data[1][c * M + r];
  is_int(same, M * K, "  columnwise data is the exact transpose");
  ok(padding_ok(t, &b, 0, 0xA5, "128 row") && padding_ok(t, &b, 1, 0xA5, "128 col"), "  both scale paddings zero");
  qfree(&b);
  hp_free(&x);
}

/* ---- (3) Philox ---- */

static void test_philox(void) {
  uint32_t out[4];
  uint32_t c0[4] = { 0, 0, 0, 0 }, k0[2] = { 0, 0 };
  bci_philox4x32_10(c0, k0, out);
  ok(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u,
     "philox4x32-10, counter 0, key 0: Random123's known answer");
  uint32_t c1[4] = { 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu }, k1[2] = { 0xffffffffu, 0xffffffffu };
  bci_philox4x32_10(c1, k1, out);
  ok(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u && out[3] == 0x6d5451fdu,
     "philox4x32-10, counter and key all ones: Random123's known answer");
  uint32_t c2[4] = { 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u }, k2[2] = { 0xa4093822u, 0x299f31d0u };
  bci_philox4x32_10(c2, k2, out);
  ok(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u,
     "philox4x32-10, pi digits: Random123's known answer");
}

/* ---- (4) stochastic rounding ---- */

static void test_sr(void) {
  const tfmt *t = &FMTS[5];
  const bc_format *f = fmt("nvfp4");
  int64_t M = 8, K = 64;
  hp x;
  hp_alloc(&x, BC_BF16, M, K, 0);
  fill_random(&x, 6);
  qbuf a, b;
  qalloc(&a, f, M, K, 3, 0, 0xA5);
  qalloc(&b, f, M, K, 3, 0, 0x5A);
  a.q.stochastic_rounding = b.q.stochastic_rounding = 1;
  a.q.sr_seed = b.q.sr_seed = 0x123456789ABCDEFull;
  a.q.sr_offset = b.q.sr_offset = 77;
  ok(bc_ref_quantize(ctx, &x.t, &a.q) == BC_OK && bc_ref_quantize(ctx, &x.t, &b.q) == BC_OK, "nvfp4 SR: quantize twice");
  ok(!memcmp(a.data[0], b.data[0], a.L[0].data_bytes) && !memcmp(a.data[1], b.data[1], a.L[1].data_bytes) &&
     !memcmp(a.scale[0], b.scale[0], a.L[0].scale_bytes),
     "  same seed and offset: identical output (buffers poisoned differently)");
  b.q.sr_seed++;
  bc_ref_quantize(ctx, &x.t, &b.q);
  ok(memcmp(a.data[0], b.data[0], a.L[0].data_bytes) != 0, "  another seed: other bits");
  ok(!memcmp(a.scale[0], b.scale[0], a.L[0].scale_bytes), "  ... same scales");
  b.q.sr_seed--;
  b.q.sr_offset++;
  bc_ref_quantize(ctx, &x.t, &b.q);
  ok(memcmp(a.data[1], b.data[1], a.L[1].data_bytes) != 0, "  another offset: other bits");
  /* every SR code is one of the two neighbours of x * enc */
  b.q.stochastic_rounding = 0;
  bc_ref_quantize(ctx, &x.t, &b.q);
  float sdec, senc;
  two_level(a.amax, &senc, &sdec);
  double pv[256];
  int npv = pos_values(t, pv), nb = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < K; c++) {
      double fct = factor_of(t, scale_entry(t, &a, 0, r, c), sdec);
      float xv = hp_get(&x, r, c);
      unsigned code = code_at(t, &a, 0, r * K + c);
      double av = fabs(xv / fct), cv = fabs(e2m1_value(code)), l1, h1, l2, h2;
      int sgn = ((code & 8) != 0) == (signbit(xv) != 0);
      if (av * (1 - 1e-6) >= 6) { nb += sgn && cv == 6; continue; }
      bracket(pv, npv, av * (1 - 1e-6), &l1, &h1);
      bracket(pv, npv, fmin(av * (1 + 1e-6), 5.99), &l2, &h2);
      nb += sgn && (cv == l1 || cv == h1 || cv == l2 || cv == h2);
    }
  is_int(nb, M * K, "  SR codes are one of the two neighbours of x / scale, sign kept");
  qfree(&a);
  qfree(&b);
  hp_free(&x);

  /* mean over many offsets: unbiased within 3 sigma; exact values never move */
  static const float vals[] = { 2.3f, 0.2f, -4.7f, 1.25f, 5.5f, 3.0f };
  const int nv = (int)(sizeof vals / sizeof vals[0]), per = 15, N = 1500;
  hp_alloc(&x, BC_FP32, 1, 16 * nv, 0);
  for (int k = 0; k < nv; k++) {
    hp_set(&x, 0, 16 * k, 6.0f);
    for (int j = 1; j <= per; j++) hp_set(&x, 0, 16 * k + j, vals[k]);
  }
  qalloc(&a, f, 1, 16 * nv, 1, 0, 0xA5);
  a.q.stochastic_rounding = 1;
  a.q.sr_seed = 42;
  double sum[8] = { 0 }, sq[8] = { 0 };
  float *out = malloc(sizeof(float) * 16 * (size_t)nv);
  bc_tensor o = out_f32(out, 1, 16 * nv);
  for (int it = 0; it < N; it++) {
    a.q.sr_offset = (uint64_t)it * 1000003u;
    a.amax = 2688.0f; /* S_enc 1, block amax 6 -> scale 1, encode factor 1 */
    bc_ref_quantize_cast(ctx, &x.t, &a.q);
    bc_ref_dequantize(ctx, &a.q, BC_ROWWISE, &o);
    for (int k = 0; k < nv; k++)
      for (int j = 1; j <= per; j++) { sum[k] += out[16 * k + j]; sq[k] += (double)out[16 * k + j] * out[16 * k + j]; }
  }
  for (int k = 0; k < nv; k++) {
    double v = vals[k], av = fabs(v);
    double lo = av < 2 ? floor(av * 2) / 2 : av < 4 ? floor(av) : 4, hi = av < 2 ? lo + 0.5 : av < 4 ? lo + 1 : 6;
    double p = (av - lo) / (hi - lo), var = p * (1 - p) * (hi - lo) * (hi - lo), n = (double)N * per;
    double mean = sum[k] / n, sigma = sqrt(var / n);
    if (var == 0) ok(mean == v && sq[k] / n == v * v, "  SR of %g (a code value): always %g", v, v);
    else ok(fabs(mean - v) <= 3 * sigma, "  SR mean of %g over %d samples: %.5f (3 sigma = %.5f)", v, (int)n, mean, 3 * sigma);
  }
  free(out);
  qfree(&a);
  hp_free(&x);
}

/* The exact SR bits of every element, rowwise and columnwise, from the rule: Philox4x32-10 word
 * e % 4 of counter (e / 4, offset) under key seed, e = r * cols + c rowwise and
 * rows * cols + c * rows + r columnwise; up iff (rnd >> 8) < floor(p * 2^24). */
static void test_sr_bits(void) {
  const tfmt *t = &FMTS[5];
  const bc_format *f = fmt("nvfp4");
  const int64_t M = 32, K = 48;
  const uint64_t seed = 0x0123456789ABCDEFull, offset = 0xFEDCBA9876543210ull;
  static const float vals[] = { 2.3f, -2.3f, 0.2f, -4.7f, 1.25f, 0.75f, 3.0f };
  hp x;
  hp_alloc(&x, BC_FP32, M, K, 0);
  for (int64_t r = 0; r < M; r++)
    for (int64_t c = 0; c < K; c++)
      hp_set(&x, r, c, (r % 16 == 0 || c % 16 == 0) ? 6.0f : vals[(r * 7 + c * 3) % 7]); /* every block's amax is 6 */
  qbuf b;
  qalloc(&b, f, M, K, 3, 0, 0xA5);
  b.amax = 2688.0f; /* S_enc 1: block scale 1.0, encode factor 1 */
  b.q.stochastic_rounding = 1;
  b.q.sr_seed = seed;
  b.q.sr_offset = offset;
  is_int(bc_ref_quantize_cast(ctx, &x.t, &b.q), BC_OK, "nvfp4 SR [32, 48], seed and offset with both halves set");
  double pv[256];
  int npv = pos_values(t, pv);
  for (int d = 0; d < 2; d++) {
    int64_t bad = 0, ups = 0, n = 0;
    for (int64_t r = 0; r < M; r++)
      for (int64_t c = 0; c < K; c++) {
        float v = hp_get(&x, r, c);
        double a = fabs(v), lo, hi;
        bracket(pv, npv, a, &lo, &hi);
        uint64_t e = d ? (uint64_t)(M * K + c * M + r) : (uint64_t)(r * K + c), blk = e / 4;
        uint32_t ctr[4] = { (uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)offset, (uint32_t)(offset >> 32) };
        uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) }, rnd[4];
        bci_philox4x32_10(ctr, key, rnd);
        uint32_t p24 = (uint32_t)floor((a - lo) / (hi - lo) * 16777216.0);
        int up = a < 6 && (rnd[e % 4] >> 8) < p24;
        double want = a >= 6 ? 6 : up ? hi : lo;
        unsigned code = code_at(t, &b, d, d ? c * M + r : r * K + c);
        double got = e2m1_value(code);
        n++;
        ups += up;
        if (got != (signbit(v) ? -want : want) && bad++ < 3)
          diag("%s (%lld, %lld): x %g, rnd 0x%08X p24 %u: got %g", d ? "columnwise" : "rowwise", (long long)r, (long long)c, v,
               rnd[e % 4], p24, got);
      }
    ok(bad == 0 && ups > 0 && ups < n, "  %s: all %lld codes as the rule's Philox bits say (%lld rounded up)",
       d ? "columnwise" : "rowwise", (long long)n, (long long)ups);
  }
  qfree(&b);
  hp_free(&x);
}

/* ---- (5) properties on random data, exact round trips ---- */

/* Check direction d of a quantized x: every code is a nearest code of x / factor (saturated,
 * NaN -> the NaN code, sign kept) and each block's scale follows its rule's bounds. */
static void check_props(const tfmt *t, const hp *x, const qbuf *b, int d, const char *what) {
  int64_t M = x->t.rows, K = x->t.cols, vrows = d ? K : M, vcols = d ? M : K;
  double pv[256];
  int npv = pos_values(t, pv);
  float senc = 1, sdec = 1;
  if (t->rule == R_TWO) two_level(b->amax, &senc, &sdec);
  int64_t bad_code = 0, bad_scale = 0, n = 0, nb = 0;
  int vbr = t->two_d ? t->blk : 1;
  for (int64_t br = 0; br < vrows; br += vbr)
    for (int64_t bc = 0; bc < vcols; bc += t->blk) {
      double amax = 0;
      for (int64_t vr = br; vr < br + vbr && vr < vrows; vr++)
        for (int64_t vc = bc; vc < bc + t->blk && vc < vcols; vc++) {
          float v = d ? hp_get(x, vc, vr) : hp_get(x, vr, vc);
          if (fabsf(v) > amax) amax = fabsf(v);
        }
      uint32_t e = scale_entry(t, b, d, br, bc);
      double F = factor_of(t, e, sdec);
      /* the scale rule's bounds */
      int sok = 1;
      if (t->rule == R_AMAX) {
        if (amax == 0 || isinf(amax)) sok = F == 1.0;
        else {
          /* scale = 2^k (pow2), amax * scale <= emax < 2 amax * scale, except where emax / amax overflowed
           * (the scale is then the dtype's max, 2^127 after pow2) */
          double sc = 1.0 / F;
          int k;
          sok = frexp(sc, &k) == 0.5 && amax * sc <= t->emax * (1 + 3e-7) &&
                (amax * sc * 2 > t->emax * (1 - 3e-7) || sc == ldexp(1, 127));
        }
      } else if (t->rule == R_RCEIL) {
        if (amax == 0) sok = e == 0;
        else if (isinf(amax)) sok = e == 254;
        else sok = amax / F <= t->emax * (1 + 3e-7) && (amax / F > t->emax / 2 * (1 - 3e-7) || e == 0 || e == 254);
      } else {
        double want = amax * senc / 6, fs = ue4m3_value(e);
        sok = e <= 0x7E && (want >= 448 ? e == 0x7E : fabs(fs - want) <= fmax(fs, want) / 16 * (1 + 1e-6) + ldexp(1, -10));
      }
      nb++;
      if (!sok) {
        if (bad_scale++ < 3) diag("%s: block (%lld, %lld) amax %g: scale entry 0x%X factor %g", what, (long long)br, (long long)bc, amax, e, F);
      }
      /* the codes */
      for (int64_t vr = br; vr < br + vbr && vr < vrows; vr++)
        for (int64_t vc = bc; vc < bc + t->blk && vc < vcols; vc++) {
          float xv = d ? hp_get(x, vc, vr) : hp_get(x, vr, vc);
          unsigned c = code_at(t, b, d, data_index(t, b, d, vr, vc));
          double cv = elem_value(t, c);
          int cok;
          n++;
          if (isnan(xv)) cok = c == nan_code(t);
          else {
            /* two-level: the encode factor 1 / (s * S_dec) is capped at FLT_MAX, so a block whose scale
             * is 0 multiplies by FLT_MAX (a denormal there need not saturate) */
            double tv = t->rule == R_TWO && F == 0 ? (double)xv * FLT_MAX : (double)xv / F, a = fabs(tv);
            int sgn = (c & (unsigned)sign_bit(t)) != 0;
            cok = sgn == (signbit(xv) != 0) && !isnan(cv);
            if (a >= pv[npv - 1]) cok = cok && fabs(cv) == pv[npv - 1];
            else if (isnan(a)) cok = cok && cv == 0; /* 0 / 0: a zero in a block whose scale is 0 */
            else {
              double lo, hi;
              bracket(pv, npv, a, &lo, &hi);
              double mid = (lo + hi) / 2, tol = mid * 1e-6;
              double want = a < mid - tol ? lo : a > mid + tol ? hi : -1;
              cok = cok && (want < 0 ? (fabs(cv) == lo || fabs(cv) == hi) : fabs(cv) == want);
            }
          }
          if (!cok && bad_code++ < 5)
            diag("%s: view (%lld, %lld) x %a factor %g -> code 0x%X (%g)", what, (long long)vr, (long long)vc, xv, F, c, cv);
        }
    }
  ok(bad_code == 0 && bad_scale == 0, "%s: %lld codes nearest to x / scale, %lld block scales within their rule's bounds", what,
     (long long)n, (long long)nb);
}

static float special(bc_dtype dt, int huge) {
  switch (rnd64() % (huge ? 6 : 4)) {
  case 0: return 0.0f;
  case 1: return -0.0f;
  case 2: return NAN;
  case 3: return dt == BC_FP32 ? ldexpf(1, -140) : dt == BC_BF16 ? ldexpf(3, -133) : ldexpf(5, -24); /* denormals */
  case 4: return dt == BC_FP32 ? -FLT_MAX / 4 : dt == BC_BF16 ? f32(0xFF7F0000u) : -65504.0f;
  default: return dt == BC_FP16 ? 60000.0f : 1e30f;
  }
}

static void test_props(void) {
  static const bc_dtype dts[] = { BC_FP32, BC_BF16, BC_FP16 };
  static const char *dn[] = { "fp32", "bf16", "fp16" };
  for (int i = 0; i < NFMTS; i++) {
    const tfmt *t = &FMTS[i];
    const bc_format *f = fmt(t->name);
    for (int k = 0; k < 3; k++) {
      int64_t M = 130 + 2 * k, K = 290 - 4 * k;
      if (pack_n(t) == 4) { M = 132 + 4 * k; K = 292 - 4 * k; } /* rows and cols hold whole 6-bit groups */
      hp x;
      hp_alloc(&x, dts[k], M, K, k == 1 ? K + 3 : 0);
      /* two-level: a 17-binade scale range under one global amax, so a narrower spread, no huge values */
      double spread = t->rule == R_TWO ? 12 : dts[k] == BC_FP16 ? 10 : 40;
      for (int64_t r = 0; r < M; r++) {
        double rowmag = ldexp(1, (int)(unif() * spread) - (int)(spread / 2));
        for (int64_t c = 0; c < K; c++) {
          float v = (rnd64() % 50 == 0) ? special(dts[k], t->rule != R_TWO) : (float)(gauss() * rowmag * (unif() < 0.1 ? 64 : 1));
          if (dts[k] == BC_FP16 && fabsf(v) > 65504) v = 60000;
          hp_set(&x, r, c, v);
        }
      }
      int swz = k == 2;
      qbuf b, b2;
      qalloc(&b, f, M, K, 3, swz, 0xA5);
      qalloc(&b2, f, M, K, 3, swz, 0x5A);
      char what[160];
      snprintf(what, sizeof what, "%s %s [%lld, %lld]%s%s", t->name, dn[k], (long long)M, (long long)K,
               k == 1 ? " strided" : "", swz ? " swizzled" : "");
      bc_status s1 = bc_ref_quantize(ctx, &x.t, &b.q), s2 = bc_ref_quantize(ctx, &x.t, &b2.q);
      if (!ok(s1 == BC_OK && s2 == BC_OK, "%s: quantize", what)) diag("%s", bc_last_error(ctx));
      ok(!memcmp(b.data[0], b2.data[0], b.L[0].data_bytes) && !memcmp(b.data[1], b2.data[1], b.L[1].data_bytes) &&
         !memcmp(b.scale[0], b2.scale[0], b.L[0].scale_bytes) && !memcmp(b.scale[1], b2.scale[1], b.L[1].scale_bytes),
         "%s: every byte written (two poisons, same output)", what);
      ok(padding_ok(t, &b, 0, 0xA5, what) && padding_ok(t, &b, 1, 0xA5, what), "%s: scale padding zero", what);
      for (int d = 0; d < 2; d++) {
        char w2[200];
        snprintf(w2, sizeof w2, "%s %s", what, d ? "columnwise" : "rowwise");
        check_props(t, &x, &b, d, w2);
      }
      /* one direction at a time gives the same bytes */
      qbuf r1;
      qalloc(&r1, f, M, K, 2, swz, 0x11);
      bc_ref_quantize(ctx, &x.t, &r1.q);
      ok(!memcmp(r1.data[1], b.data[1], b.L[1].data_bytes) && !memcmp(r1.scale[1], b.scale[1], b.L[1].scale_bytes),
         "%s: columnwise alone = columnwise of both", what);
      qfree(&r1);
      /* dequantize: code value * factor, written in the out dtype */
      for (int d = 0; d < 2; d++) {
        int64_t dr = b.L[d].data_rows, dc = b.L[d].data_cols;
        float *o = malloc(sizeof(float) * (size_t)(dr * dc));
        uint16_t *o16 = malloc(2 * (size_t)(dr * dc));
        bc_tensor ot = out_f32(o, dr, dc), ob = { o16, BC_BF16, dr, dc, 0 };
        float sdec = 1, senc;
        if (t->rule == R_TWO) two_level(b.amax, &senc, &sdec);
        int good = bc_ref_dequantize(ctx, &b.q, d ? BC_COLUMNWISE : BC_ROWWISE, &ot) == BC_OK;
        good &= bc_ref_dequantize(ctx, &b.q, d ? BC_COLUMNWISE : BC_ROWWISE, &ob) == BC_OK;
        int64_t bad = 0;
        for (int64_t r = 0; r < dr; r++)
          for (int64_t c = 0; c < dc; c++) {
            int as_view = d == 0 || t->col_data_tr;
            int64_t vr = as_view ? r : c, vc = as_view ? c : r;
            uint32_t e = scale_entry(t, &b, d, vr, vc);
            float cv = (float)elem_value(t, code_at(t, &b, d, r * dc + c)), want;
            if (t->rule == R_TWO) want = (cv * (float)ue4m3_value(e)) * sdec;
            else want = cv * (float)factor_of(t, e, 1);
            float got = o[r * dc + c];
            int same = isnan(want) ? (isnan(got) && bits32(got) == 0x7FFFFFFFu && o16[r * dc + c] == 0x7FFF)
                                   : (bits32(got) == bits32(want) && o16[r * dc + c] == to_bf16(want));
            if (!same && bad++ < 3) diag("%s dir %d: out (%lld, %lld) = %a, expected %a", what, d, (long long)r, (long long)c, got, want);
          }
        ok(good && bad == 0, "%s %s: dequantize = code * factor (fp32 and bf16 out)", what, d ? "columnwise" : "rowwise");
        free(o);
        free(o16);
      }
      qfree(&b);
      qfree(&b2);
      hp_free(&x);
    }
  }
}

/* x built from code values times a chosen per-block factor: quantize + dequantize gives x back */
static void test_roundtrip(void) {
  static const bc_dtype dts[] = { BC_FP32, BC_BF16 };
  for (int i = 0; i < NFMTS; i++) {
    const tfmt *t = &FMTS[i];
    const bc_format *f = fmt(t->name);
    for (int k = 0; k < 2; k++)
      for (int d = 0; d < 2; d++) {
        int64_t M = pack_n(t) == 4 ? 72 : 70, K = 260, vrows = d ? K : M, vcols = d ? M : K;
        int vbr = t->two_d ? t->blk : 1;
        hp x;
        hp_alloc(&x, dts[k], M, K, 0);
        int64_t nbr = cdiv(vrows, vbr), nbc = cdiv(vcols, t->blk);
        uint32_t *want = malloc(sizeof(uint32_t) * (size_t)(nbr * nbc));
        for (int64_t bi = 0; bi < nbr; bi++)
          for (int64_t bj = 0; bj < nbc; bj++) {
            double F;
            uint32_t w;
            if (t->rule == R_AMAX) { int kk = (int)(rnd64() % 40) - 20; F = ldexp(1, -kk); w = bits32((float)F); }
            else if (t->rule == R_RCEIL) { int kk = (int)(rnd64() % 40) - 20; F = ldexp(1, kk); w = (uint32_t)(127 + kk); }
            else { w = 0x20 + (uint32_t)(rnd64() % 0x5E); F = ue4m3_value(w); } /* S_enc 1 below */
            want[bi * nbc + bj] = w;
            int first = 1;
            for (int64_t vr = bi * vbr; vr < (bi + 1) * vbr && vr < vrows; vr++)
              for (int64_t vc = bj * t->blk; vc < (bj + 1) * t->blk && vc < vcols; vc++) {
                double cv;
                if (first) { cv = (rnd64() & 1) ? -t->emax : t->emax; first = 0; } /* the block amax: emax * F */
                else {
                  unsigned c;
                  do c = (unsigned)(rnd64() % (1u << t->bits)); while (isnan(elem_value(t, c)) || isinf(elem_value(t, c)));
                  cv = elem_value(t, c);
                }
                float v = (float)(cv * F);
                if (d) hp_set(&x, vc, vr, v); else hp_set(&x, vr, vc, v);
              }
          }
        qbuf b;
        qalloc(&b, f, M, K, 1 << d, 0, 0xA5);
        b.amax = 2688.0f;
        bc_status s = t->rule == R_TWO ? bc_ref_quantize_cast(ctx, &x.t, &b.q) : bc_ref_quantize(ctx, &x.t, &b.q);
        int64_t badscale = 0, bad = 0;
        for (int64_t bi = 0; bi < nbr; bi++)
          for (int64_t bj = 0; bj < nbc; bj++)
            badscale += scale_entry(t, &b, d, bi * vbr, bj * t->blk) != want[bi * nbc + bj];
        int64_t dr = b.L[d].data_rows, dc = b.L[d].data_cols;
        float *o = malloc(sizeof(float) * (size_t)(dr * dc));
        bc_tensor ot = out_f32(o, dr, dc);
        s |= bc_ref_dequantize(ctx, &b.q, d ? BC_COLUMNWISE : BC_ROWWISE, &ot);
        for (int64_t r = 0; r < dr; r++)
          for (int64_t c = 0; c < dc; c++) {
            int as_view = d == 0 || t->col_data_tr;
            int64_t vr = as_view ? r : c, vc = as_view ? c : r;
            float xv = d ? hp_get(&x, vc, vr) : hp_get(&x, vr, vc);
            if (bits32(o[r * dc + c]) != bits32(xv) && !(xv == 0 && o[r * dc + c] == 0) && bad++ < 3)
              diag("%s dir %d (%lld, %lld): x %a, back %a", t->name, d, (long long)r, (long long)c, xv, o[r * dc + c]);
          }
        ok(s == BC_OK && badscale == 0 && bad == 0, "%s %s %s [%lld, %lld]: chosen scales found and x comes back exactly",
           t->name, k ? "bf16" : "fp32", d ? "columnwise" : "rowwise", (long long)M, (long long)K);
        if (badscale) diag("%lld block scales differ", (long long)badscale);
        free(o);
        free(want);
        qfree(&b);
        hp_free(&x);
      }
  }
}

/* ---- (6) argument errors ---- */

static void test_args(void) {
  hp x;
  hp_alloc(&x, BC_FP32, 4, 64, 0);
  qbuf b;
  qalloc(&b, fmt("mxfp8_e4m3"), 4, 64, 3, 0, 0);
  bc_qtensor q = b.q;
  q.stochastic_rounding = 1;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "format 'mxfp8_e4m3' does not allow stochastic rounding", "SR on mxfp8");
  q = b.q; q.rowwise_scale_inv = NULL;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "q->rowwise_scale_inv is NULL", "NULL rowwise scale");
  q = b.q; q.columnwise_scale_inv = NULL;
  ERR_HAS(bc_ref_quantize_cast(ctx, &x.t, &q), BC_ERR_ARG, "q->columnwise_scale_inv is NULL", "NULL columnwise scale");
  q = b.q; q.rowwise_data = q.columnwise_data = NULL;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "neither rowwise_data nor columnwise_data", "no direction");
  q = b.q; q.rows = 5;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "q has shape [5, 64] but x has [4, 64]", "shape mismatch");
  q = b.q; q.amax = NULL; q.scale = NULL;
  is_int(bc_ref_quantize(ctx, &x.t, &q), BC_OK, "mxfp8 needs neither q->amax nor q->scale");
  q = b.q;
  ERR_HAS(bc_ref_dequantize(ctx, &q, (bc_direction)7, &x.t), BC_ERR_ARG, "dir is 7; expected BC_ROWWISE or BC_COLUMNWISE", "bad dir");
  ERR_HAS(bc_ref_dequantize(ctx, &q, BC_ROWWISE, NULL), BC_ERR_ARG, "argument 'out' is NULL", "NULL out");
  q.rowwise_scale_inv = NULL;
  ERR_HAS(bc_ref_dequantize(ctx, &q, BC_ROWWISE, &x.t), BC_ERR_ARG, "q->rowwise_scale_inv is NULL", "dequantize without scales");
  q = b.q; q.columnwise_data = NULL;
  ERR_HAS(bc_ref_dequantize(ctx, &q, BC_COLUMNWISE, &x.t), BC_ERR_ARG, "q->columnwise_data is NULL", "dequantize without data");
  ERR_HAS(bc_ref_dequantize(ctx, NULL, BC_ROWWISE, &x.t), BC_ERR_ARG, "'q->format' is NULL", "dequantize NULL q");
  qfree(&b);

  qalloc(&b, fmt("nvfp4"), 4, 64, 3, 0, 0);
  q = b.q; q.amax = NULL;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "q->amax is NULL; format 'nvfp4' is two-level", "nvfp4 quantize without amax");
  ERR_HAS(bc_ref_quantize_cast(ctx, &x.t, &q), BC_ERR_ARG, "q->amax is NULL", "nvfp4 quantize_cast without amax");
  ERR_HAS(bc_ref_dequantize(ctx, &q, BC_ROWWISE, &x.t), BC_ERR_ARG, "q->amax is NULL", "nvfp4 dequantize without amax");
  q = b.q;
  q.stochastic_rounding = 1;
  is_int(bc_ref_quantize(ctx, &x.t, &q), BC_OK, "nvfp4 allows stochastic rounding");
  ERR_HAS(bc_ref_dequantize(ctx, &q, BC_COLUMNWISE, &x.t), BC_ERR_ARG, "out has shape [4, 64]; the columnwise data of q is [64, 4]",
          "dequantize into the wrong shape");
  qfree(&b);
  hp_free(&x);

  hp_alloc(&x, BC_FP32, 4, 63, 0);
  qalloc(&b, fmt("nvfp4"), 4, 64, 2, 0, 0);
  q = b.q; q.cols = 63;
  is_int(bc_ref_quantize(ctx, &x.t, &q), BC_OK, "nvfp4 [4, 63] columnwise only: fine (data [63, 4])");
  qfree(&b);
  qalloc(&b, fmt("nvfp4"), 4, 64, 1, 0, 0);
  q = b.q; q.cols = 63;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "cols is 63; expected a multiple of 2", "nvfp4 rowwise with odd cols");
  qfree(&b);
  hp_free(&x);

  /* 6-bit: rows of whole groups of 4 */
  hp_alloc(&x, BC_FP32, 6, 6, 0);
  qalloc(&b, fmt("mxfp6_e3m2"), 8, 8, 1, 0, 0);
  q = b.q; q.rows = 6; q.cols = 6;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG,
          "format 'mxfp6_e3m2' packs 4 6-bit elements in 3 byte(s), so its rowwise data rows must hold whole groups: cols is 6; "
          "expected a multiple of 4",
          "mxfp6_e3m2 rowwise [6, 6]");
  ERR_HAS(bc_ref_dequantize(ctx, &q, BC_ROWWISE, &x.t), BC_ERR_ARG, "cols is 6; expected a multiple of 4", "mxfp6_e3m2 dequantize [6, 6]");
  qfree(&b);
  hp_free(&x);
  hp_alloc(&x, BC_FP32, 6, 8, 0);
  qalloc(&b, fmt("mxfp6_e2m3"), 8, 8, 2, 0, 0);
  q = b.q; q.rows = 6;
  ERR_HAS(bc_ref_quantize(ctx, &x.t, &q), BC_ERR_ARG, "its columnwise data rows must hold whole groups: rows is 6; expected a multiple of 4",
          "mxfp6_e2m3 columnwise [6, 8]");
  qfree(&b);
  qalloc(&b, fmt("mxfp6_e2m3"), 6, 8, 1, 0, 0);
  is_int(bc_ref_quantize(ctx, &x.t, &b.q), BC_OK, "mxfp6_e2m3 [6, 8] rowwise only: fine");
  qfree(&b);
  hp_free(&x);
}

int main(void) {
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  test_layouts();
  test_mxfp8_hand();
  test_fp8_block_hand();
  test_nvfp4_hand();
  test_mxfp6_hand();
  test_nan_policy();
  test_format_info();
  test_2d();
  test_philox();
  test_sr();
  test_sr_bits();
  test_props();
  test_roundtrip();
  test_args();
  bc_ctx_destroy(ctx);
  return done_testing();
}
