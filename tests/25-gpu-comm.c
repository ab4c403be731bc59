/* tests/25-gpu-comm.c: the collectives on one GPU. Ranks are threads of this process on the
 * local transport (W in {2, 3, 4, 8}), each with its own stream and its own output buffers
 * (poisoned), and once over real NCCL with one rank.
 *   - bc_all_gather of every format x direction x split (equal whole blocks, equal rows cutting
 *     blocks, unequal, a rank with 0 rows, odd rows) x compact/swizzled scales, strided inputs
 *     of each dtype: every rank's gathered tensor is bit-identical to bc_quantize of the whole
 *     tensor on one GPU (amax and scale included), and the bytes each rank sent (counted by the
 *     transport) equal the formula of README.md, computed here from bc_qtensor_layout;
 *   - one format used alternately with a group of 4 and two groups of 2 of the same threads:
 *     each result is the one of its own group;
 *   - bc_quantize_comm / bc_quantize_list_comm: bc_quantize_cast with the group's amax;
 *     bc_amax_allreduce;
 *   - no host synchronization: with each rank's stream held by a sleeping host function, the
 *     calls return while the stream is still busy;
 *   - argument disagreement across ranks fails every rank naming it; a rank whose arguments
 *     fail its checks fails the others too (no one waits);
 *   - NCCL, one rank: bootstrapped from a file, the same calls give the same bytes, and no host
 *     synchronization either. */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "testdata.h"

static bc_ctx *ctx;
static int log_count;
static char log_first[1024];
static void on_log(void *user, bc_log_level level, const char *msg) {
  (void)user;
  if (level == BC_LOG_WARN && log_count++ == 0) snprintf(log_first, sizeof log_first, "%s", msg);
}

typedef struct gcase {
  const bc_format *f;
  bc_format_info info;
  bc_dtype dt;
  int64_t K, M;
  int W;
  int64_t rows[64];
  int dirs, swz, ld_pad;
  const char *split;
} gcase;

typedef struct buf4 {
  bc_qlayout lr, lc;
  uint8_t *rd, *rs, *cd, *cs;
  float *amax, *scale;
} buf4;

static void buf_alloc(const gcase *c, buf4 *b, int poison) {
  memset(b, 0, sizeof *b);
  if (c->dirs & 1) {
    bc_qtensor_layout(ctx, c->f, c->M, c->K, BC_ROWWISE, c->swz, &b->lr);
    b->rd = dmalloc(b->lr.data_bytes);
    b->rs = dmalloc(b->lr.scale_bytes);
    CK(cudaMemset(b->rd, poison, b->lr.data_bytes));
    CK(cudaMemset(b->rs, poison, b->lr.scale_bytes));
  }
  if (c->dirs & 2) {
    bc_qtensor_layout(ctx, c->f, c->M, c->K, BC_COLUMNWISE, c->swz, &b->lc);
    b->cd = dmalloc(b->lc.data_bytes);
    b->cs = dmalloc(b->lc.scale_bytes);
    CK(cudaMemset(b->cd, poison, b->lc.data_bytes));
    CK(cudaMemset(b->cs, poison, b->lc.scale_bytes));
  }
  b->amax = dmalloc(4);
  b->scale = dmalloc(4);
  CK(cudaMemset(b->amax, poison, 4));
  CK(cudaMemset(b->scale, poison, 4));
}

static void buf_free(buf4 *b) {
  cudaFree(b->rd); cudaFree(b->rs); cudaFree(b->cd); cudaFree(b->cs); cudaFree(b->amax); cudaFree(b->scale);
}

static bc_qtensor qt_of(const gcase *c, const buf4 *b) {
  bc_qtensor q = { c->f, c->M, c->K, b->rd, b->rs, b->cd, b->cs, b->amax, b->scale, c->swz, 0, 0, 0 };
  return q;
}

static int same_bufs(const gcase *c, const buf4 *g, const buf4 *r, int rank) {
  char w[64];
  int good = 1;
  const char *dn[2] = { "rowwise", "columnwise" };
  for (int d = 0; d < 2; d++) {
    if (!(c->dirs & (1 << d))) continue;
    const bc_qlayout *l = d ? &g->lc : &g->lr;
    snprintf(w, sizeof w, "rank %d %s data", rank, dn[d]);
    good &= same_dev(w, d ? g->cd : g->rd, d ? r->cd : r->rd, l->data_bytes);
    snprintf(w, sizeof w, "rank %d %s scale_inv", rank, dn[d]);
    good &= same_dev(w, d ? g->cs : g->rs, d ? r->cs : r->rs, l->scale_bytes);
  }
  if (c->info.block == BC_BLOCK_TENSOR || c->info.two_level) {
    snprintf(w, sizeof w, "rank %d amax", rank);
    good &= same_dev(w, g->amax, r->amax, 4);
  }
  if (c->info.block == BC_BLOCK_TENSOR) {
    snprintf(w, sizeof w, "rank %d scale", rank);
    good &= same_dev(w, g->scale, r->scale, 4);
  }
  return good;
}

/* ---- the README's formula of the bytes a rank sends ---- */

static uint64_t expected_bytes_hp(const gcase *c, int r);

/* a scale buffer up to its last valid entry */
static size_t scale_prefix(const bc_qlayout *l) {
  if (!l->scale_valid_rows || !l->scale_valid_cols) return 0;
  return ((size_t)(l->scale_valid_rows - 1) * (size_t)l->scale_cols + (size_t)l->scale_valid_cols) * l->scale_elem_bytes;
}

static int straddles(const gcase *c) {
  const bc_format_info *in = &c->info;
  int64_t Bm = in->block == BC_BLOCK_2D ? in->block_rows : (in->block == BC_BLOCK_1D && (c->dirs & 2) ? in->block_cols : 1);
  int64_t r0 = 0;
  for (int q = 0; q < c->W; q++) {
    int64_t m = c->rows[q];
    if (m && (r0 % Bm || ((r0 + m) % Bm && r0 + m != c->M))) return 1;
    r0 += m;
  }
  return 0;
}

static uint64_t expected_bytes(const gcase *c, int r, int quant_in) {
  if (quant_in && !straddles(c)) {
    /* the pieces as they are: data, and xq's scales (whole when swizzled) */
    const bc_format_info *in = &c->info;
    int64_t m = c->rows[r];
    if (!m) return 0;
    int want_row = c->dirs & 1, want_col = c->dirs & 2;
    int tensor = in->block == BC_BLOCK_TENSOR, twod = in->block == BC_BLOCK_2D, oned = in->block == BC_BLOCK_1D;
    size_t rowbytes = (size_t)(c->K * in->element_bits / 8);
    uint64_t b = 0;
    bc_qlayout l;
    if (want_row || ((tensor || twod) && want_col)) {
      b += (uint64_t)m * rowbytes;
      if (!tensor) {
        bc_qtensor_layout(ctx, c->f, m, c->K, BC_ROWWISE, c->swz, &l);
        b += c->swz ? l.scale_bytes : scale_prefix(&l);
      }
    }
    if (oned && want_col) {
      bc_qtensor_layout(ctx, c->f, m, c->K, BC_COLUMNWISE, c->swz, &l);
      b += in->columnwise_transposed ? l.data_bytes : (uint64_t)m * rowbytes;
      b += c->swz ? l.scale_bytes : scale_prefix(&l);
    }
    return b;
  }
  return expected_bytes_hp(c, r);
}

static uint64_t expected_bytes_hp(const gcase *c, int r) {
  const bc_format_info *in = &c->info;
  int want_row = c->dirs & 1, want_col = c->dirs & 2;
  int tensor = in->block == BC_BLOCK_TENSOR, twod = in->block == BC_BLOCK_2D, oned = in->block == BC_BLOCK_1D;
  int64_t Bm = twod ? in->block_rows : (oned && want_col ? in->block_cols : 1);
  int64_t G = twod ? in->block_cols : 1, nbc = (c->K + G - 1) / G;
  int64_t row0[65] = { 0 };
  for (int q = 0; q < c->W; q++) row0[q + 1] = row0[q] + c->rows[q];
  int exchange = 0;
  int64_t a = 0, s = 0;
  for (int q = 0; q < c->W; q++) {
    if (!c->rows[q]) continue;
    int64_t lo = row0[q], hi = row0[q + 1];
    int64_t aq = lo / Bm * Bm, bq = (hi + Bm - 1) / Bm * Bm;
    if (bq > c->M) bq = c->M;
    if (aq != lo || bq != hi) exchange = 1;
    if (q == r) { a = aq; s = bq - aq; }
  }
  (void)a;
  uint64_t b = 0;
  if (tensor || in->two_level) b += 4;
  if (exchange) b += 2 * (uint64_t)nbc * 4;
  int64_t m = c->rows[r];
  size_t rowbytes = (size_t)(c->K * in->element_bits / 8);
  if (want_row || ((tensor || twod) && want_col)) b += (uint64_t)m * rowbytes;
  if (!m) return b;
  bc_qlayout l;
  if (!tensor && (want_row || (twod && want_col))) {
    bc_qtensor_layout(ctx, c->f, s, c->K, BC_ROWWISE, 0, &l);
    b += scale_prefix(&l);
  }
  if (oned && want_col) {
    bc_qtensor_layout(ctx, c->f, s, c->K, BC_COLUMNWISE, 0, &l);
    if (in->columnwise_transposed) b += l.data_bytes;
    else b += (uint64_t)m * rowbytes;
    b += scale_prefix(&l);
  }
  return b;
}

/* ---- ranks as threads ---- */

typedef enum op { OP_GATHER, OP_QCOMM, OP_GATHER_Q } op;

typedef struct rank_arg {
  int rank;
  bc_comm *comm;
  const gcase *c;
  const int64_t *rows;
  bc_tensor x;
  bc_qtensor q;
  bc_qtensor xq;         /* OP_GATHER_Q: x quantized by bc_quantize_comm, then gathered */
  cudaStream_t st;
  int hold_ms;           /* a host function holding the stream first */
  bc_status status;
  char err[1024];
  uint64_t bytes;
  double call_ms;
  int busy_after;        /* the stream was still busy when the call returned */
  op what;
} rank_arg;

static void CUDART_CB sleeper(void *ms) { usleep((useconds_t)(uintptr_t)ms * 1000); }

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *rank_main(void *p) {
  rank_arg *a = p;
  cudaSetDevice(0);
  bc_comm_info i0, i1;
  if (a->what == OP_GATHER_Q) {
    a->status = bc_quantize_comm(ctx, a->comm, &a->x, &a->xq, a->st);
    if (a->status != BC_OK) {
      snprintf(a->err, sizeof a->err, "bc_quantize_comm: %s", bc_last_error(ctx));
      CK(cudaStreamSynchronize(a->st));
      return NULL;
    }
  }
  bc_comm_get_info(ctx, a->comm, &i0);
  if (a->hold_ms) CK(cudaLaunchHostFunc(a->st, sleeper, (void *)(uintptr_t)a->hold_ms));
  double t0 = now_ms();
  a->status = a->what == OP_GATHER ? bc_all_gather(ctx, a->comm, &a->x, a->rows, &a->q, a->st)
              : a->what == OP_GATHER_Q ? bc_all_gather_quantized(ctx, a->comm, &a->xq, a->rows, &a->q, a->st)
                                       : bc_quantize_comm(ctx, a->comm, &a->x, &a->q, a->st);
  a->call_ms = now_ms() - t0;
  a->busy_after = cudaStreamQuery(a->st) == cudaErrorNotReady;
  snprintf(a->err, sizeof a->err, "%s", a->status == BC_OK ? "" : bc_last_error(ctx));
  bc_comm_get_info(ctx, a->comm, &i1);
  a->bytes = i1.bytes_sent - i0.bytes_sent;
  CK(cudaStreamSynchronize(a->st));
  return NULL;
}

static void run_ranks(rank_arg *a, int W) {
  pthread_t th[64];
  for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, rank_main, &a[r]);
  for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
}

/* per-rank inputs: rank r's rows of the whole tensor, copied with row stride K + ld_pad */
static void rank_inputs(const gcase *c, const void *d_full, void **xs, bc_tensor *x) {
  size_t es = bc_dtype_size(c->dt);
  int64_t r0 = 0;
  for (int r = 0; r < c->W; r++) {
    int64_t m = c->rows[r], ld = c->K + c->ld_pad;
    xs[r] = NULL;
    x[r] = (bc_tensor){ NULL, c->dt, m, c->K, ld };
    if (m) {
      xs[r] = dmalloc((size_t)(m * ld) * es);
      CK(cudaMemcpy2D(xs[r], (size_t)ld * es, (const char *)d_full + (size_t)(r0 * c->K) * es, (size_t)c->K * es, (size_t)c->K * es,
                      (size_t)m, cudaMemcpyDeviceToDevice));
      x[r].data = xs[r];
    }
    r0 += m;
  }
}

static void *full_input(const gcase *c) {
  size_t n = (size_t)(c->M * c->K), es = bc_dtype_size(c->dt);
  void *h = malloc(n * es);
  fill(h, c->dt, n, 0);
  void *d = dmalloc(n * es);
  CK(cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

/* one all-gather case over comms (local or NCCL); returns 1 when every rank is exact */
/* rank r's rows quantized on their own: the directions the gather takes from them, and the
 * rowwise one (what the exact path dequantizes when blocks straddle ranks); a rank with an odd
 * number of rows has no 4-bit columnwise data of its own */
static void xq_alloc(const gcase *c, int64_t m, buf4 *b) {
  gcase l = *c;
  l.M = m;
  l.dirs = c->info.block == BC_BLOCK_1D ? (c->dirs | 1) : 1;
  if (c->info.element_bits == 4 && m % 2) l.dirs = 1;
  memset(b, 0, sizeof *b);
  if (m) buf_alloc(&l, b, 0xA5);
  else {
    b->amax = dmalloc(4);
    b->scale = dmalloc(4);
  }
}

static int gather_case_q(gcase *c, bc_comm **comms, int hold_ms, const char *tag, int quant_in);
static int gather_case(gcase *c, bc_comm **comms, int hold_ms, const char *tag) { return gather_case_q(c, comms, hold_ms, tag, 0); }

static int gather_case_q(gcase *c, bc_comm **comms, int hold_ms, const char *tag, int quant_in) {
  c->M = 0;
  for (int r = 0; r < c->W; r++) c->M += c->rows[r];
  void *d_full = full_input(c);
  buf4 ref;
  buf_alloc(c, &ref, 0x5A);
  bc_tensor xf = { d_full, c->dt, c->M, c->K, 0 };
  bc_qtensor qr = qt_of(c, &ref);
  int good = 1;
  if (bc_quantize(ctx, &xf, &qr, NULL) != BC_OK) {
    diag("  reference quantize: %s", bc_last_error(ctx));
    good = 0;
  }
  void *xs[64];
  bc_tensor x[64];
  rank_inputs(c, d_full, xs, x);
  buf4 out[64], xqb[64];
  rank_arg a[64];
  for (int r = 0; r < c->W; r++) {
    buf_alloc(c, &out[r], 0xA5);
    memset(&a[r], 0, sizeof a[r]);
    a[r] = (rank_arg){ .rank = r, .comm = comms[r], .c = c, .rows = c->rows, .x = x[r], .q = qt_of(c, &out[r]), .hold_ms = hold_ms,
                       .what = quant_in ? OP_GATHER_Q : OP_GATHER };
    if (quant_in) {
      xq_alloc(c, c->rows[r], &xqb[r]);
      a[r].xq = (bc_qtensor){ c->f, c->rows[r], c->K, xqb[r].rd, xqb[r].rs, xqb[r].cd, xqb[r].cs, xqb[r].amax, xqb[r].scale, c->swz, 0, 0, 0 };
      if (quant_in == 2 && !straddles(c)) {
        /* xq's words are out's: bc_quantize_comm writes them there and the gather copies none */
        a[r].xq.amax = out[r].amax, a[r].xq.scale = out[r].scale;
        if (c->info.block == BC_BLOCK_TENSOR && a[r].xq.rowwise_data) /* the word of a direction out has */
          a[r].xq.rowwise_scale_inv = out[r].rs ? out[r].rs : out[r].cs;
      }
    }
    CK(cudaStreamCreateWithFlags(&a[r].st, cudaStreamNonBlocking));
  }
  CK(cudaDeviceSynchronize());
  run_ranks(a, c->W);
  CK(cudaDeviceSynchronize());
  if (quant_in && straddles(c) && good) {
    /* the fallback's result: the quantization of the ranks' dequantized rowwise data */
    float *dq = dmalloc((size_t)(c->M * c->K) * 4);
    int64_t r0 = 0;
    for (int r = 0; r < c->W; r++) {
      if (c->rows[r]) {
        bc_tensor o = { dq + r0 * c->K, BC_FP32, c->rows[r], c->K, 0 };
        if (a[r].status != BC_OK || bc_dequantize(ctx, &a[r].xq, BC_ROWWISE, &o, NULL) != BC_OK) {
          diag("  rank %d: dequantize: %s", r, a[r].status != BC_OK ? a[r].err : bc_last_error(ctx));
          good = 0;
        }
      }
      r0 += c->rows[r];
    }
    bc_tensor xd = { dq, BC_FP32, c->M, c->K, 0 };
    if (good && bc_quantize(ctx, &xd, &qr, NULL) != BC_OK) {
      diag("  reference quantize of the dequantized values: %s", bc_last_error(ctx));
      good = 0;
    }
    CK(cudaDeviceSynchronize());
    cudaFree(dq);
  }
  for (int r = 0; r < c->W && good; r++) {
    if (a[r].status != BC_OK) {
      diag("  rank %d: %s: %s", r, bc_status_string(a[r].status), a[r].err);
      good = 0;
      break;
    }
    good &= same_bufs(c, &out[r], &ref, r);
    uint64_t want = expected_bytes(c, r, quant_in), api = 0;
    if (a[r].bytes != want) {
      diag("  rank %d sent %llu bytes; the formula says %llu", r, (unsigned long long)a[r].bytes, (unsigned long long)want);
      good = 0;
    }
    if (!quant_in && (bc_all_gather_bytes(ctx, c->f, c->W, c->rows, c->K, c->dirs, r, &api) != BC_OK || api != want)) {
      diag("  rank %d: bc_all_gather_bytes says %llu, the formula %llu (%s)", r, (unsigned long long)api, (unsigned long long)want,
           bc_last_error(ctx));
      good = 0;
    }
    if (hold_ms && (!a[r].busy_after || a[r].call_ms > hold_ms / 2)) {
      diag("  rank %d: the call took %.1f ms and the held stream was %s after it (expected a prompt return, stream busy)", r,
           a[r].call_ms, a[r].busy_after ? "busy" : "idle");
      good = 0;
    }
  }
  char rs[256] = "";
  for (int r = 0, n = 0; r < c->W && n < 200; r++) n += snprintf(rs + n, sizeof rs - (size_t)n, "%s%lld", r ? "," : "", (long long)c->rows[r]);
  const char *dn[] = { "", "row", "col", "rowcol" };
  ok(good, "%s %s %s W=%d rows [%s] x %lld %s%s%s %s%s%s", quant_in ? (straddles(c) ? "all_gather_quantized (dequantized, exact)" :
     quant_in == 2 ? "all_gather_quantized (xq's amax / scale words out's)" : "all_gather_quantized" ) : "all_gather", c->info.name, bc_dtype_name(c->dt), c->W, rs, (long long)c->K,
     dn[c->dirs], c->swz ? " swizzled" : "", c->ld_pad ? " strided" : "", c->split, tag ? " " : "", tag ? tag : "");
  for (int r = 0; r < c->W; r++) {
    if (quant_in) buf_free(&xqb[r]);
    buf_free(&out[r]);
    if (xs[r]) cudaFree(xs[r]);
    cudaStreamDestroy(a[r].st);
  }
  buf_free(&ref);
  cudaFree(d_full);
  return good;
}

static uint64_t srng = 0x1234567ull;
static int64_t urand(int64_t lo, int64_t hi) {
  srng ^= srng << 13; srng ^= srng >> 7; srng ^= srng << 17;
  return lo + (int64_t)(srng % (uint64_t)(hi - lo + 1));
}

/* a split of kind k for W ranks; 4-bit columnwise data needs an even total */
static const char *make_split(gcase *c, int k) {
  int W = c->W;
  switch (k) {
  case 0: for (int r = 0; r < W; r++) c->rows[r] = 128; return "equal whole blocks";
  case 1: for (int r = 0; r < W; r++) c->rows[r] = 40; return "equal cutting blocks";
  case 2:
    for (int r = 0; r < W; r++) c->rows[r] = urand(1, 300);
    c->rows[W - 1] = urand(1, 20);
    break;
  case 3:
    for (int r = 0; r < W; r++) c->rows[r] = 70 + 2 * r;
    c->rows[urand(0, W - 1)] = 0;
    break;
  case 4:
    for (int r = 0; r < W; r++) c->rows[r] = 2 * urand(5, 40) + 1;
    break;
  default: /* whole 128-row bands, unequal, one rank empty: the block scales gathered in place */
    for (int r = 0; r < W; r++) c->rows[r] = 128 * (1 + r % 2);
    c->rows[urand(0, W - 1)] = 0;
    break;
  }
  int64_t M = 0;
  for (int r = 0; r < W; r++) M += c->rows[r];
  if (M % 2) c->rows[W - 1] += c->rows[W - 1] > 1 ? -1 : 1;
  const char *names[] = { "", "", "unequal", "a rank with 0 rows", "odd rows", "128-row bands, a rank with 0 rows" };
  return names[k];
}

static void gather_matrix(void) {
  size_t nf = bc_format_count(ctx);
  const int Ws[] = { 2, 3, 4, 8 };
  const int64_t Ks[] = { 160, 256, 96 };
  int ci = 0;
  for (size_t fi = 0; fi < nf; fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (!comm_takes(&info)) continue; /* refused, named: 19-comm-args */
    for (int w = 0; w < 4; w++) {
      bc_comm *comms[8];
      if (bc_comm_create_local(ctx, Ws[w], comms) != BC_OK) {
        ok(0, "bc_comm_create_local %d: %s", Ws[w], bc_last_error(ctx));
        continue;
      }
      for (int dirs = 1; dirs <= 3; dirs++) {
        if (((dirs & 1) && !info.has_rowwise) || ((dirs & 2) && !info.has_columnwise)) continue;
        for (int k = 0; k < 6; k++, ci++) {
          gcase c;
          memset(&c, 0, sizeof c);
          c.f = f;
          c.info = info;
          c.W = Ws[w];
          c.dt = (bc_dtype)(ci % 3);
          c.K = Ks[ci % 3];
          c.dirs = dirs;
          c.swz = info.block != BC_BLOCK_TENSOR && (ci % 2);
          c.ld_pad = (ci % 4 == 1) ? 8 : 0;
          c.split = make_split(&c, k);
          if (!c.split[0]) c.split = k == 0 ? "equal whole blocks" : "equal cutting blocks";
          gather_case(&c, comms, 0, NULL);
          gather_case_q(&c, comms, 0, NULL, 1 + ((ci >> 1) & 1)); /* 2: xq's amax / scale words are out's */
        }
      }
      for (int r = 0; r < Ws[w]; r++) bc_comm_destroy(comms[r]);
    }
  }
}

/* acceptance 3: one format, a group of 4 and two groups of 2 of the same 4 threads, alternately */
typedef struct groups_arg {
  int rank;
  bc_comm *c4, *c2;
  const bc_format *f;
  const bc_tensor *x4, *x2; /* this rank's rows of each gather */
  const int64_t *rows4, *rows2;
  bc_qtensor q4[2], q2[2];
  cudaStream_t st;
  bc_status s;
  char err[512];
} groups_arg;

static void *groups_main(void *p) {
  groups_arg *g = p;
  cudaSetDevice(0);
  g->s = BC_OK;
  for (int it = 0; it < 2 && g->s == BC_OK; it++) {
    g->s = bc_all_gather(ctx, g->c4, g->x4, g->rows4, &g->q4[it], g->st);
    if (g->s == BC_OK) g->s = bc_all_gather(ctx, g->c2, g->x2, g->rows2, &g->q2[it], g->st);
  }
  if (g->s != BC_OK) snprintf(g->err, sizeof g->err, "%s", bc_last_error(ctx));
  CK(cudaStreamSynchronize(g->st));
  return NULL;
}

static void two_groups(const char *fname) {
  const bc_format *f;
  bc_format_get(ctx, fname, &f);
  bc_comm *c4[4], *c2a[2], *c2b[2];
  bc_comm_create_local(ctx, 4, c4);
  bc_comm_create_local(ctx, 2, c2a);
  bc_comm_create_local(ctx, 2, c2b);
  gcase g4 = { .f = f, .dt = BC_BF16, .K = 192, .W = 4, .rows = { 50, 70, 30, 90 }, .dirs = 3, .split = "" };
  bc_format_get_info(ctx, f, &g4.info);
  g4.M = 240;
  /* the pairs gather different tensors (different amaxes: a leak would show) */
  gcase g2[2] = { g4, g4 };
  g2[0].W = g2[1].W = 2;
  g2[0].rows[0] = 33; g2[0].rows[1] = 47; g2[0].M = 80;
  g2[1].rows[0] = 64; g2[1].rows[1] = 16; g2[1].M = 80;
  void *d4 = full_input(&g4), *d2[2] = { full_input(&g2[0]), full_input(&g2[1]) };
  /* scale the second pair's tensor down: its amax differs from the group of 4's */
  buf4 r4, r2[2], o4[4][2], o2[4][2];
  buf_alloc(&g4, &r4, 0x5A);
  bc_tensor xf = { d4, g4.dt, g4.M, g4.K, 0 };
  bc_qtensor q = qt_of(&g4, &r4);
  bc_quantize(ctx, &xf, &q, NULL);
  for (int p = 0; p < 2; p++) {
    buf_alloc(&g2[p], &r2[p], 0x5A);
    bc_tensor x2 = { d2[p], g2[p].dt, g2[p].M, g2[p].K, 0 };
    bc_qtensor q2 = qt_of(&g2[p], &r2[p]);
    bc_quantize(ctx, &x2, &q2, NULL);
  }
  void *xs4[64], *xs2[2][64];
  bc_tensor x4[64], x2[2][64];
  rank_inputs(&g4, d4, xs4, x4);
  rank_inputs(&g2[0], d2[0], xs2[0], x2[0]);
  rank_inputs(&g2[1], d2[1], xs2[1], x2[1]);
  groups_arg ga[4];
  pthread_t th[4];
  for (int r = 0; r < 4; r++) {
    int p = r / 2;
    memset(&ga[r], 0, sizeof ga[r]);
    ga[r].rank = r;
    ga[r].c4 = c4[r];
    ga[r].c2 = p ? c2b[r % 2] : c2a[r % 2];
    ga[r].x4 = &x4[r];
    ga[r].x2 = &x2[p][r % 2];
    ga[r].rows4 = g4.rows;
    ga[r].rows2 = g2[p].rows;
    for (int it = 0; it < 2; it++) {
      buf_alloc(&g4, &o4[r][it], 0xA5);
      buf_alloc(&g2[p], &o2[r][it], 0xA5);
      ga[r].q4[it] = qt_of(&g4, &o4[r][it]);
      ga[r].q2[it] = qt_of(&g2[p], &o2[r][it]);
    }
    CK(cudaStreamCreateWithFlags(&ga[r].st, cudaStreamNonBlocking));
  }
  CK(cudaDeviceSynchronize());
  for (int r = 0; r < 4; r++) pthread_create(&th[r], NULL, groups_main, &ga[r]);
  for (int r = 0; r < 4; r++) pthread_join(th[r], NULL);
  CK(cudaDeviceSynchronize());
  int good = 1;
  for (int r = 0; r < 4; r++) {
    if (ga[r].s != BC_OK) {
      diag("  rank %d: %s", r, ga[r].err);
      good = 0;
      continue;
    }
    for (int it = 0; it < 2; it++) {
      good &= same_bufs(&g4, &o4[r][it], &r4, r);
      good &= same_bufs(&g2[r / 2], &o2[r][it], &r2[r / 2], r);
    }
  }
  ok(good, "%s: the same format gathered alternately over a group of 4 and two groups of 2 of the same threads: each result is "
     "its own group's", fname);
  for (int r = 0; r < 4; r++) {
    bc_comm_destroy(c4[r]);
    for (int it = 0; it < 2; it++) { buf_free(&o4[r][it]); buf_free(&o2[r][it]); }
    cudaStreamDestroy(ga[r].st);
    if (xs4[r]) cudaFree(xs4[r]);
  }
  for (int r = 0; r < 2; r++) {
    bc_comm_destroy(c2a[r]);
    bc_comm_destroy(c2b[r]);
    for (int p = 0; p < 2; p++) if (xs2[p][r]) cudaFree(xs2[p][r]);
  }
  buf_free(&r4);
  buf_free(&r2[0]);
  buf_free(&r2[1]);
  cudaFree(d4); cudaFree(d2[0]); cudaFree(d2[1]);
}

/* bc_quantize_comm: each rank's own tensor, quantized with the group's amax */
static void quantize_comm_case(const char *fname, int W) {
  const bc_format *f;
  bc_format_get(ctx, fname, &f);
  bc_comm *comms[8];
  bc_comm_create_local(ctx, W, comms);
  gcase c = { .f = f, .dt = BC_FP32, .K = 128, .W = W, .dirs = 3, .split = "" };
  bc_format_get_info(ctx, f, &c.info);
  if (!c.info.has_columnwise) c.dirs = 1;
  rank_arg a[8];
  buf4 out[8], ref[8];
  void *din[8];
  float group = 0;
  for (int r = 0; r < W; r++) {
    gcase cr = c;
    cr.M = 16 + 16 * r;
    size_t n = (size_t)(cr.M * cr.K);
    float *h = malloc(n * 4);
    fill(h, BC_FP32, n, 0);
    for (size_t i = 0; i < n; i++) h[i] *= (float)(r + 1); /* each rank its own amax */
    din[r] = dmalloc(n * 4);
    CK(cudaMemcpy(din[r], h, n * 4, cudaMemcpyHostToDevice));
    float am;
    bc_tensor hx = { h, BC_FP32, cr.M, cr.K, 0 };
    bc_ref_amax(ctx, &hx, &am);
    if (am > group) group = am;
    free(h);
    buf_alloc(&cr, &out[r], 0xA5);
    buf_alloc(&cr, &ref[r], 0x5A);
    a[r] = (rank_arg){ .rank = r, .comm = comms[r], .c = &c, .x = { din[r], BC_FP32, cr.M, cr.K, 0 }, .q = qt_of(&cr, &out[r]),
                       .what = OP_QCOMM };
    CK(cudaStreamCreateWithFlags(&a[r].st, cudaStreamNonBlocking));
  }
  int good = 1;
  for (int r = 0; r < W; r++) {
    /* the reference: the group's amax given, then the cast */
    gcase cr = c;
    cr.M = 16 + 16 * r;
    bc_qtensor qr = qt_of(&cr, &ref[r]);
    CK(cudaMemcpy(qr.amax, &group, 4, cudaMemcpyHostToDevice));
    if (c.info.block == BC_BLOCK_TENSOR) bc_compute_scale(ctx, f, qr.amax, qr.scale, NULL, NULL);
    if (bc_quantize_cast(ctx, &a[r].x, &qr, NULL) != BC_OK) { diag("  reference: %s", bc_last_error(ctx)); good = 0; }
  }
  CK(cudaDeviceSynchronize());
  run_ranks(a, W);
  for (int r = 0; r < W; r++) {
    gcase cr = c;
    cr.M = 16 + 16 * r;
    if (a[r].status != BC_OK) { diag("  rank %d: %s", r, a[r].err); good = 0; continue; }
    good &= same_bufs(&cr, &out[r], &ref[r], r);
    good &= a[r].bytes == ((c.info.block == BC_BLOCK_TENSOR || c.info.two_level) ? 4u : 0u);
  }
  ok(good, "bc_quantize_comm %s W=%d: each rank's tensor cast with the group's amax (4 bytes sent where the amax is reduced)", fname, W);
  for (int r = 0; r < W; r++) {
    buf_free(&out[r]); buf_free(&ref[r]); cudaFree(din[r]); cudaStreamDestroy(a[r].st); bc_comm_destroy(comms[r]);
  }
}

/* bc_quantize_list_comm and bc_amax_allreduce: a mixed list on each of W ranks */
typedef struct list_arg {
  int rank, n;
  bc_comm *comm;
  bc_tensor *x;
  bc_qtensor *q;
  float *amaxes; /* device [3]: for bc_amax_allreduce */
  cudaStream_t st;
  bc_status s;
  char err[512];
} list_arg;

static void *list_main(void *p) {
  list_arg *l = p;
  cudaSetDevice(0);
  l->s = bc_quantize_list_comm(ctx, l->comm, l->n, l->x, l->q, l->st);
  if (l->s == BC_OK) l->s = bc_amax_allreduce(ctx, l->comm, l->amaxes, 3, l->st);
  if (l->s != BC_OK) snprintf(l->err, sizeof l->err, "%s", bc_last_error(ctx));
  CK(cudaStreamSynchronize(l->st));
  return NULL;
}

static void list_comm_case(int W) {
  const char *names[] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "fp8_e5m2_tensor", "fp8_block_128x128", "nvfp4" };
  enum { N = 6 };
  bc_comm *comms[8];
  bc_comm_create_local(ctx, W, comms);
  list_arg la[8];
  buf4 out[8][N], ref[8][N];
  gcase cs[8][N];
  void *din[8][N];
  float group[N] = { 0 };
  float *dam[8];
  float ham[8][3], want_am[3] = { 0 };
  for (int r = 0; r < W; r++) {
    la[r] = (list_arg){ .rank = r, .n = N, .comm = comms[r] };
    la[r].x = calloc(N, sizeof(bc_tensor));
    la[r].q = calloc(N, sizeof(bc_qtensor));
    for (int i = 0; i < N; i++) {
      gcase *c = &cs[r][i];
      memset(c, 0, sizeof *c);
      bc_format_get(ctx, names[i], &c->f);
      bc_format_get_info(ctx, c->f, &c->info);
      c->dt = (bc_dtype)((r + i) % 3);
      c->M = (i == 5 && r == 1) ? 0 : 32 * (1 + (r + i) % 3);
      c->K = 64;
      c->dirs = 1;
      size_t n = (size_t)(c->M * c->K), es = bc_dtype_size(c->dt);
      void *h = malloc(n * es + 1);
      fill(h, c->dt, n, 0);
      din[r][i] = dmalloc(n * es);
      if (n) CK(cudaMemcpy(din[r][i], h, n * es, cudaMemcpyHostToDevice));
      if (n) {
        float am;
        bc_tensor hx = { h, c->dt, c->M, c->K, 0 };
        bc_ref_amax(ctx, &hx, &am);
        if (am > group[i]) group[i] = am;
      }
      free(h);
      if (c->M) {
        buf_alloc(c, &out[r][i], 0xA5);
        buf_alloc(c, &ref[r][i], 0x5A);
        la[r].q[i] = qt_of(c, &out[r][i]);
      } else {
        memset(&out[r][i], 0, sizeof out[r][i]);
        memset(&ref[r][i], 0, sizeof ref[r][i]);
        la[r].q[i] = (bc_qtensor){ c->f, 0, c->K, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0 };
        out[r][i].amax = dmalloc(4);
        la[r].q[i].amax = out[r][i].amax;
      }
      la[r].x[i] = (bc_tensor){ din[r][i], c->dt, c->M, c->K, 0 };
    }
    dam[r] = dmalloc(12);
    for (int j = 0; j < 3; j++) {
      ham[r][j] = (float)((r * 7 + j * 3) % 11);
      if (ham[r][j] > want_am[j]) want_am[j] = ham[r][j];
    }
    CK(cudaMemcpy(dam[r], ham[r], 12, cudaMemcpyHostToDevice));
    la[r].amaxes = dam[r];
    CK(cudaStreamCreateWithFlags(&la[r].st, cudaStreamNonBlocking));
  }
  int good = 1;
  for (int r = 0; r < W; r++)
    for (int i = 0; i < N; i++) {
      gcase *c = &cs[r][i];
      if (!c->M) continue;
      bc_qtensor qr = qt_of(c, &ref[r][i]);
      CK(cudaMemcpy(qr.amax, &group[i], 4, cudaMemcpyHostToDevice));
      if (c->info.block == BC_BLOCK_TENSOR) bc_compute_scale(ctx, c->f, qr.amax, qr.scale, NULL, NULL);
      if (bc_quantize_cast(ctx, &la[r].x[i], &qr, NULL) != BC_OK) { diag("  reference: %s", bc_last_error(ctx)); good = 0; }
    }
  CK(cudaDeviceSynchronize());
  bc_comm_info i0;
  bc_comm_get_info(ctx, comms[0], &i0);
  pthread_t th[8];
  for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, list_main, &la[r]);
  for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
  CK(cudaDeviceSynchronize());
  bc_comm_info i1;
  bc_comm_get_info(ctx, comms[0], &i1);
  for (int r = 0; r < W; r++) {
    if (la[r].s != BC_OK) { diag("  rank %d: %s", r, la[r].err); good = 0; continue; }
    for (int i = 0; i < N; i++)
      if (cs[r][i].M) good &= same_bufs(&cs[r][i], &out[r][i], &ref[r][i], r);
    float got[3];
    CK(cudaMemcpy(got, dam[r], 12, cudaMemcpyDeviceToHost));
    good &= first_diff_report("bc_amax_allreduce", got, want_am, 12);
  }
  /* one all-reduce of 4 amaxes (the per-tensor and NVFP4 entries) + one of 3 */
  good &= i1.collectives - i0.collectives == 2 && i1.bytes_sent - i0.bytes_sent == 4 * 4 + 3 * 4;
  if (i1.collectives - i0.collectives != 2) diag("  collectives: %llu", (unsigned long long)(i1.collectives - i0.collectives));
  ok(good, "bc_quantize_list_comm W=%d (6 tensors, 4 amaxes reduced in one all-reduce, an empty entry) and bc_amax_allreduce", W);
  for (int r = 0; r < W; r++) {
    for (int i = 0; i < N; i++) { buf_free(&out[r][i]); buf_free(&ref[r][i]); cudaFree(din[r][i]); }
    free(la[r].x); free(la[r].q); cudaFree(dam[r]); cudaStreamDestroy(la[r].st); bc_comm_destroy(comms[r]);
  }
}

/* disagreeing arguments and a rank failing its checks: every rank fails, none waits */
typedef struct bad_arg {
  bc_comm *comm;
  bc_tensor x;
  int64_t rows[2];
  bc_qtensor q;
  bc_status s;
  char err[1024];
} bad_arg;

static int bad_quantize_comm; /* bad_main calls bc_quantize_comm instead of bc_all_gather */

static void *bad_main(void *p) {
  bad_arg *b = p;
  cudaSetDevice(0);
  b->s = bad_quantize_comm ? bc_quantize_comm(ctx, b->comm, &b->x, &b->q, NULL) : bc_all_gather(ctx, b->comm, &b->x, b->rows, &b->q, NULL);
  snprintf(b->err, sizeof b->err, "%s", b->s == BC_OK ? "" : bc_last_error(ctx));
  return NULL;
}

static void bad_calls(void) {
  const bc_format *f;
  bc_format_get(ctx, "mxfp8_e4m3", &f);
  for (int variant = 0; variant < 3; variant++) {
    bad_quantize_comm = variant == 2;
    bc_comm *comms[2];
    bc_comm_create_local(ctx, 2, comms);
    gcase c = { .f = f, .dt = BC_BF16, .K = 64, .W = 2, .rows = { 32, 32 }, .M = 64, .dirs = 1 };
    bc_format_get_info(ctx, f, &c.info);
    buf4 o[2];
    void *d = full_input(&c);
    bad_arg b[2];
    for (int r = 0; r < 2; r++) {
      buf_alloc(&c, &o[r], 0xA5);
      b[r] = (bad_arg){ .comm = comms[r], .x = { (char *)d + r * 32 * 64 * 2, BC_BF16, 32, 64, 0 }, .rows = { 32, 32 }, .q = qt_of(&c, &o[r]) };
    }
    if (variant == 0) {
      b[1].q.scale_swizzled = 1; /* disagrees with rank 0 */
    } else if (variant == 1) {
      b[1].q.rowwise_scale_inv = NULL; /* fails rank 1's own checks */
    } else {
      /* bc_quantize_comm of a format that communicates nothing: rank 1's failed checks still fail both */
      for (int r = 0; r < 2; r++) b[r].q.rows = 32;
      b[1].q.rowwise_scale_inv = NULL;
    }
    pthread_t th[2];
    double t0 = now_ms();
    for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, bad_main, &b[r]);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    double ms = now_ms() - t0;
    if (variant == 0) {
      ok(b[0].s == BC_ERR_ARG && b[1].s == BC_ERR_ARG && strstr(b[0].err, "swizzled=0") && strstr(b[0].err, "swizzled=1") && ms < 10000,
         "arguments that disagree across ranks (scale_swizzled): both ranks fail naming both calls (%.1f ms): %s", ms, b[0].err);
    } else {
      ok(b[1].s == BC_ERR_ARG && strstr(b[1].err, "rowwise_scale_inv") && b[0].s == BC_ERR_ARG && strstr(b[0].err, "rank 1 failed") &&
         ms < 10000, "%s: a rank failing its own checks: it says why (%s), the other fails naming it (%s)",
         variant == 2 ? "bc_quantize_comm (mxfp8)" : "bc_all_gather", b[1].err, b[0].err);
    }
    for (int r = 0; r < 2; r++) { buf_free(&o[r]); bc_comm_destroy(comms[r]); }
    cudaFree(d);
  }
}

/* real NCCL, one rank: the same calls, the same bytes as the local transport with one rank */
static void nccl_one_rank(void) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/blockcast-test-id-%d", (int)getpid());
  unlink(path);
  bc_comm *nc = NULL;
  bc_status s = bc_comm_bootstrap(ctx, path, 1, 0, 10.0, &nc);
  unlink(path);
  if (s == BC_ERR_UNAVAILABLE) {
    diag("NCCL not available: %s", bc_last_error(ctx));
    ok(1, "# SKIP NCCL not available");
    return;
  }
  if (!ok(s == BC_OK, "bc_comm_bootstrap through a file, 1 rank: %s", s == BC_OK ? "ok" : bc_last_error(ctx))) return;
  bc_comm_info info;
  bc_comm_get_info(ctx, nc, &info);
  ok(info.transport == BC_TRANSPORT_NCCL && info.size == 1 && info.rank == 0, "NCCL communicator: rank 0 of 1");
  const char *names[] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4", "fp8_block_128x128", "mxfp4" };
  for (int i = 0; i < 5; i++) {
    gcase c = { .dt = BC_BF16, .K = 256, .W = 1, .rows = { 200 }, .dirs = 3, .split = "NCCL" };
    bc_format_get(ctx, names[i], &c.f);
    bc_format_get_info(ctx, c.f, &c.info);
    gather_case(&c, &nc, i == 0 ? 300 : 0, i == 0 ? "(NCCL, stream held 300 ms: no host sync)" : "(NCCL)");
  }
  /* the agreement check over NCCL (BLOCKCAST_COMM_CHECK=1 at creation): a signature all-gather */
  setenv("BLOCKCAST_COMM_CHECK", "1", 1);
  bc_comm *nc2 = NULL;
  unlink(path);
  s = bc_comm_bootstrap(ctx, path, 1, 0, 10.0, &nc2);
  unlink(path);
  unsetenv("BLOCKCAST_COMM_CHECK");
  if (ok(s == BC_OK, "an NCCL communicator with BLOCKCAST_COMM_CHECK=1: %s", s == BC_OK ? "ok" : bc_last_error(ctx))) {
    gcase c2 = { .dt = BC_FP16, .K = 128, .W = 1, .rows = { 77 }, .dirs = 3, .split = "NCCL, checked" };
    bc_format_get(ctx, "mxfp8_e4m3", &c2.f);
    bc_format_get_info(ctx, c2.f, &c2.info);
    gather_case(&c2, &nc2, 0, "(NCCL with the agreement check)");
    bc_comm_destroy(nc2);
  }
  /* BLOCKCAST_GATHER=sendrecv: the rank's own piece, when not in place (a quantized input's own
   * buffer), goes through ncclSend / ncclRecv to itself; a value it does not know fails the
   * creation, naming the variable and the values */
  setenv("BLOCKCAST_GATHER", "sendrecv", 1);
  bc_comm *nc3 = NULL;
  unlink(path);
  s = bc_comm_bootstrap(ctx, path, 1, 0, 10.0, &nc3);
  unlink(path);
  if (ok(s == BC_OK, "an NCCL communicator with BLOCKCAST_GATHER=sendrecv: %s", s == BC_OK ? "ok" : bc_last_error(ctx))) {
    const char *sr[] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4" };
    for (int i = 0; i < 3; i++) {
      gcase c3 = { .dt = BC_BF16, .K = 256, .W = 1, .rows = { 128 }, .dirs = 1, .split = "NCCL, sendrecv" };
      bc_format_get(ctx, sr[i], &c3.f);
      bc_format_get_info(ctx, c3.f, &c3.info);
      gather_case(&c3, &nc3, 0, "(NCCL, BLOCKCAST_GATHER=sendrecv)");
      gather_case_q(&c3, &nc3, 0, "(NCCL, BLOCKCAST_GATHER=sendrecv: the own piece sent to itself)", 1);
    }
    bc_comm_destroy(nc3);
  }
  setenv("BLOCKCAST_GATHER", "ring", 1);
  nc3 = NULL;
  unlink(path);
  s = bc_comm_bootstrap(ctx, path, 1, 0, 10.0, &nc3);
  unlink(path);
  unsetenv("BLOCKCAST_GATHER");
  ok(s == BC_ERR_ARG && nc3 == NULL && strstr(bc_last_error(ctx), "BLOCKCAST_GATHER is 'ring'") &&
     strstr(bc_last_error(ctx), "collective") && strstr(bc_last_error(ctx), "sendrecv"),
     "BLOCKCAST_GATHER=ring: bc_comm_bootstrap fails naming it and the values: %s", bc_last_error(ctx));
  bc_comm_destroy(nc3);
  bc_comm *lc[1];
  bc_comm_create_local(ctx, 1, lc);
  gcase c = { .dt = BC_FP32, .K = 64, .W = 1, .rows = { 96 }, .dirs = 3, .split = "local, 1 rank" };
  bc_format_get(ctx, "nvfp4", &c.f);
  bc_format_get_info(ctx, c.f, &c.info);
  gather_case(&c, lc, 0, NULL);
  bc_comm_destroy(lc[0]);
  bc_comm_destroy(nc);
}

int main(void) {
  gpu_init_or_skip();
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
  diag("device: %s", gpu_name());
  bc_set_log(ctx, on_log, NULL);
  gather_matrix();
  ok(log_count == 1 && strstr(log_first, "bc_all_gather_quantized") && strstr(log_first, "dequantized"),
     "the quantized gather's fallback was reported once through the log callback (%d notices): %s", log_count, log_first);
  /* no host synchronization on the local transport: streams held by a host function */
  {
    bc_comm *comms[4];
    bc_comm_create_local(ctx, 4, comms);
    const char *names[] = { "fp8_e4m3_tensor", "nvfp4", "mxfp8_e4m3" };
    for (int i = 0; i < 3; i++) {
      gcase c = { .dt = BC_BF16, .K = 128, .W = 4, .rows = { 40, 40, 40, 40 }, .dirs = 3, .split = "cutting" };
      bc_format_get(ctx, names[i], &c.f);
      bc_format_get_info(ctx, c.f, &c.info);
      gather_case(&c, comms, 300, "(streams held 300 ms: the calls return first)");
    }
    for (int r = 0; r < 4; r++) bc_comm_destroy(comms[r]);
  }
  /* block scales gathered in place skip the placing kernel: with each rank's rows a 128-row
   * band, one launch fewer per rank than the same gather with rows off the bands (both exact) */
  {
    bc_comm *comms[2];
    bc_comm_create_local(ctx, 2, comms);
    gcase band = { .dt = BC_BF16, .K = 256, .W = 2, .rows = { 128, 128 }, .dirs = 1, .split = "128-row bands" };
    bc_format_get(ctx, "mxfp8_e4m3", &band.f);
    bc_format_get_info(ctx, band.f, &band.info);
    gcase off = band;
    off.rows[0] = 130, off.rows[1] = 126, off.split = "rows off the bands";
    bc_stats s0, s1, s2;
    bc_get_stats(ctx, &s0);
    int g1 = gather_case(&band, comms, 0, "(launches counted)");
    bc_get_stats(ctx, &s1);
    int g2 = gather_case(&off, comms, 0, "(launches counted)");
    bc_get_stats(ctx, &s2);
    uint64_t lb = s1.launches - s0.launches, lo = s2.launches - s1.launches;
    ok(g1 && g2 && lo == lb + 2, "mxfp8 rowwise gather on 2 ranks: %llu launches with 128-row bands (scales in place), %llu with "
       "rows 130 + 126 (scales placed: one more per rank)", (unsigned long long)lb, (unsigned long long)lo);
    /* the same for the gather of already quantized rows (each rank's compact slab copied into out) */
    bc_get_stats(ctx, &s0);
    g1 = gather_case_q(&band, comms, 0, "(launches counted)", 1);
    bc_get_stats(ctx, &s1);
    g2 = gather_case_q(&off, comms, 0, "(launches counted)", 1);
    bc_get_stats(ctx, &s2);
    lb = s1.launches - s0.launches, lo = s2.launches - s1.launches;
    ok(g1 && g2 && lo == lb + 2, "mxfp8 rowwise all_gather_quantized on 2 ranks: %llu launches with 128-row bands (scales in "
       "place), %llu with rows 130 + 126 (scales placed: one more per rank)", (unsigned long long)lb, (unsigned long long)lo);
    for (int r = 0; r < 2; r++) bc_comm_destroy(comms[r]);
  }
  two_groups("fp8_e4m3_tensor");
  two_groups("nvfp4");
  two_groups("fp8_block_128x128");
  for (int w = 2; w <= 4; w++) {
    quantize_comm_case("fp8_e4m3_tensor", w);
    quantize_comm_case("nvfp4", w);
    quantize_comm_case("mxfp4", w);
  }
  list_comm_case(3);
  bad_calls();
  nccl_one_rank();
  bc_ctx_destroy(ctx);
  done_testing();
  return tap_failed ? 1 : 0;
}
