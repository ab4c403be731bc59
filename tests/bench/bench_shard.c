/* tests/bench/bench_shard.c: bc_shard_cast for the weights of a ~1B-parameter transformer (hidden
 * 2048, MLP 4x, 16 layers: qkv [6144, 2048], proj [2048, 2048], fc1 [8192, 2048], fc2 [2048, 8192]
 * per layer, embedding [50304, 2048]; 0.91B parameters), fp32 master weights partitioned ZeRO-style:
 * the weights concatenated into one flat buffer, split into 8 equal ranges. One rank (rank 3: its
 * range starts and ends inside weights, at odd offsets) casts its shards of all 65 weights (most of
 * them empty) in one call over a one-rank local communicator: the kernels one rank runs per step
 * (the all-reduce of the partial amaxes is a collective, not measured here). Compared, in the same
 * run, with the bandwidth floor of its reads and writes: the shard read once, every code and block
 * scale it owns written once, at the speed of a device-to-device copy. Formats whose codes depend
 * on the tensor's amax (per-tensor current scaling, NVFP4's two levels) cannot cast an element
 * before every rank's amax is known, and the shard (~450 MB) is ~9x the L2: the reads their
 * scaling needs are two, the second floor column counts them. Exactness is proven by
 * tests/27-gpu-shard.c. Median of samples of 10 back-to-back calls.
 *   bench_shard [rank] [--format NAME] [--swizzled]   (default 3; --format: that format's rows only;
 *                                      --swizzled: block scales in the GEMM's swizzled layout)
 *   bench_shard --one FORMAT DIRS   one configuration, two calls, no timing (for ncu / nsys) */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static bc_ctx *ctx;
enum { NW = 65 };
/* the configurations measured, in order */
static const struct {
  const char *name;
  int dirs;
} CFG[] = { { "fp8_e4m3_tensor", 1 }, { "fp8_block_128x128", 1 }, { "fp8_block_1x128", 1 }, { "fp8_block_1x128", 3 }, { "mxfp8_e4m3", 1 },
            { "mxfp8_e4m3", 3 },      { "nvfp4", 3 },             { "nvfp4_2d", 1 },        { "mxfp4", 3 } };

typedef struct run {
  bc_comm *comm;
  int n;
  bc_shard sh[NW];
  bc_qtensor q[NW];
} run;

static int do_cast(int i, void *u) {
  (void)i;
  run *r = u;
  if (bc_shard_cast(ctx, r->comm, r->n, r->sh, r->q, NULL) != BC_OK) {
    printf("# bc_shard_cast: %s\n", bc_last_error(ctx));
    return 1;
  }
  return 0;
}

static void CUDART_CB sleeper(void *ms) { usleep((useconds_t)(uintptr_t)ms * 1000); }

/* GPU time of one call: 5 calls queued behind a host function that holds the stream 40 ms, so the
 * kernels run back to back whatever the host costs (the calls must all be enqueued in time) */
static float gpu_ms(run *r, double *host_ms) {
  enum { N = 5, S = 7 };
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float ms[S];
  double host = 0;
  for (int i = 0; i < S; i++) {
    CK(cudaLaunchHostFunc(0, sleeper, (void *)(uintptr_t)40));
    CK(cudaEventRecord(a, 0));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < N; k++)
      if (do_cast(k, r)) return -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    host += ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / N;
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[i], a, b));
    ms[i] /= N;
  }
  qsort(ms, S, sizeof *ms, cmpf);
  *host_ms = host / S;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[S / 2];
}

int main(int argc, char **argv) {
  gpu_init_or_skip();
  int rank = argc > 1 && strncmp(argv[1], "--", 2) ? atoi(argv[1]) : 3;
  const char *only = NULL;
  int swz = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format") && i + 1 < argc) only = argv[i + 1];
    swz |= !strcmp(argv[i], "--swizzled");
  }
  if (only) {
    int known = 0;
    for (size_t c = 0; c < sizeof CFG / sizeof CFG[0]; c++) known |= !strcmp(CFG[c].name, only);
    if (!known) {
      fprintf(stderr, "bench_shard: --format %s: not one of the benchmark's formats (", only);
      for (size_t c = 0; c < sizeof CFG / sizeof CFG[0]; c++)
        if (!c || strcmp(CFG[c].name, CFG[c - 1].name)) fprintf(stderr, "%s%s", c ? ", " : "", CFG[c].name);
      fprintf(stderr, ")\n");
      return 2;
    }
  }
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) return 1;
  reps = 9;
  int64_t shape[NW][2];
  int n = model_1b(shape);
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += shape[i][0] * shape[i][1];
  const int64_t lo = total / 8 * rank, hi = rank == 7 ? total : total / 8 * (rank + 1);
  /* the rank's shards: [lo, hi) of the flat buffer, per weight */
  int64_t start[NW], len[NW], held = 0, base = 0, nonempty = 0;
  for (int i = 0; i < n; i++) {
    int64_t N = shape[i][0] * shape[i][1], a, b;
    zero_part(lo, hi, base, N, &a, &b);
    start[i] = a, len[i] = b - a;
    held += len[i];
    nonempty += len[i] > 0;
    base += N;
  }
  float *master = dmalloc((size_t)held * 4);
  {
    /* fp32 masters: bf16-like values (random sign, exponents 2^-16 .. 2^7) widened */
    uint16_t *h = malloc((size_t)held * 2);
    fill_bf16(h, (size_t)held, 7);
    uint32_t *hf = malloc((size_t)held * 4);
    for (int64_t k = 0; k < held; k++) hf[k] = (uint32_t)h[k] << 16 | (uint32_t)(k & 0xFFFF);
    CK(cudaMemcpy(master, hf, (size_t)held * 4, cudaMemcpyHostToDevice));
    free(h);
    free(hf);
  }
  float copy_ms;
  double gbs = copy_gbs(&copy_ms);
  printf("# %s; copy %.0f GB/s (read + write) in this run\n", gpu_name(), gbs);
  printf("# ~1B-parameter transformer, %d weights, %lld elements; 8-way ZeRO partition of the flat buffer, rank %d: "
         "[%lld, %lld), %lld elements (%lld weights with a shard), fp32 masters, %s block scales\n",
         n, (long long)total, rank, (long long)lo, (long long)hi, (long long)held, (long long)nonempty, swz ? "swizzled" : "compact");
  printf("| format | directions | bytes (floor) | GPU ms | floor ms | GPU / floor | GPU / floor with the reads its scaling needs | launches per call | host ms per call | wall ms per call (10 back to back) |\n|---|---|---|---|---|---|---|---|---|---|\n");
  bc_comm *comm;
  bc_comm_create_local(ctx, 1, &comm);
  /* --one FORMAT DIRS: that configuration only, two calls and no timing (for a profiler) */
  const char *one = argc > 3 && !strcmp(argv[1], "--one") ? argv[2] : NULL;
  int one_dirs = one ? atoi(argv[3]) : 0;
  for (size_t c = 0; c < sizeof CFG / sizeof CFG[0]; c++) {
    if (one && (strcmp(CFG[c].name, one) || CFG[c].dirs != one_dirs)) continue;
    if (only && strcmp(CFG[c].name, only)) continue;
    const bc_format *f;
    bc_format_get(ctx, CFG[c].name, &f);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    run r;
    memset(&r, 0, sizeof r);
    r.comm = comm, r.n = n;
    void *bufs[NW][4];
    memset(bufs, 0, sizeof bufs);
    double bytes = (double)held * 4;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
      r.sh[i] = (bc_shard){ master + off, BC_FP32, start[i], len[i], 0 };
      off += len[i];
      bc_qtensor *q = &r.q[i];
      const int qswz = swz && info.block != BC_BLOCK_TENSOR; /* per-tensor formats: one scale, no layout */
      *q = (bc_qtensor){ f, shape[i][0], shape[i][1], NULL, NULL, NULL, NULL, NULL, NULL, qswz, 0, 0, 0 };
      for (int d = 0; d < 2; d++) {
        if (!(CFG[c].dirs & (1 << d))) continue;
        bc_qlayout l;
        bc_qtensor_layout(ctx, f, shape[i][0], shape[i][1], d ? BC_COLUMNWISE : BC_ROWWISE, qswz, &l);
        bufs[i][2 * d] = dmalloc(l.data_bytes);
        bufs[i][2 * d + 1] = dmalloc(l.scale_bytes);
        if (d) q->columnwise_data = bufs[i][2], q->columnwise_scale_inv = bufs[i][3];
        else q->rowwise_data = bufs[i][0], q->rowwise_scale_inv = bufs[i][1];
        /* the floor: the rank's codes and its share of the block scales */
        double frac = (double)len[i] / (double)(shape[i][0] * shape[i][1]);
        bytes += (double)len[i] * info.element_bits / 8 + (info.block == BC_BLOCK_TENSOR ? 0 : frac * (double)l.scale_bytes);
      }
      q->amax = dmalloc(4);
      q->scale = dmalloc(4);
    }
    bc_stats s0, s1;
    bc_get_stats(ctx, &s0);
    if (do_cast(0, &r)) return 1;
    CK(cudaDeviceSynchronize());
    bc_get_stats(ctx, &s1);
    if (one) {
      if (do_cast(0, &r)) return 1;
      CK(cudaDeviceSynchronize());
      printf("# %s %d: two calls done, %llu launches each\n", one, one_dirs, (unsigned long long)(s1.launches - s0.launches));
      continue;
    }
    float wall = time_median(do_cast, &r);
    double host = 0;
    float ms = gpu_ms(&r, &host);
    double floor_ms = bytes / (gbs * 1e9) * 1e3;
    /* the tensor amax: a second read of the shard before the cast */
    const int two_reads = info.block == BC_BLOCK_TENSOR || info.two_level;
    double floor2_ms = (bytes + (two_reads ? (double)held * 4 : 0)) / (gbs * 1e9) * 1e3;
    printf("| %s | %s | %.0f MB | %.3f | %.3f | %.2fx | %.2fx | %llu | %.3f | %.3f |\n", CFG[c].name, CFG[c].dirs == 3 ? "both" : "rowwise",
           bytes / 1e6, ms, floor_ms, ms / floor_ms, ms / floor2_ms, (unsigned long long)(s1.launches - s0.launches), host, wall);
    fflush(stdout);
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < 4; k++) cudaFree(bufs[i][k]);
      cudaFree(r.q[i].amax);
      cudaFree(r.q[i].scale);
    }
  }
  bc_comm_destroy(comm);
  cudaFree(master);
  bc_ctx_destroy(ctx);
  return 0;
}
