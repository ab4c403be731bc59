/* tests/28-gpu-multi.c: the collectives and the sharded cast over real NCCL, one process per GPU
 * (2 to 4 GPUs; "1..0 # SKIP" with fewer, a failure with fewer than $BC_MULTI_MIN_GPUS). The
 * parent counts the GPUs in a child (it never initializes CUDA itself, so the ranks it starts are
 * clean processes), starts one rank per GPU (this program with --rank; each killed after
 * $BC_MULTI_TIMEOUT seconds, 300 by default, and all once one fails), waits for them and
 * renumbers their TAP lines. Every rank builds the same inputs
 * from the same seeds and checks its own results against bc_quantize of the whole tensor on its
 * own GPU:
 *   - bc_all_gather over a communicator bootstrapped by blockcast (an id file in a fresh
 *     directory: bc_comm_bootstrap), every format, rowwise and both, unequal rows cutting blocks
 *     and unequal bands of 128 rows (block scales gathered in place of the output's), rank 0
 *     without rows, an equal piece of 8 MiB (2 ranks) or 64 MiB (more) a rank (auto asks whether
 *     the ranks share a host), and bc_all_gather_quantized of equal bands; each over three
 *     communicators, one per BLOCKCAST_GATHER (auto, collective, sendrecv: how the pieces travel);
 *   - bc_shard_cast of random flat partitions over a communicator the test made itself with NCCL
 *     (ncclCommInitRank from blockcast's id helper) and wrapped (bc_comm_wrap_nccl); the ranks'
 *     buffers combined by ncclAllReduce(ncclUint8, ncclSum), then bc_shard_finish;
 *   - communicators given at the call: ncclCommSplit into two groups (even and odd ranks; with
 *     2 ranks one group with the ranks reversed), each wrapped at its new rank and size, an amax
 *     all-reduce on each gives its own group's max.
 * The process plumbing and NCCL (opened at run time) are in tests/multi.h. */
#include <errno.h>
#include <stdarg.h>

#include "gpu.h"
#include "multi.h"
#include "testdata.h"

/* ---- the rank (a process of its own) ---- */

static bc_ctx *ctx;
static int rank_fail;

static void rline(int good, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s - ", good ? "ok" : "not ok");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  if (!good) rank_fail = 1;
}

typedef struct qbuf { bc_qlayout l[2]; void *p[4]; float *amax, *scale; } qbuf;

static bc_qtensor qbuf_make(qbuf *b, const bc_format *f, int64_t R, int64_t C, int dirs) {
  memset(b, 0, sizeof *b);
  for (int d = 0; d < 2; d++) {
    if (!(dirs & (1 << d))) continue;
    bc_qtensor_layout(ctx, f, R, C, d ? BC_COLUMNWISE : BC_ROWWISE, 0, &b->l[d]);
    b->p[2 * d] = dmalloc(b->l[d].data_bytes);
    b->p[2 * d + 1] = dmalloc(b->l[d].scale_bytes);
    CK(cudaMemset(b->p[2 * d], 0, b->l[d].data_bytes));
    CK(cudaMemset(b->p[2 * d + 1], 0, b->l[d].scale_bytes));
  }
  b->amax = dmalloc(4);
  b->scale = dmalloc(4);
  return (bc_qtensor){ f, R, C, b->p[0], b->p[1], b->p[2], b->p[3], b->amax, b->scale, 0, 0, 0, 0 };
}

static void qbuf_free(qbuf *b) {
  for (int k = 0; k < 4; k++) cudaFree(b->p[k]);
  cudaFree(b->amax);
  cudaFree(b->scale);
}

static int same_q(const qbuf *g, const qbuf *w, int dirs, int amax, char *why, size_t wl) {
  static const char *kn[4] = { "rowwise data", "rowwise scales", "columnwise data", "columnwise scales" };
  for (int k = 0; k < 4; k++)
    if ((dirs & (1 << (k / 2))) && !same_dev(kn[k], g->p[k], w->p[k], k % 2 ? w->l[k / 2].scale_bytes : w->l[k / 2].data_bytes)) {
      snprintf(why, wl, "%s differ (bytes above)", kn[k]);
      return 0;
    }
  if (amax && !same_dev("amax", g->amax, w->amax, 4)) {
    snprintf(why, wl, "amax differs");
    return 0;
  }
  return 1;
}

static void *full_input(bc_dtype dt, int64_t n, uint64_t seed) {
  size_t es = bc_dtype_size(dt);
  void *h = malloc((size_t)n * es);
  rng = seed;
  fill(h, dt, (size_t)n, 0);
  void *d = dmalloc((size_t)n * es);
  CK(cudaMemcpy(d, h, (size_t)n * es, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

static int rank_main(int rank, int W, const char *dir) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* its log keeps every line if the rank is killed */
  CK(cudaSetDevice(rank));
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { rline(0, "rank %d: context", rank); return 1; }
  char path[512];
  snprintf(path, sizeof path, "%s/blockcast.id", dir);
  bc_comm *boot = NULL;
  bc_status s = bc_comm_bootstrap(ctx, path, W, rank, 120.0, &boot);
  rline(s == BC_OK, "rank %d: bc_comm_bootstrap over an id file, %d ranks%s%s", rank, W, s ? ": " : "", s ? bc_last_error(ctx) : "");
  if (s != BC_OK) return 1;
  size_t nf = bc_format_count(ctx);
  char why[256];
  /* the same gathers over communicators whose pieces travel each way (BLOCKCAST_GATHER at
   * creation): auto (boot; pieces this small go as ncclAllGather when equal, send / receive when
   * not), collective (ncclAllGather, or a broadcast per rank) and sendrecv (always) */
  static const char *modes[3] = { "auto", "collective", "sendrecv" };
  bc_comm *mc[3] = { boot, NULL, NULL };
  for (int m = 1; m < 3; m++) {
    snprintf(path, sizeof path, "%s/blockcast-%s.id", dir, modes[m]);
    setenv("BLOCKCAST_GATHER", modes[m], 1);
    s = bc_comm_bootstrap(ctx, path, W, rank, 120.0, &mc[m]);
    unsetenv("BLOCKCAST_GATHER");
    rline(s == BC_OK, "rank %d: bc_comm_bootstrap with BLOCKCAST_GATHER=%s%s%s", rank, modes[m], s ? ": " : "", s ? bc_last_error(ctx) : "");
    if (s != BC_OK) return 1;
  }
  for (int m = 0; m < 3; m++) {
  bc_comm *gc = mc[m];
  /* 1: the all-gather of every format */
  for (size_t fi = 0; fi < nf; fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (!comm_takes(&info)) continue;
    for (int v = 0; v < 4; v++) {
      /* dirs 1, 3; rows cutting blocks, then bands of 128 rows (block scales gathered in place) */
      const int dirs = v % 2 ? 3 : 1, bands = v / 2;
      int64_t K = 256, rows[8], M = 0;
      for (int r = 0; r < W; r++) M += rows[r] = bands ? 128 * (1 + r % 2) : 40 + 18 * r;
      void *full = full_input(BC_BF16, M * K, 0x1234 + fi);
      int64_t r0 = 0;
      for (int r = 0; r < rank; r++) r0 += rows[r];
      bc_tensor x = { (char *)full + (size_t)(r0 * K) * 2, BC_BF16, rows[rank], K, K };
      qbuf g, w;
      bc_qtensor qg = qbuf_make(&g, f, M, K, dirs), qw = qbuf_make(&w, f, M, K, dirs);
      bc_tensor xf = { full, BC_BF16, M, K, K };
      s = bc_all_gather(ctx, gc, &x, rows, &qg, NULL);
      if (s == BC_OK) s = bc_quantize(ctx, &xf, &qw, NULL);
      CK(cudaDeviceSynchronize());
      int good = s == BC_OK && same_q(&g, &w, dirs, info.block == BC_BLOCK_TENSOR || info.two_level, why, sizeof why);
      rline(good, "rank %d: bc_all_gather %s %s, %s (gathers: %s): the whole tensor's quantize%s%s", rank, info.name,
            dirs == 3 ? "both" : "rowwise", bands ? "128-row bands" : "rows cutting blocks", modes[m], good ? "" : ": ",
            good ? "" : (s ? bc_last_error(ctx) : why));
      qbuf_free(&g);
      qbuf_free(&w);
      cudaFree(full);
    }
  }
  /* 1c: a rank with no rows (rank 0): its pieces are empty, the others' unequal */
  static const char *e_names[3] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4" };
  for (int i = 0; i < 3; i++) {
    const bc_format *f;
    bc_format_get(ctx, e_names[i], &f);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    const int dirs = info.block == BC_BLOCK_1D ? 3 : 1;
    int64_t K = 256, rows[8], M = 0;
    for (int r = 0; r < W; r++) M += rows[r] = r == 0 ? 0 : 40 + 18 * r;
    void *full = full_input(BC_BF16, M * K, 0x5150 + i);
    int64_t r0 = 0;
    for (int r = 0; r < rank; r++) r0 += rows[r];
    bc_tensor x = { (char *)full + (size_t)(r0 * K) * 2, BC_BF16, rows[rank], K, K }, xf = { full, BC_BF16, M, K, K };
    qbuf g, w;
    bc_qtensor qg = qbuf_make(&g, f, M, K, dirs), qw = qbuf_make(&w, f, M, K, dirs);
    s = bc_all_gather(ctx, gc, &x, rows, &qg, NULL);
    if (s == BC_OK) s = bc_quantize(ctx, &xf, &qw, NULL);
    CK(cudaDeviceSynchronize());
    int good = s == BC_OK && same_q(&g, &w, dirs, info.block == BC_BLOCK_TENSOR || info.two_level, why, sizeof why);
    rline(good, "rank %d: bc_all_gather %s %s, rank 0 without rows (gathers: %s): the whole tensor's quantize%s%s", rank,
          info.name, dirs == 3 ? "both" : "rowwise", modes[m], good ? "" : ": ", good ? "" : (s ? bc_last_error(ctx) : why));
    qbuf_free(&g);
    qbuf_free(&w);
    cudaFree(full);
  }
  /* 1d: a piece large enough for auto to ask whether every rank is on one host (8 MiB of FP8 a
   * rank alone on 2 ranks, 64 MiB on more: bc_nccl.c sendrecv_min), twice (the answer is kept) */
  for (int i = 0; i < 2; i++) {
    const bc_format *f;
    bc_format_get(ctx, "fp8_e4m3_tensor", &f);
    int64_t K = 4096, rows[8], M = 0;
    for (int r = 0; r < W; r++) M += rows[r] = W == 2 ? 2048 : 16384;
    void *full = full_input(BC_BF16, M * K, 0x6160 + i);
    bc_tensor x = { (char *)full + (size_t)(rows[0] * rank * K) * 2, BC_BF16, rows[rank], K, K }, xf = { full, BC_BF16, M, K, K };
    qbuf g, w;
    bc_qtensor qg = qbuf_make(&g, f, M, K, 1), qw = qbuf_make(&w, f, M, K, 1);
    s = bc_all_gather(ctx, gc, &x, rows, &qg, NULL);
    if (s == BC_OK) s = bc_quantize(ctx, &xf, &qw, NULL);
    CK(cudaDeviceSynchronize());
    int good = s == BC_OK && same_q(&g, &w, 1, 1, why, sizeof why);
    rline(good, "rank %d: bc_all_gather fp8_e4m3_tensor rowwise, %lld MiB a rank (gathers: %s, %s): the whole tensor's quantize%s%s",
          rank, (long long)(rows[0] * K >> 20), modes[m], i ? "again" : "first", good ? "" : ": ", good ? "" : (s ? bc_last_error(ctx) : why));
    qbuf_free(&g);
    qbuf_free(&w);
    cudaFree(full);
  }
  /* 1b: rows already quantized, equal bands (every piece the same size: the pieces in place of
   * out, the rank's own copied from its input: for sendrecv, in the transport's own kernel on 2
   * ranks, by a copy on the call's stream before the group on more).
   * The calls run on a stream of the rank's own (non-blocking) and only that stream is
   * synchronized before the result is read: the gather must leave nothing of its own (where xq's
   * words are not out's, their copies on the communicator's side stream) unordered after it. A
   * missing join would show only when that copy is still running, so this check can miss it */
  static const char *gq_names[3] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4" };
  for (int i = 0; i < 6; i++) {
    const int alias = i % 2; /* 1: the rank quantizes into its own rows (and block scales) of out */
    const bc_format *f;
    bc_format_get(ctx, gq_names[i / 2], &f);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    int64_t K = 512, rows[8], M = 128 * (int64_t)W;
    for (int r = 0; r < W; r++) rows[r] = 128;
    void *full = full_input(BC_BF16, M * K, 0x4321 + i);
    bc_tensor x = { (char *)full + (size_t)(128 * rank * K) * 2, BC_BF16, 128, K, K }, xf = { full, BC_BF16, M, K, K };
    qbuf l, g, w;
    bc_qtensor ql = qbuf_make(&l, f, 128, K, 1), qg = qbuf_make(&g, f, M, K, 1), qw = qbuf_make(&w, f, M, K, 1);
    if (alias) { /* its amax, scale (and per tensor scale_inv) words out's too: the gather copies none */
      ql.rowwise_data = (char *)qg.rowwise_data + (size_t)rank * l.l[0].data_bytes;
      ql.rowwise_scale_inv = info.block != BC_BLOCK_TENSOR ? (char *)qg.rowwise_scale_inv + (size_t)rank * l.l[0].scale_bytes
                                                           : qg.rowwise_scale_inv;
      ql.amax = qg.amax, ql.scale = qg.scale;
    }
    cudaStream_t us;
    CK(cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking));
    s = bc_quantize(ctx, &xf, &qw, NULL);
    CK(cudaDeviceSynchronize());
    if (s == BC_OK) s = bc_quantize_comm(ctx, gc, &x, &ql, us);
    if (s == BC_OK) s = bc_all_gather_quantized(ctx, gc, &ql, rows, &qg, us);
    CK(cudaStreamSynchronize(us));
    int good = s == BC_OK && same_q(&g, &w, 1, info.block == BC_BLOCK_TENSOR || info.two_level, why, sizeof why);
    CK(cudaDeviceSynchronize());
    CK(cudaStreamDestroy(us));
    rline(good, "rank %d: bc_quantize_comm + bc_all_gather_quantized %s, equal bands of 128 rows%s (gathers: %s): the whole "
          "tensor's quantize%s%s", rank, info.name, alias ? ", quantized into out's own rows (in place)" : "", modes[m],
          good ? "" : ": ", good ? "" : (s ? bc_last_error(ctx) : why));
    qbuf_free(&l);
    qbuf_free(&g);
    qbuf_free(&w);
    cudaFree(full);
  }
  }
  bc_comm_destroy(mc[1]);
  bc_comm_destroy(mc[2]);
  /* 2: the caller's own NCCL communicator, wrapped; the sharded cast */
  mt_nccl nc;
  int opened = mt_nccl_open(&nc);
  rline(opened, "rank %d: libnccl.so.2 opened", rank);
  if (!opened) return 1;
  void *own = mt_nccl_comm(ctx, &nc, dir, "own.id", rank, W);
  int nr = own ? 0 : 1;
  bc_comm *wrapped = NULL;
  s = nr == 0 ? bc_comm_wrap_nccl(ctx, own, &wrapped) : BC_ERR_UNAVAILABLE;
  rline(own && s == BC_OK, "rank %d: ncclCommInitRank from blockcast's id helper, and bc_comm_wrap_nccl", rank);
  if (!wrapped) return 1;
  for (size_t fi = 0; fi < nf; fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (!comm_takes(&info)) continue;
    int dirs = info.block == BC_BLOCK_1D ? 3 : 1;
    int64_t R = 190, C = 258, N = R * C;
    void *full = full_input(BC_FP32, N, 0x777 + fi);
    /* the same partition on every rank: W - 1 cuts inside blocks, off the blocks' and rows' edges */
    int64_t cut[9];
    cut[0] = 0, cut[W] = N;
    for (int k = 1; k < W; k++) cut[k] = N * k / W + 2 * k + 1;
    bc_shard sh = { (float *)full + cut[rank], BC_FP32, cut[rank], cut[rank + 1] - cut[rank], 0 };
    qbuf g, w;
    bc_qtensor qg = qbuf_make(&g, f, R, C, dirs);
    bc_qtensor qw = qbuf_make(&w, f, R, C, dirs | (info.has_columnwise ? 2 : 0));
    s = bc_shard_cast(ctx, wrapped, 1, &sh, &qg, NULL);
    int ncr = 0; /* ncclResult_t of the combining all-reduce */
    for (int k = 0; k < 4 && s == BC_OK && ncr == 0; k++) {
      if (!g.p[k] || (k == 1 && info.block == BC_BLOCK_TENSOR)) continue; /* per-tensor scale_inv: every rank writes it */
      size_t n = k % 2 ? g.l[k / 2].scale_bytes : g.l[k / 2].data_bytes;
      ncr = nc.allreduce(g.p[k], g.p[k], n, MT_UINT8, MT_SUM, own, NULL);
    }
    if (ncr) snprintf(why, sizeof why, "ncclAllReduce (the test's combine) returned %d", ncr);
    int good = 0;
    if (s == BC_OK && !ncr && dirs == 1 && info.has_columnwise) { /* the columnwise copy after the gather */
      g.l[1] = w.l[1];
      g.p[2] = dmalloc(w.l[1].data_bytes);
      g.p[3] = dmalloc(w.l[1].scale_bytes);
      qg.columnwise_data = g.p[2], qg.columnwise_scale_inv = g.p[3];
      s = bc_shard_finish(ctx, 1, &qg, NULL);
    }
    bc_tensor xf = { full, BC_FP32, R, C, C };
    if (s == BC_OK && !ncr) s = bc_quantize(ctx, &xf, &qw, NULL);
    CK(cudaDeviceSynchronize());
    good = s == BC_OK && !ncr && same_q(&g, &w, info.has_columnwise ? 3 : dirs, info.block == BC_BLOCK_TENSOR || info.two_level, why, sizeof why);
    rline(good, "rank %d: bc_shard_cast %s over the wrapped communicator, buffers summed by ncclAllReduce, bc_shard_finish: the whole "
          "weight's quantize%s%s", rank, info.name, good ? "" : ": ", good ? "" : (s ? bc_last_error(ctx) : why));
    qbuf_free(&g);
    qbuf_free(&w);
    cudaFree(full);
  }
  /* 3: two groups, each communicator given at the call: ranks 0 and 2 / 1 and 3 for 4 ranks (the
   * group's max is another rank's value); for 2 ranks one group in reverse order (key W - 1 -
   * rank), so that the wrapped communicator's rank is not the process's */
  void *half = NULL;
  const int color = W == 2 ? 0 : rank % 2, key = W - 1 - rank;
  nr = nc.split(own, color, key, &half, NULL);
  bc_comm *hc = NULL;
  s = nr == 0 ? bc_comm_wrap_nccl(ctx, half, &hc) : BC_ERR_UNAVAILABLE;
  bc_comm_info hi_info = { 0 };
  int members = 0, pos = 0; /* the group's size and this rank's place in it (by key) */
  for (int r = 0; r < W; r++)
    if ((W == 2 ? 0 : r % 2) == color) members++, pos += (W - 1 - r) < key;
  if (s == BC_OK) s = bc_comm_get_info(ctx, hc, &hi_info);
  rline(nr == 0 && s == BC_OK && hi_info.rank == pos && hi_info.size == members,
        "rank %d: ncclCommSplit (color %d, key %d) wrapped: rank %d of %d, want %d of %d%s%s", rank, color, key, hi_info.rank,
        hi_info.size, pos, members, nr ? ": ncclCommSplit failed" : s ? ": " : "", nr ? "" : s ? bc_last_error(ctx) : "");
  float *a = dmalloc(4), v = (float)(rank + 1), got = 0;
  CK(cudaMemcpy(a, &v, 4, cudaMemcpyHostToDevice));
  if (s == BC_OK) s = bc_amax_allreduce(ctx, hc, a, 1, NULL);
  CK(cudaMemcpy(&got, a, 4, cudaMemcpyDeviceToHost));
  int hi = 0;
  for (int r = 0; r < W; r++)
    if ((W == 2 ? 0 : r % 2) == color) hi = r + 1;
  rline(s == BC_OK && got == (float)hi, "rank %d: amax all-reduce over its ncclCommSplit group (color %d): %g, want %d%s%s", rank,
        color, got, hi, s ? ": " : "", s ? bc_last_error(ctx) : "");
  bc_comm_destroy(hc);
  bc_comm_destroy(wrapped);
  bc_comm_destroy(boot);
  if (half) nc.destroy(half);
  nc.destroy(own);
  bc_ctx_destroy(ctx);
  return rank_fail;
}

/* ---- the parent ---- */

int main(int argc, char **argv) {
  int cm = mt_count_main(argc, argv);
  if (cm >= 0) return cm;
  if (argc > 4 && !strcmp(argv[1], "--rank")) return rank_main(atoi(argv[2]), atoi(argv[3]), argv[4]);
  setvbuf(stdout, NULL, _IOLBF, 0); /* what was printed survives a kill of the whole run */
  char why[256];
  int n = mt_gpu_count(argv[0], why, sizeof why);
  if (n < 0) { printf("Bail out! counting the GPUs failed: %s\n", why); return 1; }
  /* BC_MULTI_MIN_GPUS=2 on a machine of several GPUs: fewer is a failure, not a skip */
  const char *mn = getenv("BC_MULTI_MIN_GPUS");
  if (mn && n < atoi(mn)) { printf("Bail out! %d GPU(s) (%s), BC_MULTI_MIN_GPUS=%s\n", n, why, mn); return 1; }
  if (n < 2) {
    printf("1..0 # SKIP %d GPU%s (the multi-GPU tier needs 2 or more)\n", n, n == 1 ? "" : "s");
    return 0;
  }
  int W = n < 4 ? n : 4;
  char dir[] = "/tmp/blockcast-multi-XXXXXX";
  if (!mkdtemp(dir)) { printf("Bail out! mkdtemp: %s\n", strerror(errno)); return 1; }
  unsigned limit = mt_timeout(300);
  printf("# %d GPUs, %d ranks (one process each, %u s each at most), id files and logs in %s\n", n, W, limit, dir);
  pid_t pids[8];
  int st[8];
  int started = mt_spawn(argv[0], W, dir, limit, pids);
  mt_wait(started, pids, st);
  if (started < W) printf("# only %d of %d ranks could be started\n", started, W);
  /* each rank's log in turn, its TAP lines renumbered */
  int tests = 0, failed = 0;
  for (int r = 0; r < W; r++) {
    char log[600], line[2048], how[96];
    mt_log_path(log, sizeof log, dir, r);
    FILE *fp = r < started ? fopen(log, "r") : NULL;
    while (fp && fgets(line, sizeof line, fp)) {
      if (!strncmp(line, "ok - ", 5)) printf("ok %d - %s", ++tests, line + 5);
      else if (!strncmp(line, "not ok - ", 9)) printf("not ok %d - %s", ++tests, line + 9), failed++;
      else printf("# %s", line);
    }
    if (fp) fclose(fp);
    if (r >= started) {
      printf("not ok %d - rank %d was not started\n", ++tests, r);
      failed++;
    } else if (!WIFEXITED(st[r]) || WEXITSTATUS(st[r]) != 0) {
      printf("not ok %d - rank %d %s\n", ++tests, r, mt_status_text(st[r], how, sizeof how));
      failed++;
    }
  }
  printf("1..%d\n", tests);
  mt_cleanup(dir, W);
  return failed ? 1 : 0;
}
