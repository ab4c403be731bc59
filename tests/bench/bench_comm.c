/* tests/bench/bench_comm.c: the quantized all-gather on one GPU over the local transport (W rank
 * threads, each with its own stream), against what it is made of, measured in the same run:
 *   gather   W ranks x bc_all_gather of their [m, K] bf16 rows (all on this GPU: every rank's
 *            quantize, the copies of the pieces it receives, the boundary exchange and the
 *            assembly of its output);
 *   floor    the same work without the collective's own steps: W x bc_quantize of [m, K] (the
 *            directions that travel) + the device copies of the bytes each rank receives;
 * so gather / floor is what staging, assembling (scales, transposed columnwise data, the
 * columnwise copy built locally) and the host rendezvous add. The output is first compared with
 * bc_quantize of the whole tensor. Median of `reps` samples of `iters` calls.
 *   bench_comm [W m K]   (default 2 8192 8192) */
#include <pthread.h>
#include <string.h>

#include "gpu.h"
#include "testdata.h"

static bc_ctx *ctx;
enum { ITERS = 10, REPS = 7 };

typedef struct rank {
  int r, W;
  bc_comm *comm;
  bc_tensor x;
  const int64_t *rows;
  bc_qtensor q;
  cudaStream_t st;
  cudaEvent_t a, b;
  pthread_barrier_t *bar;
  float ms[REPS];
  bc_status s;
} rank;

static void *rank_main(void *p) {
  rank *k = p;
  cudaSetDevice(0);
  for (int rep = 0; rep < REPS && k->s == BC_OK; rep++) {
    pthread_barrier_wait(k->bar);
    CK(cudaEventRecord(k->a, k->st));
    for (int i = 0; i < ITERS && k->s == BC_OK; i++) k->s = bc_all_gather(ctx, k->comm, &k->x, k->rows, &k->q, k->st);
    CK(cudaEventRecord(k->b, k->st));
    CK(cudaEventSynchronize(k->b));
    pthread_barrier_wait(k->bar);
    CK(cudaEventElapsedTime(&k->ms[rep], k->a, k->b));
  }
  return NULL;
}

static int cmpf(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static float median(float *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmpf);
  return v[n / 2];
}

typedef struct bufs {
  void *rd, *rs, *cd, *cs;
  float *amax, *scale;
} bufs;

static void alloc_q(const bc_format *f, int64_t M, int64_t K, int dirs, bufs *b, bc_qtensor *q) {
  memset(b, 0, sizeof *b);
  bc_qlayout l;
  if (dirs & 1) {
    bc_qtensor_layout(ctx, f, M, K, BC_ROWWISE, 0, &l);
    b->rd = dmalloc(l.data_bytes);
    b->rs = dmalloc(l.scale_bytes);
  }
  if (dirs & 2) {
    bc_qtensor_layout(ctx, f, M, K, BC_COLUMNWISE, 0, &l);
    b->cd = dmalloc(l.data_bytes);
    b->cs = dmalloc(l.scale_bytes);
  }
  b->amax = dmalloc(4);
  b->scale = dmalloc(4);
  *q = (bc_qtensor){ f, M, K, b->rd, b->rs, b->cd, b->cs, b->amax, b->scale, 0, 0, 0, 0 };
}

static void free_q(bufs *b) {
  cudaFree(b->rd); cudaFree(b->rs); cudaFree(b->cd); cudaFree(b->cs); cudaFree(b->amax); cudaFree(b->scale);
}

static int same(const bc_qtensor *a, const bc_qtensor *b, const bc_format *f, int dirs) {
  int good = 1;
  for (int d = 0; d < 2; d++) {
    if (!(dirs & (1 << d))) continue;
    bc_qlayout l;
    bc_qtensor_layout(ctx, f, a->rows, a->cols, d ? BC_COLUMNWISE : BC_ROWWISE, 0, &l);
    size_t n[2] = { l.data_bytes, l.scale_bytes };
    const void *pa[2] = { d ? a->columnwise_data : a->rowwise_data, d ? a->columnwise_scale_inv : a->rowwise_scale_inv };
    const void *pb[2] = { d ? b->columnwise_data : b->rowwise_data, d ? b->columnwise_scale_inv : b->rowwise_scale_inv };
    for (int j = 0; j < 2; j++) {
      uint8_t *ha = malloc(n[j]), *hb = malloc(n[j]);
      CK(cudaMemcpy(ha, pa[j], n[j], cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hb, pb[j], n[j], cudaMemcpyDeviceToHost));
      good &= first_diff_report(j ? "scales" : "data", ha, hb, n[j]);
      free(ha);
      free(hb);
    }
  }
  return good;
}

static void one(const char *fname, int dirs, int W, int64_t m, int64_t K, void *d_full) {
  const bc_format *f;
  if (bc_format_get(ctx, fname, &f) != BC_OK) return;
  int64_t M = m * W, rows[64];
  for (int r = 0; r < W; r++) rows[r] = m;
  bc_comm *comms[64];
  bc_comm_create_local(ctx, W, comms);
  rank k[64];
  bufs ob[64];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)W);
  for (int r = 0; r < W; r++) {
    memset(&k[r], 0, sizeof k[r]);
    k[r].r = r;
    k[r].W = W;
    k[r].comm = comms[r];
    k[r].x = (bc_tensor){ (char *)d_full + (size_t)(r * m * K) * 2, BC_BF16, m, K, 0 };
    k[r].rows = rows;
    k[r].bar = &bar;
    alloc_q(f, M, K, dirs, &ob[r], &k[r].q);
    CK(cudaStreamCreateWithFlags(&k[r].st, cudaStreamNonBlocking));
    CK(cudaEventCreate(&k[r].a));
    CK(cudaEventCreate(&k[r].b));
  }
  /* validate: rank 0's output against the whole tensor quantized */
  bufs rb;
  bc_qtensor ref;
  alloc_q(f, M, K, dirs, &rb, &ref);
  bc_tensor xf = { d_full, BC_BF16, M, K, 0 };
  bc_quantize(ctx, &xf, &ref, NULL);
  pthread_t th[64];
  for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, rank_main, &k[r]);
  for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
  CK(cudaDeviceSynchronize());
  if (k[0].s != BC_OK) {
    printf("%s: bc_all_gather failed: %s\n", fname, bc_last_error(ctx));
    return;
  }
  int good = same(&k[0].q, &ref, f, dirs);
  float gather = 0;
  for (int r = 0; r < W; r++) {
    float med = median(k[r].ms, REPS) / ITERS;
    if (med > gather) gather = med;
  }
  /* the floor: W local quantizes (directions that travel: rowwise for per-tensor / 2D) and the
   * copies of each rank's received bytes */
  bc_format_info info;
  bc_format_get_info(ctx, f, &info);
  int tdirs = info.block == BC_BLOCK_1D ? dirs : 1;
  bufs lb;
  bc_qtensor lq;
  alloc_q(f, m, K, tdirs, &lb, &lq);
  uint64_t sent = 0;
  bc_all_gather_bytes(ctx, f, W, rows, K, dirs, 0, &sent);
  void *cbuf = dmalloc((size_t)sent * (size_t)W);
  cudaStream_t s0;
  CK(cudaStreamCreate(&s0));
  cudaEvent_t ea, eb;
  CK(cudaEventCreate(&ea));
  CK(cudaEventCreate(&eb));
  float fl[REPS];
  for (int rep = 0; rep < REPS; rep++) {
    CK(cudaEventRecord(ea, s0));
    for (int i = 0; i < ITERS; i++)
      for (int r = 0; r < W; r++) {
        bc_tensor xr = k[r].x;
        bc_quantize(ctx, &xr, &lq, s0);
        for (int q = 0; q < W; q++)
          if (q != r) CK(cudaMemcpyAsync((char *)cbuf + (size_t)q * sent, (char *)cbuf + (size_t)r * sent, sent, cudaMemcpyDeviceToDevice, s0));
      }
    CK(cudaEventRecord(eb, s0));
    CK(cudaEventSynchronize(eb));
    CK(cudaEventElapsedTime(&fl[rep], ea, eb));
  }
  float floor_ms = median(fl, REPS) / ITERS;
  const char *dn[] = { "", "rowwise", "columnwise", "both" };
  printf("| %s | %s | %d | %lldx%lld | %s | %.3f | %.3f | %.2fx |\n", fname, dn[dirs], W, (long long)m, (long long)K,
         good ? "exact" : "MISMATCH", gather, floor_ms, gather / floor_ms);
  fflush(stdout);
  for (int r = 0; r < W; r++) {
    free_q(&ob[r]);
    cudaStreamDestroy(k[r].st);
    bc_comm_destroy(comms[r]);
  }
  free_q(&rb);
  free_q(&lb);
  cudaFree(cbuf);
  cudaStreamDestroy(s0);
  pthread_barrier_destroy(&bar);
}

int main(int argc, char **argv) {
  gpu_init_or_skip();
  int W = argc > 1 ? atoi(argv[1]) : 2;
  int64_t m = argc > 2 ? atoll(argv[2]) : 8192, K = argc > 3 ? atoll(argv[3]) : 8192;
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) return 1;
  size_t n = (size_t)(m * W * K);
  uint16_t *h = malloc(n * 2);
  fill(h, BC_BF16, n, 0);
  void *d = dmalloc(n * 2);
  CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
  free(h);
  printf("# %s; local transport, %d ranks on this GPU, bf16 [%lld x %lld] per rank; ms per call (all ranks' work)\n", gpu_name(), W,
         (long long)m, (long long)K);
  printf("| format | directions | W | rows x cols per rank | check | gather ms | floor ms | gather / floor |\n|---|---|---|---|---|---|---|---|\n");
  const char *fmts[] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "fp8_block_1x128", "fp8_block_128x128", "mxfp4", "nvfp4", "nvfp4_2d" };
  for (int i = 0; i < 7; i++)
    for (int dirs = 1; dirs <= 3; dirs++) one(fmts[i], dirs, W, m, K, d);
  cudaFree(d);
  bc_ctx_destroy(ctx);
  return 0;
}
