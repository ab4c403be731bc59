/* bench_list: list calls on 1,000 tensors shaped like a transformer's weights and activations,
 * against the same work as one loop of single calls and as one kernel over a single tensor of
 * the same total size ([ceil(total / 4096), 4096]).
 *   bench_list [--reps N] [--case I[,I...]]
 * --case runs only the listed rows of the table (0-based, in the table's order; for profiling one
 * list with ncu).
 * The list: 8 x 4096x4096, 4 x 4096x11008, 4 x 11008x4096, 328 x 4096x1, 328 x 1x4096,
 * 328 x 64x64, bf16 (4-bit formats: 4096x2 instead of 4096x1, which they cannot hold).
 * Per family and format:
 *   launches   bc_stats.launches of one list call and of the loop;
 *   host       the host time of one list call (clock, the call only; it does not wait for the
 *              GPU), medians of 21, fitted as a + b n over the first 10 and all 1000 tensors of
 *              the list: b per tensor, a per call; and the loop's host time per tensor;
 *   device     GPU time alone: the calls are queued behind a blocker (memsets long enough that
 *              the host has enqueued everything before the GPU reaches the first event), so a
 *              slow host does not show as device time; median of 7 samples of 5 calls;
 *   wall       the median time of a batch of back-to-back calls (tests/bench/bench.h): what a
 *              training step sees when the host issues the calls as fast as it can.
 * Before timing, the list call's output is compared byte for byte with the loop's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockcast.h"
#include "gpu.h"
#include "bench.h"
#include "host_timing.h"

static bc_ctx *ctx;

#define N 1000

typedef struct job {
  int family; /* 0 amax, 1 quantize, 2 quantize_cast, 3 dequantize rowwise */
  int64_t n;
  bc_tensor *x, *deq;
  bc_qtensor *q;
  float *amax;
  int mode; /* 0 list, 1 loop */
} job;

static int run(int i, void *u) {
  job *j = u;
  bc_status s = BC_OK;
  (void)i;
  if (j->mode == 0) {
    if (j->family == 0) s = bc_amax_list(ctx, j->n, j->x, j->amax, NULL);
    else if (j->family == 1) s = bc_quantize_list(ctx, j->n, j->x, j->q, NULL);
    else if (j->family == 2) s = bc_quantize_cast_list(ctx, j->n, j->x, j->q, NULL);
    else s = bc_dequantize_list(ctx, j->n, j->q, BC_ROWWISE, j->deq, NULL);
  } else {
    for (int64_t k = 0; k < j->n && s == BC_OK; k++) {
      if (j->family == 0) s = bc_amax(ctx, &j->x[k], j->amax + k, NULL);
      else if (j->family == 1) s = bc_quantize(ctx, &j->x[k], &j->q[k], NULL);
      else if (j->family == 2) s = bc_quantize_cast(ctx, &j->x[k], &j->q[k], NULL);
      else s = bc_dequantize(ctx, &j->q[k], BC_ROWWISE, &j->deq[k], NULL);
    }
  }
  if (s != BC_OK) {
    printf("# %s: %s\n", bc_status_string(s), bc_last_error(ctx));
    return 1;
  }
  return 0;
}

/* device arena for one list: inputs, outputs and scales of every tensor; *single the same for
 * one [R, 4096] tensor */
typedef struct setup {
  int64_t n;
  bc_tensor x[N], deq[N];
  bc_qtensor q[N];
  float *amax;
  size_t out_bytes;
  char *out;
  int64_t total;
} setup;

static size_t al(size_t v) { return (v + 255) / 256 * 256; }

/* the blocker: memsets of a 1 GiB buffer */
static void *blk;
static float blk_ms;
static void blocker(int k) {
  for (int i = 0; i < k; i++) CK(cudaMemsetAsync(blk, i & 0xFF, (size_t)1 << 30, 0));
}

/* GPU time of one call, the calls queued behind a blocker longer than their host time */
static float time_queued(op_fn fn, void *u) {
  enum { S = 7, B = 5 };
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaDeviceSynchronize());
  double t0 = now_ms();
  for (int k = 0; k < B; k++) if (fn(k, u)) return -1;
  double host = now_ms() - t0;
  CK(cudaDeviceSynchronize());
  int nb = (int)(2.0 * host / blk_ms) + 2;
  float ms[S];
  for (int i = 0; i < S; i++) {
    blocker(nb);
    CK(cudaEventRecord(a, 0));
    for (int k = 0; k < B; k++) if (fn(k, u)) return -1;
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[i], a, b));
    ms[i] /= B;
  }
  qsort(ms, S, sizeof *ms, cmpf);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms[S / 2];
}

/* one call of j and the kernel launches it made (bc_stats.launches); -1 on failure */
static int64_t run_counted(job *j) {
  bc_stats a, b;
  bc_get_stats(ctx, &a);
  if (run(0, j)) return -1;
  bc_get_stats(ctx, &b);
  return (int64_t)(b.launches - a.launches);
}

static double host_median(job *j) {
  double h[21];
  for (int r = 0; r < 21; r++) {
    CK(cudaDeviceSynchronize());
    double t0 = now_ms();
    run(0, j);
    h[r] = now_ms() - t0;
  }
  CK(cudaDeviceSynchronize());
  qsort(h, 21, sizeof(double), cmpd);
  return h[10];
}

static void build(setup *S, const bc_format *f, int rowcol, int64_t n, const int64_t (*shape)[2], char *in) {
  bc_format_info fi;
  bc_format_get_info(ctx, f, &fi);
  S->n = n;
  size_t off = 0, ioff = 0;
  S->total = 0;
  for (int pass = 0; pass < 2; pass++) {
    off = 0;
    ioff = 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t r = shape[i][0], c = shape[i][1];
      bc_qlayout L[2];
      bc_qtensor_layout(ctx, f, r, c, BC_ROWWISE, 0, &L[0]);
      if (rowcol) bc_qtensor_layout(ctx, f, r, c, BC_COLUMNWISE, 0, &L[1]);
      if (pass) {
        S->x[i] = (bc_tensor){ in + ioff, BC_BF16, r, c, 0 };
        memset(&S->q[i], 0, sizeof S->q[i]);
        S->q[i].format = f;
        S->q[i].rows = r;
        S->q[i].cols = c;
        S->q[i].rowwise_data = S->out + off;
        S->q[i].rowwise_scale_inv = S->out + off + al(L[0].data_bytes);
        if (rowcol) {
          S->q[i].columnwise_data = S->out + off + al(L[0].data_bytes) + al(L[0].scale_bytes);
          S->q[i].columnwise_scale_inv = (char *)S->q[i].columnwise_data + al(L[1].data_bytes);
        }
        S->q[i].amax = S->amax + i;
        S->q[i].scale = S->amax + n + i;
        S->deq[i] = (bc_tensor){ S->out + off + al(L[0].data_bytes) + al(L[0].scale_bytes) +
                                     (rowcol ? al(L[1].data_bytes) + al(L[1].scale_bytes) : 0), BC_BF16, r, c, 0 };
      } else {
        S->total += r * c;
      }
      off += al(L[0].data_bytes) + al(L[0].scale_bytes) + (rowcol ? al(L[1].data_bytes) + al(L[1].scale_bytes) : 0) +
             al((size_t)(r * c) * 2);
      ioff += al((size_t)(r * c) * 2);
    }
    if (!pass) {
      S->out_bytes = off;
      S->out = dmalloc(off);
      S->amax = dmalloc((size_t)n * 8);
      float one = 1.0f;
      for (int64_t i = 0; i < 2 * n; i++) CK(cudaMemcpy(S->amax + i, &one, 4, cudaMemcpyHostToDevice));
    }
  }
}

static void teardown(setup *S) {
  CK(cudaFree(S->out));
  CK(cudaFree(S->amax));
}

int main(int argc, char **argv) {
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--case") && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "bench_list: unknown argument '%s' (expected --reps N, --case I[,I...])\n", argv[i]);
      return 2;
    }
  }
  gpu_init_or_skip();
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) return 1;
  printf("# bench_list on %s, %d tensors, bf16; device times are medians of %d batches of %d calls\n", gpu_name(), N, reps, BATCH);
  static int64_t shape8[N][2], shape4[N][2];
  int k = 0;
  const struct { int count; int64_t r, c; } mix[] = { { 8, 4096, 4096 }, { 4, 4096, 11008 }, { 4, 11008, 4096 },
                                                     { 328, 4096, 1 }, { 328, 1, 4096 }, { 328, 64, 64 } };
  for (int m = 0; m < 6; m++)
    for (int j = 0; j < mix[m].count; j++, k++) {
      /* interleave the big ones among the small (a list in model order) */
      shape8[k][0] = shape4[k][0] = mix[m].r;
      shape8[k][1] = shape4[k][1] = mix[m].c;
      if (mix[m].c == 1) shape4[k][1] = 2;
    }
  int64_t total = 0, total4 = 0;
  for (int i = 0; i < N; i++) total += shape8[i][0] * shape8[i][1], total4 += shape4[i][0] * shape4[i][1];
  if (total4 > total) total = total4;
  char *in = dmalloc((size_t)total * 2 + (size_t)N * 256 + 4096 * 16);
  {
    size_t nb = (size_t)total + (size_t)N * 128 + 4096 * 8;
    uint16_t *h = malloc(nb * 2);
    fill_bf16(h, nb, 7);
    CK(cudaMemcpy(in, h, nb * 2, cudaMemcpyHostToDevice));
    free(h);
  }
  float copy_ms;
  double gbs = copy_gbs(&copy_ms);
  printf("# device-to-device copy: %.0f GB/s (1 GiB in %.3f ms)\n", gbs, copy_ms);
  blk = dmalloc((size_t)1 << 30);
  {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    blocker(1);
    CK(cudaEventRecord(a, 0));
    blocker(4);
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&blk_ms, a, b));
    blk_ms /= 4;
  }
  printf("# total %lld elements (%.2f GB bf16); blocker: 1 GiB memset %.3f ms\n\n", (long long)total, (double)total * 2 / 1e9, blk_ms);
  printf("| family | format | launches list / loop | host list: us per tensor + us per call | host loop: us per tensor | "
         "device ms list | loop | single tensor | list / single | loop / list | wall ms list | loop |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  /* big 1: only the 16 large tensors of the list (the list machinery without the skinny shapes,
   * whose tiles are mostly empty in the block kernels); 2: only the 984 others; 3: a list of one
   * tensor, the single tensor of big 1 (the list kernel against its single kernel on the same
   * shape, without the mix) */
  const struct { int family; const char *fmt; int rowcol, big; } cases[] = {
    { 0, "fp8_e4m3_tensor", 0, 0 }, { 1, "fp8_e4m3_tensor", 0, 0 }, { 2, "fp8_e4m3_tensor", 0, 0 }, { 1, "fp8_e4m3_tensor", 1, 0 },
    { 1, "mxfp8_e4m3", 0, 0 }, { 1, "mxfp8_e4m3", 1, 0 }, { 1, "fp8_block_1x128", 0, 0 }, { 1, "nvfp4", 0, 0 }, { 2, "nvfp4", 0, 0 },
    { 1, "mxfp4", 0, 0 }, { 3, "mxfp8_e4m3", 0, 0 }, { 3, "fp8_e4m3_tensor", 0, 0 }, { 3, "nvfp4", 0, 0 },
    { 2, "fp8_e4m3_tensor", 0, 1 }, { 1, "mxfp8_e4m3", 0, 1 }, { 2, "nvfp4", 0, 1 }, { 3, "mxfp8_e4m3", 0, 1 },
    { 2, "fp8_e4m3_tensor", 0, 2 }, { 1, "mxfp8_e4m3", 0, 2 }, { 2, "nvfp4", 0, 2 }, { 3, "mxfp8_e4m3", 0, 2 },
    { 2, "fp8_e4m3_tensor", 0, 3 }, { 1, "mxfp8_e4m3", 0, 3 }, { 2, "nvfp4", 0, 3 }, { 3, "mxfp8_e4m3", 0, 3 },
  };
  int failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    if (only) {
      int hit = 0;
      for (const char *p = only; *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
        if (atoi(p) == (int)c) hit = 1;
      if (!hit) continue;
    }
    const bc_format *f;
    if (bc_format_get(ctx, cases[c].fmt, &f) != BC_OK) { printf("# no format %s\n", cases[c].fmt); continue; }
    bc_format_info fi;
    bc_format_get_info(ctx, f, &fi);
    int four = fi.element_bits == 4;
    static setup L, S1;
    const int n = cases[c].big == 1 ? 16 : cases[c].big == 2 ? N - 16 : cases[c].big == 3 ? 1 : N;
    const int64_t(*shp)[2] = four ? (const int64_t(*)[2])shape4 : (const int64_t(*)[2])shape8;
    int64_t big1[1][2] = { { 0, 4096 } };
    if (cases[c].big == 3) {
      int64_t t = 0;
      for (int i = 0; i < 16; i++) t += shp[i][0] * shp[i][1];
      big1[0][0] = (t + 4095) / 4096;
      shp = (const int64_t(*)[2])big1;
    }
    build(&L, f, cases[c].rowcol, n, cases[c].big == 2 ? shp + 16 : shp, in);
    int64_t srows = (L.total + 4095) / 4096;
    int64_t one[1][2] = { { srows, 4096 } };
    build(&S1, f, cases[c].rowcol, 1, (const int64_t(*)[2])one, in);
    job jl = { cases[c].family, n, L.x, L.deq, L.q, L.amax, 0 };
    job jo = jl;
    jo.mode = 1;
    job js = { cases[c].family, 1, S1.x, S1.deq, S1.q, S1.amax, 1 }; /* the single call */
    /* the quantized data the dequantize reads, and the check: list output == loop output */
    if (cases[c].family == 3) {
      job prep = jl;
      prep.family = 1;
      run(0, &prep);
      prep.q = S1.q;
      prep.x = S1.x;
      prep.n = 1;
      run(0, &prep);
    }
    char *copy = malloc(L.out_bytes), *copy2 = malloc(L.out_bytes);
    int64_t nl = run_counted(&jl);
    if (nl < 0) return 1;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(copy, L.out, L.out_bytes, cudaMemcpyDeviceToHost));
    float *am1 = malloc(N * 8), *am2 = malloc(N * 8);
    CK(cudaMemcpy(am1, L.amax, (size_t)n * 8, cudaMemcpyDeviceToHost));
    int64_t no = run_counted(&jo);
    if (no < 0) return 1;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(copy2, L.out, L.out_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(am2, L.amax, (size_t)n * 8, cudaMemcpyDeviceToHost));
    int same = memcmp(copy, copy2, L.out_bytes) == 0 && memcmp(am1, am2, (size_t)n * 8) == 0;
    free(copy);
    free(copy2);
    free(am1);
    free(am2);
    if (!same) {
      printf("# %s %s: the list's output differs from the loop's\n", cases[c].fmt, cases[c].rowcol ? "rowcol" : "row");
      failed = 1;
    }
    /* host time of one call (the GPU drains between them): the first 10 tensors and all */
    job j10 = jl;
    j10.n = n < 10 ? n : 10;
    double h10 = host_median(&j10), hN = host_median(&jl), hO = host_median(&jo);
    double per = (hN - h10) / (n - 10), fixed = h10 - 10 * per;
    float tl = time_queued(run, &jl), to = time_queued(run, &jo), ts = time_queued(run, &js);
    float wl = time_median(run, &jl), wo = time_median(run, &jo);
    static const char *const fam[] = { "amax", "quantize", "quantize_cast", "dequantize" };
    char host[64] = "(see the full list)";
    if (n == N) snprintf(host, sizeof host, "%.3f + %.1f", per * 1e3, fixed * 1e3); /* the fit needs n >> 10 */
    printf("| %s%s%s | %s | %llu / %llu | %s | %.3f | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.3f | %.3f |\n",
           fam[cases[c].family], cases[c].family == 0 ? "" : cases[c].family == 3 ? " row" : cases[c].rowcol ? " rowcol" : " row",
           cases[c].big == 1 ? " (16 large only)" : cases[c].big == 2 ? " (984 small only)" : cases[c].big == 3 ? " (a list of one)" : "", cases[c].fmt, (unsigned long long)nl,
           (unsigned long long)no, host, hO * 1e3 / n, tl, to, ts, tl / ts, to / tl, wl, wo);
    fflush(stdout);
    teardown(&L);
    teardown(&S1);
  }
  CK(cudaFree(in));
  CK(cudaFree(blk));
  bc_ctx_destroy(ctx);
  return failed;
}
