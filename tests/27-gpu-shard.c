/* tests/27-gpu-shard.c: bc_shard_cast (the sharded cast of master weights) on one GPU, ranks as
 * threads on the local transport (W in {2, 4, 8}), each with its own stream, its own copy of its
 * shards and its own zeroed output buffers of the whole weights.
 *   - for every format, random lists of weights (ragged shapes, 1-row and 1-column weights, up to
 *     640 x 640) split at random flat offsets (odd offsets, cuts inside blocks and block bands,
 *     empty shards, shards spanning many rows, shards in any rank order), fp32 / bf16 / fp16
 *     masters, rowwise or both directions (1D formats), compact or swizzled scales: the ranks'
 *     data and block-scale buffers summed byte by byte (the documented combine: what ncclSum
 *     over uint8 does) are bit-identical to bc_quantize of the whole weight; every rank's amax,
 *     scale and per-tensor scale_inv equal the whole weight's; delayed scaling (a given scale)
 *     for the per-tensor formats; for per-tensor and 2D formats (cast rowwise), bc_shard_finish
 *     on the combined rowwise buffers (one call for the list) gives the whole weight's columnwise
 *     data and scales; the same call again over buffers of all ones shows who wrote what: every
 *     element's code (a nibble of 4-bit data) written by exactly one rank, whatever the byte
 *     held, and every block scale by one rank (padding: any number of ranks writing zeros);
 *   - the planning branches of a 1D "both" cast (interiors, direct rows, cut rows) pinned by fixed
 *     partitions, each master dtype, compact and swizzled scales;
 *   - the launches of one call are the same for 10 and for 1000 weights (bc_get_stats);
 *   - argument errors name the weight and what would be right (every rank fails, no one waits). */
#include <pthread.h>
#include <string.h>

#include "gpu.h"
#include "testdata.h"

static bc_ctx *ctx;

#define MAXR 8

typedef struct weight {
  const bc_format *f;
  bc_format_info info;
  int64_t R, C;
  int dirs, swz, given;
  int refdirs;                /* the reference's directions: per-tensor and 2D formats also columnwise (bc_shard_finish) */
  bc_dtype dt;
  void *full;                 /* device master, [R, C] */
  bc_qlayout l[2];
  uint8_t *ref[4];            /* rowwise data, scales, columnwise data, scales */
  float *ref_amax, *ref_scale;
  int64_t start[MAXR], len[MAXR];
} weight;

typedef struct rank_arg {
  int rank, n;
  bc_comm *comm;
  cudaStream_t st;
  weight *w;
  void **shard;
  uint8_t *(*out)[4];
  float **amax, **scale;
  bc_status status;
  char err[1024];
} rank_arg;

static uint64_t srng = 0xC0FFEE1234ull;
/* the weights' kind, when set (else random): the launch count's weights (bf16, compact scales) and
 * the direct rows' cases (each dtype, compact and swizzled); current scaling either way */
static struct { int on, swz; bc_dtype dt; } fixed_kind;
static int64_t urand(int64_t lo, int64_t hi) { /* [lo, hi] */
  srng = srng * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (int64_t)((srng >> 33) % (uint64_t)(hi - lo + 1));
}

static size_t bytes_of(const weight *w, int k) {
  const bc_qlayout *l = &w->l[k / 2];
  return k % 2 ? l->scale_bytes : l->data_bytes;
}

static void *rank_main(void *p) {
  rank_arg *a = p;
  cudaSetDevice(0);
  bc_shard *sh = calloc((size_t)a->n, sizeof *sh);
  bc_qtensor *q = calloc((size_t)a->n, sizeof *q);
  for (int i = 0; i < a->n; i++) {
    weight *w = &a->w[i];
    sh[i] = (bc_shard){ a->shard[i], w->dt, w->start[a->rank], w->len[a->rank], w->given };
    q[i] = (bc_qtensor){ w->f, w->R, w->C, a->out[i][0], a->out[i][1], a->out[i][2], a->out[i][3], a->amax[i], a->scale[i], w->swz, 0, 0, 0 };
  }
  a->status = bc_shard_cast(ctx, a->comm, a->n, sh, q, a->st);
  snprintf(a->err, sizeof a->err, "%s", a->status == BC_OK ? "" : bc_last_error(ctx));
  CK(cudaStreamSynchronize(a->st));
  free(sh);
  free(q);
  return NULL;
}

static void run_ranks(rank_arg *a, int W) {
  pthread_t th[MAXR];
  for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, rank_main, &a[r]);
  for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
}

/* a weight of format f: shape, dtype, directions, the reference (bc_quantize of the whole) */
static void weight_make(weight *w, const bc_format *f, int64_t R, int64_t C, int both, int W) {
  memset(w, 0, sizeof *w);
  w->f = f;
  bc_format_get_info(ctx, f, &w->info);
  const int b4 = w->info.element_bits == 4;
  if (b4 && C % 2) C++;
  const int one_d = w->info.block == BC_BLOCK_1D;
  w->dirs = both && one_d ? 3 : 1;
  const int want_col = (w->dirs & 2) || (!one_d && w->info.has_columnwise); /* cast, or built by bc_shard_finish */
  if (b4 && want_col && w->info.columnwise_transposed && R % 2) R++;
  w->R = R, w->C = C;
  w->swz = w->info.block != BC_BLOCK_TENSOR && urand(0, 2) == 0;
  const bc_dtype dts[3] = { BC_FP32, BC_BF16, BC_FP16 };
  w->dt = dts[urand(0, 2)];
  w->given = w->info.block == BC_BLOCK_TENSOR && urand(0, 2) == 0;
  if (fixed_kind.on) w->swz = fixed_kind.swz, w->dt = fixed_kind.dt, w->given = 0;
  size_t n = (size_t)(R * C), es = bc_dtype_size(w->dt);
  void *h = malloc(n * es);
  fill(h, w->dt, n, 0);
  w->full = dmalloc(n * es);
  CK(cudaMemcpy(w->full, h, n * es, cudaMemcpyHostToDevice));
  free(h);
  w->refdirs = w->dirs | (!one_d && w->info.has_columnwise ? 2 : 0);
  for (int d = 0; d < 2; d++) {
    if (!(w->refdirs & (1 << d))) continue;
    bc_qtensor_layout(ctx, f, R, C, d ? BC_COLUMNWISE : BC_ROWWISE, w->swz, &w->l[d]);
    w->ref[2 * d] = dmalloc(w->l[d].data_bytes);
    w->ref[2 * d + 1] = dmalloc(w->l[d].scale_bytes);
  }
  w->ref_amax = dmalloc(4);
  w->ref_scale = dmalloc(4);
  bc_tensor x = { w->full, w->dt, R, C, C };
  bc_qtensor q = { f, R, C, w->ref[0], w->ref[1], w->ref[2], w->ref[3], w->ref_amax, w->ref_scale, w->swz, 0, 0, 0 };
  bc_status s;
  if (w->given) { /* delayed scaling: a scale that is not the current one */
    float sc = (float)urand(1, 64) / 8.0f;
    CK(cudaMemcpy(w->ref_scale, &sc, 4, cudaMemcpyHostToDevice));
    bc_amax(ctx, &x, w->ref_amax, NULL);
    s = bc_quantize_cast(ctx, &x, &q, NULL);
  } else {
    s = bc_quantize(ctx, &x, &q, NULL);
  }
  if (s != BC_OK) diag("reference quantize failed: %s", bc_last_error(ctx));
  CK(cudaDeviceSynchronize());
  /* the partition: W - 1 random cuts (duplicates: empty shards; odd offsets; inside blocks), in
   * a random rank order */
  int64_t N = R * C, cut[MAXR + 1];
  cut[0] = 0, cut[W] = N;
  for (int k = 1; k < W; k++) {
    int64_t c = urand(0, N);
    if (urand(0, 3) == 0) c = cut[k - 1];                     /* an empty shard */
    else if (urand(0, 3) == 0 && C > 1) c = c / C * C + C / 2 + (C > 2); /* mid-row, odd where it can be */
    cut[k] = c > N ? N : c;
  }
  for (int a = 1; a < W; a++) /* sort */
    for (int b = a; b > 1 && cut[b] < cut[b - 1]; b--) {
      int64_t t = cut[b];
      cut[b] = cut[b - 1];
      cut[b - 1] = t;
    }
  int perm[MAXR];
  for (int r = 0; r < W; r++) perm[r] = r;
  for (int r = W - 1; r > 0; r--) {
    int j = (int)urand(0, r), t = perm[r];
    perm[r] = perm[j];
    perm[j] = t;
  }
  for (int k = 0; k < W; k++) {
    w->start[perm[k]] = cut[k];
    w->len[perm[k]] = cut[k + 1] - cut[k];
  }
}

static void weight_free(weight *w) {
  cudaFree(w->full);
  for (int k = 0; k < 4; k++) cudaFree(w->ref[k]);
  cudaFree(w->ref_amax);
  cudaFree(w->ref_scale);
}

static uint64_t last_launches; /* of the last run_list's calls (all ranks) */

static int same_host(const char *what, const uint8_t *a, const uint8_t *b, size_t n) { return first_diff_report(what, a, b, n); }

/* every rank's output buffers filled with `fill`, its amax and scale reset; then the ranks' call */
static void fill_and_run(rank_arg *a, weight *ws, int n, int W, int fill) {
  for (int r = 0; r < W; r++)
    for (int i = 0; i < n; i++) {
      weight *w = &ws[i];
      for (int k = 0; k < 4; k++)
        if (a[r].out[i][k]) CK(cudaMemset(a[r].out[i][k], fill, bytes_of(w, k)));
      CK(cudaMemset(a[r].amax[i], 0xEE, 4));
      if (w->given) CK(cudaMemcpy(a[r].scale[i], w->ref_scale, 4, cudaMemcpyDeviceToDevice));
      else CK(cudaMemset(a[r].scale[i], 0xEE, 4));
    }
  CK(cudaDeviceSynchronize());
  run_ranks(a, W);
}

/* Who wrote what (buffers first zeroed, then filled with 0xFF, the same call each time): a unit
 * (a byte; a nibble of 4-bit data) rank r left alone reads 0 after the first run and all ones
 * after the second; one it wrote reads its value both times. Every unit of the data must have
 * exactly one writer (the rank holding that element: a shared byte's other nibble untouched),
 * and a scale entry one writer, or none or several that all write zero (padding). Returns 1 when
 * that holds; else why says where. */
static uint64_t units_seen, bytes_split; /* the writers check's reach: units checked, bytes of two ranks' nibbles */

static int writers_ok(const weight *w, int k, int i, int W, uint8_t *const *z, uint8_t *const *o, const uint8_t *want, char *why,
                      size_t why_len) {
  static const char *kn[4] = { "rowwise data", "rowwise scales", "columnwise data", "columnwise scales" };
  const size_t nb = bytes_of(w, k);
  const int nib = k % 2 == 0 && w->info.element_bits == 4, units = nib ? 2 : 1;
  for (size_t b = 0; b < nb; b++) {
    int owner[2] = { -1, -1 };
    for (int u = 0; u < units; u++) {
      const int sh = nib ? 4 * u : 0;
      const unsigned m = nib ? 0xFu : 0xFFu, wv = ((unsigned)want[b] >> sh) & m;
      int writers = 0, nonzero = 0, first = -1;
      for (int r = 0; r < W; r++) {
        const unsigned zv = ((unsigned)z[r][b] >> sh) & m, ov = ((unsigned)o[r][b] >> sh) & m;
        if (zv == 0 && ov == m) continue; /* untouched */
        if (zv != ov) {
          snprintf(why, why_len, "weight %d (%s %lldx%lld) %s byte %zu%s: rank %d wrote %#x over zeros and %#x over ones (a write "
                   "that depends on what was there)", i, w->info.name, (long long)w->R, (long long)w->C, kn[k], b,
                   nib ? (u ? " high nibble" : " low nibble") : "", r, zv, ov);
          return 0;
        }
        writers++, nonzero += zv != 0;
        if (first < 0) first = r;
      }
      const int scale = k % 2;
      if ((!scale && writers != 1) || (scale && ((writers == 0 && wv != 0) || (writers > 1 && nonzero)))) {
        snprintf(why, why_len, "weight %d (%s %lldx%lld) %s byte %zu%s: %d rank(s) wrote it (first: rank %d), expected %s", i,
                 w->info.name, (long long)w->R, (long long)w->C, kn[k], b, nib ? (u ? " high nibble" : " low nibble") : "", writers,
                 first, scale ? "one, or only zeros" : "exactly one (its element's rank)");
        return 0;
      }
      owner[u] = first;
      units_seen++;
    }
    bytes_split += nib && owner[0] != owner[1];
  }
  return 1;
}

/* the writers check itself, on bytes made up on the host: it must pass a byte two ranks share
 * nibble by nibble and fail a nibble written twice or a write that depends on the old byte */
static void writers_self_test(void) {
  weight w;
  memset(&w, 0, sizeof w);
  w.info.element_bits = 4;
  w.info.name = "(made up)";
  w.R = 1, w.C = 2;
  w.l[0].data_bytes = 1;
  char why[512];
  uint8_t want = 0x53, z0 = 0x03, o0 = 0xF3, z1 = 0x50, o1 = 0x5F;
  uint8_t *z[2] = { &z0, &z1 }, *o[2] = { &o0, &o1 };
  ok(writers_ok(&w, 0, 0, 2, z, o, &want, why, sizeof why), "writers check: a byte shared nibble by nibble passes");
  o1 = 0x50; /* rank 1 also wrote the low nibble (a zero) */
  int bad = !writers_ok(&w, 0, 0, 2, z, o, &want, why, sizeof why);
  ok(bad && strstr(why, "low nibble: 2 rank(s)"), "writers check: a nibble written by two ranks fails (%s)", why);
  o1 = 0x5F, o0 = 0xFF; /* rank 0's low nibble: 3 over zeros, F over ones */
  bad = !writers_ok(&w, 0, 0, 2, z, o, &want, why, sizeof why);
  ok(bad && strstr(why, "depends on what was there"), "writers check: a write that depends on the old byte fails (%s)", why);
  units_seen = bytes_split = 0;
}

/* one list of n weights over W ranks; returns 1 when every check holds */
static int run_list(weight *ws, int n, bc_comm **comms, int W, char *why, size_t why_len) {
  rank_arg a[MAXR];
  memset(a, 0, sizeof a);
  for (int r = 0; r < W; r++) {
    a[r].rank = r, a[r].n = n, a[r].comm = comms[r], a[r].w = ws;
    a[r].shard = calloc((size_t)n, sizeof *a[r].shard);
    a[r].out = calloc((size_t)n, sizeof *a[r].out);
    a[r].amax = calloc((size_t)n, sizeof *a[r].amax);
    a[r].scale = calloc((size_t)n, sizeof *a[r].scale);
    CK(cudaStreamCreateWithFlags(&a[r].st, cudaStreamNonBlocking));
    for (int i = 0; i < n; i++) {
      weight *w = &ws[i];
      size_t es = bc_dtype_size(w->dt);
      a[r].shard[i] = dmalloc((size_t)w->len[r] * es);
      if (w->len[r])
        CK(cudaMemcpy(a[r].shard[i], (char *)w->full + (size_t)w->start[r] * es, (size_t)w->len[r] * es, cudaMemcpyDeviceToDevice));
      for (int k = 0; k < 4; k++) {
        a[r].out[i][k] = NULL;
        if (!(w->dirs & (1 << (k / 2)))) continue;
        a[r].out[i][k] = dmalloc(bytes_of(w, k));
      }
      a[r].amax[i] = dmalloc(4);
      a[r].scale[i] = dmalloc(4);
    }
  }
  uint8_t *(*fin)[4] = calloc((size_t)n, sizeof *fin); /* the combined buffers of the weights bc_shard_finish completes */
  bc_stats s0, s1;
  bc_get_stats(ctx, &s0);
  fill_and_run(a, ws, n, W, 0);
  bc_get_stats(ctx, &s1);
  last_launches = s1.launches - s0.launches;
  int good = 1;
  why[0] = 0;
  uint8_t *(*z)[4][MAXR] = calloc((size_t)n, sizeof *z); /* each rank's buffers after the run over zeros */
  for (int r = 0; r < W && good; r++)
    if (a[r].status != BC_OK) {
      snprintf(why, why_len, "rank %d: %s", r, a[r].err);
      good = 0;
    }
  for (int i = 0; i < n && good; i++) {
    weight *w = &ws[i];
    for (int k = 0; k < 4 && good; k++) {
      if (!(w->dirs & (1 << (k / 2)))) continue;
      size_t nb = bytes_of(w, k);
      uint8_t *want = malloc(nb), *sum = calloc(nb, 1), *one = malloc(nb);
      CK(cudaMemcpy(want, w->ref[k], nb, cudaMemcpyDeviceToHost));
      const int per_tensor_scale = k % 2 && w->info.block == BC_BLOCK_TENSOR;
      for (int r = 0; r < W; r++) {
        CK(cudaMemcpy(one, a[r].out[i][k], nb, cudaMemcpyDeviceToHost));
        z[i][k][r] = malloc(nb);
        memcpy(z[i][k][r], one, nb);
        if (per_tensor_scale) { /* every rank writes the group's scale_inv */
          char what[96];
          snprintf(what, sizeof what, "weight %d rank %d scale_inv", i, r);
          if (!same_host(what, one, want, nb)) good = 0;
        } else {
          for (size_t b = 0; b < nb; b++) sum[b] = (uint8_t)(sum[b] + one[b]);
        }
      }
      if (k < 2 && w->refdirs != w->dirs) { /* keep the combined rowwise buffers for bc_shard_finish */
        fin[i][k] = dmalloc(nb);
        CK(cudaMemcpy(fin[i][k], per_tensor_scale ? one : sum, nb, cudaMemcpyHostToDevice));
      }
      if (!per_tensor_scale) {
        static const char *kn[4] = { "rowwise data", "rowwise scales", "columnwise data", "columnwise scales" };
        char what[128];
        snprintf(what, sizeof what, "weight %d (%s %lldx%lld %s%s) %s, ranks summed", i, w->info.name, (long long)w->R,
                 (long long)w->C, bc_dtype_name(w->dt), w->swz ? " swizzled" : "", kn[k]);
        if (!same_host(what, sum, want, nb)) {
          good = 0;
          snprintf(why, why_len, "%s differs (shards:", what);
          for (int r = 0; r < W; r++)
            snprintf(why + strlen(why), why_len - strlen(why), " [%lld,+%lld)", (long long)w->start[r], (long long)w->len[r]);
          snprintf(why + strlen(why), why_len - strlen(why), ")");
        }
      }
      free(want);
      free(sum);
      free(one);
    }
    if (w->info.block == BC_BLOCK_TENSOR || w->info.two_level) {
      float ra, rsc, ga, gs;
      CK(cudaMemcpy(&ra, w->ref_amax, 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(&rsc, w->ref_scale, 4, cudaMemcpyDeviceToHost));
      for (int r = 0; r < W && good; r++) {
        CK(cudaMemcpy(&ga, a[r].amax[i], 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&gs, a[r].scale[i], 4, cudaMemcpyDeviceToHost));
        if (memcmp(&ga, &ra, 4) || (w->info.block == BC_BLOCK_TENSOR && memcmp(&gs, &rsc, 4))) {
          snprintf(why, why_len, "weight %d rank %d: amax %g scale %g, want %g %g", i, r, ga, gs, ra, rsc);
          good = 0;
        }
      }
    }
  }
  /* the same call over buffers of all ones: every unit has the writers the contract allows */
  if (good) {
    fill_and_run(a, ws, n, W, 0xFF);
    for (int r = 0; r < W && good; r++)
      if (a[r].status != BC_OK) {
        snprintf(why, why_len, "rank %d (the run over all ones): %s", r, a[r].err);
        good = 0;
      }
    for (int i = 0; i < n && good; i++) {
      weight *w = &ws[i];
      for (int k = 0; k < 4 && good; k++) {
        if (!(w->dirs & (1 << (k / 2))) || (k % 2 && w->info.block == BC_BLOCK_TENSOR)) continue; /* per-tensor scale_inv: every rank's */
        size_t nb = bytes_of(w, k);
        uint8_t *o[MAXR], *want = malloc(nb);
        CK(cudaMemcpy(want, w->ref[k], nb, cudaMemcpyDeviceToHost));
        for (int r = 0; r < W; r++) {
          o[r] = malloc(nb);
          CK(cudaMemcpy(o[r], a[r].out[i][k], nb, cudaMemcpyDeviceToHost));
        }
        good = writers_ok(w, k, i, W, z[i][k], o, want, why, why_len);
        for (int r = 0; r < W; r++) free(o[r]);
        free(want);
      }
    }
  }
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 4; k++)
      for (int r = 0; r < MAXR; r++) free(z[i][k][r]);
  free(z);
  /* after the gather: the columnwise copies of per-tensor and 2D formats, one call for the list */
  if (good) {
    bc_qtensor *fq = calloc((size_t)n, sizeof *fq);
    int nf = 0, idx[4096];
    for (int i = 0; i < n; i++) {
      weight *w = &ws[i];
      if (w->refdirs == w->dirs) continue;
      fin[i][2] = dmalloc(w->l[1].data_bytes);
      fin[i][3] = dmalloc(w->l[1].scale_bytes);
      CK(cudaMemset(fin[i][2], 0xA5, w->l[1].data_bytes));
      CK(cudaMemset(fin[i][3], 0xA5, w->l[1].scale_bytes));
      fq[nf] = (bc_qtensor){ w->f, w->R, w->C, fin[i][0], fin[i][1], fin[i][2], fin[i][3], NULL, NULL, w->swz, 0, 0, 0 };
      idx[nf++] = i;
    }
    if (nf) {
      bc_status st = bc_shard_finish(ctx, nf, fq, NULL);
      CK(cudaDeviceSynchronize());
      if (st != BC_OK) {
        snprintf(why, why_len, "bc_shard_finish: %s", bc_last_error(ctx));
        good = 0;
      }
      for (int k = 0; k < nf && good; k++) {
        weight *w = &ws[idx[k]];
        char what[128];
        snprintf(what, sizeof what, "weight %d (%s %lldx%lld) columnwise data after bc_shard_finish", idx[k], w->info.name,
                 (long long)w->R, (long long)w->C);
        if (!same_dev(what, fin[idx[k]][2], w->ref[2], w->l[1].data_bytes)) good = 0;
        snprintf(what, sizeof what, "weight %d (%s) columnwise scales after bc_shard_finish", idx[k], w->info.name);
        if (!same_dev(what, fin[idx[k]][3], w->ref[3], w->l[1].scale_bytes)) good = 0;
        if (!good) snprintf(why, why_len, "%s", what);
      }
    }
    free(fq);
  }
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) cudaFree(fin[i][k]);
  free(fin);
  for (int r = 0; r < W; r++) {
    for (int i = 0; i < n; i++) {
      cudaFree(a[r].shard[i]);
      for (int k = 0; k < 4; k++) cudaFree(a[r].out[i][k]);
      cudaFree(a[r].amax[i]);
      cudaFree(a[r].scale[i]);
    }
    cudaStreamDestroy(a[r].st);
    free(a[r].shard);
    free(a[r].out);
    free(a[r].amax);
    free(a[r].scale);
  }
  return good;
}

static void exactness(void) {
  const int Ws[3] = { 2, 4, 8 };
  bc_comm *comms[3][MAXR];
  for (int k = 0; k < 3; k++)
    if (bc_comm_create_local(ctx, Ws[k], comms[k]) != BC_OK) diag("local comm: %s", bc_last_error(ctx));
  size_t nf = bc_format_count(ctx);
  for (size_t fi = 0; fi < nf; fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (!comm_takes(&info)) continue; /* refused, named: 19-comm-args */
    for (int k = 0; k < 3; k++) {
      int W = Ws[k];
      for (int trial = 0; trial < 3; trial++) {
        weight ws[6];
        int n = 6;
        /* ragged, one row, one column, many rows, block-multiple, and a larger one */
        int64_t shapes[6][2] = { { urand(1, 300), urand(1, 300) }, { 1, urand(1, 700) }, { urand(1, 300), 1 },
                                 { urand(200, 640), urand(1, 40) }, { 128 * urand(1, 3), 128 * urand(1, 2) },
                                 { urand(300, 640), urand(300, 640) } };
        for (int i = 0; i < n; i++) weight_make(&ws[i], f, shapes[i][0], shapes[i][1], trial != 1, W);
        char why[2048];
        int good = run_list(ws, n, comms[k], W, why, sizeof why);
        ok(good, "%s, W=%d, list of %d weights (trial %d: %s): the ranks' outputs combine to the whole weight's quantize",
           info.name, W, n, trial, trial != 1 && info.block == BC_BLOCK_1D ? "both directions" : "rowwise");
        if (!good) diag("%s", why);
        for (int i = 0; i < n; i++) weight_free(&ws[i]);
      }
    }
  }
  for (int k = 0; k < 3; k++)
    for (int r = 0; r < Ws[k]; r++) bc_comm_destroy(comms[k][r]);
  ok(units_seen > 0 && bytes_split > 0, "the writers check ran: %llu units (bytes, nibbles of 4-bit data), %llu bytes holding two "
     "ranks' nibbles", (unsigned long long)units_seen, (unsigned long long)bytes_split);
}

/* a rank's shard as whole rows plus elements: [r0 * C + c0, r1 * C + c1) */
static void set_shard(weight *w, int r, int64_t r0, int64_t c0, int64_t r1, int64_t c1) {
  w->start[r] = r0 * w->C + c0;
  w->len[r] = r1 * w->C + c1 - w->start[r];
}

/* The planning branches of a 1D "both" cast pinned one by one (the random partitions above reach
 * them by chance). H is the columnwise blocks' height (the interior's alignment), the rowwise
 * pass's bands single rows: a rank's rows held whole outside its interior [A, B) are its
 * "direct" rows, a row it cuts a one-row slab. Two weights of 3H + 5 rows (3H + 6 for 4-bit
 * data, whose transposed columnwise rows need an even count) by 200 columns (ragged blocks),
 * four ranks (cuts at odd offsets, inside blocks):
 *   weight 0, rank 0: interior [0, H), direct rows below it, a cut row;
 *             rank 1: no interior, direct rows between two cut rows;
 *             rank 2: interior [2H, 3H), direct rows above and below, cut rows at both ends;
 *             rank 3: no interior, a cut row, direct rows to the weight's last row;
 *   weight 1, rank 0: no interior, direct rows from row 0, a cut row;
 *             rank 1: a cut row, direct rows above its interior [H, R) (the weight's end);
 *             ranks 2, 3: empty.
 * For every 1D format with a columnwise direction, fp32 / bf16 / fp16 masters, compact and
 * swizzled scales; the same checks as the random lists (exact combine, who wrote what). */
static void direct_rows(void) {
  bc_comm *comms[4];
  if (bc_comm_create_local(ctx, 4, comms) != BC_OK) diag("local comm: %s", bc_last_error(ctx));
  size_t nf = bc_format_count(ctx);
  const bc_dtype dts[3] = { BC_FP32, BC_BF16, BC_FP16 };
  for (size_t fi = 0; fi < nf; fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (!comm_takes(&info) || info.block != BC_BLOCK_1D || !info.has_rowwise || !info.has_columnwise) continue;
    const int64_t H = info.block_cols;
    for (int t = 0; t < 6; t++) {
      fixed_kind.on = 1, fixed_kind.dt = dts[t / 2], fixed_kind.swz = t % 2;
      weight ws[2];
      for (int i = 0; i < 2; i++) weight_make(&ws[i], f, 3 * H + 5, 200, 1, 4);
      weight *a = &ws[0], *b = &ws[1];
      const int64_t R = a->R;
      set_shard(a, 0, 0, 0, H + 3, 7);
      set_shard(a, 1, H + 3, 7, 2 * H - 5, 3);
      set_shard(a, 2, 2 * H - 5, 3, 3 * H + 2, 1);
      set_shard(a, 3, 3 * H + 2, 1, R, 0);
      set_shard(b, 0, 0, 0, H - 3, 5);
      set_shard(b, 1, H - 3, 5, R, 0);
      set_shard(b, 2, R, 0, R, 0);
      set_shard(b, 3, R, 0, R, 0);
      char why[2048];
      int good = run_list(ws, 2, comms, 4, why, sizeof why);
      ok(good, "%s direct rows (%lldx200 %s%s, 4 ranks: interiors with direct rows above, below, both, none; direct rows "
         "without an interior; to the weight's first and last rows): the ranks' outputs combine to the whole weight's",
         info.name, (long long)R, bc_dtype_name(dts[t / 2]), t % 2 ? ", swizzled" : "");
      if (!good) diag("%s", why);
      for (int i = 0; i < 2; i++) weight_free(&ws[i]);
    }
  }
  fixed_kind.on = 0;
  for (int r = 0; r < 4; r++) bc_comm_destroy(comms[r]);
}

/* the launches of one call do not grow with the number of weights */
static void launch_count(void) {
  bc_comm *comms[2];
  bc_comm_create_local(ctx, 2, comms);
  const char *names[3] = { "mxfp8_e4m3", "nvfp4", "fp8_e4m3_tensor" };
  uint64_t per_call[2];
  int sizes[2] = { 10, 1000 };
  fixed_kind.on = 1, fixed_kind.swz = 0, fixed_kind.dt = BC_BF16; /* the kernels a call launches depend on the kinds of weights (format, dtype, ...), not on their number */
  for (int t = 0; t < 2; t++) {
    int n = sizes[t];
    weight *ws = calloc((size_t)n, sizeof *ws);
    for (int i = 0; i < n; i++) {
      const bc_format *f;
      bc_format_get(ctx, names[i % 3], &f);
      weight_make(&ws[i], f, 64, 96, 1, 2);
      ws[i].start[0] = 0, ws[i].len[0] = 64 * 96 / 2 + 7; /* the same cut in each: mid-row, mid-block */
      ws[i].start[1] = ws[i].len[0], ws[i].len[1] = 64 * 96 - ws[i].len[0];
    }
    char why[2048];
    int good = run_list(ws, n, comms, 2, why, sizeof why);
    per_call[t] = last_launches;
    ok(good, "%d weights (mxfp8_e4m3 both, nvfp4 both, fp8_e4m3_tensor) over 2 ranks: exact", n);
    if (!good) diag("%s", why);
    for (int i = 0; i < n; i++) weight_free(&ws[i]);
    free(ws);
  }
  fixed_kind.on = 0;
  ok(per_call[0] == per_call[1], "launches per call (2 ranks together, the all-reduce included): %llu for 10 weights, %llu for 1000",
     (unsigned long long)per_call[0], (unsigned long long)per_call[1]);
  bc_comm_destroy(comms[0]);
  bc_comm_destroy(comms[1]);
}

int main(void) {
  gpu_init_or_skip();
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
  diag("device: %s", gpu_name());
  writers_self_test();
  exactness();
  direct_rows();
  launch_count();
  bc_ctx_destroy(ctx);
  done_testing();
  return tap_failed ? 1 : 0;
}
