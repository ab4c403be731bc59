/* bench_fp8_tensor: FP8 per-tensor quantize bandwidth on the GPU, beside a device-to-device copy
 * measured in the same run. Each variant is validated against the CPU reference first, then timed
 * with CUDA events: each sample is a batch of BATCH back-to-back launches (as in a training step,
 * so the launch latency of one call is not counted as kernel time), inputs rotated over 3
 * buffers; the median sample is reported. The copy is timed the same way.
 *   bench_fp8_tensor [--format fp8_e4m3_tensor] [--reps N] [--out results.md] [--only SUBSTRING] [--shapes 1..3]
 *                    [--ragged]
 * --ragged: the shapes 8192x8192, 8191x8192, 8192x8193 and 8191x8193 (aligned, M-, K-, both ragged).
 * Bytes counted: the input read once + every output written once (scale/amax not counted). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockcast.h"
#include "gpu.h"
#include "bench.h"

static bc_ctx *ctx;
typedef struct q_arg {
  const bc_format *f;
  bc_tensor x[3];
  bc_qtensor q;
  int mode; /* 0 cast, 1 full quantize (amax+scale+cast), 2 amax only, 3 dequantize rowwise -> bf16 */
  bc_tensor deq;
} q_arg;

static int do_q(int i, void *u) {
  q_arg *a = u;
  bc_status s;
  if (a->mode == 0) s = bc_quantize_cast(ctx, &a->x[i % 3], &a->q, NULL);
  else if (a->mode == 1) s = bc_quantize(ctx, &a->x[i % 3], &a->q, NULL);
  else if (a->mode == 2) s = bc_amax(ctx, &a->x[i % 3], a->q.amax, NULL);
  else s = bc_dequantize(ctx, &a->q, BC_ROWWISE, &a->deq, NULL);
  if (s != BC_OK) { printf("# %s: %s\n", bc_status_string(s), bc_last_error(ctx)); return 1; }
  return 0;
}

/* validate a full quantize (both directions) and the cast kernels of each direction against the
 * reference, and the rowwise dequantize */
static int validate(const bc_format *f, int64_t M, int64_t K, void *d_in, uint16_t *h_in) {
  size_t n = (size_t)(M * K);
  uint8_t *d_row = dmalloc(n), *d_col = dmalloc(n);
  float *fl = dmalloc(16);
  uint8_t *g = malloc(n), *r_row = malloc(n), *r_col = malloc(n);
  float rf[4], gf[4];
  int good = 1;
  for (int dirs = 1; dirs <= 3; dirs++) {
    CK(cudaMemset(d_row, 0xA5, n));
    CK(cudaMemset(d_col, 0xA5, n));
    CK(cudaMemset(fl, 0xA5, 16));
    bc_tensor x = { d_in, BC_BF16, M, K, 0 }, hx = { h_in, BC_BF16, M, K, 0 };
    bc_qtensor q = { f, M, K, dirs & 1 ? d_row : NULL, fl, dirs & 2 ? d_col : NULL, fl + 1, fl + 2, fl + 3, 0, 0, 0, 0 };
    bc_qtensor hq = { f, M, K, dirs & 1 ? r_row : NULL, rf, dirs & 2 ? r_col : NULL, rf + 1, rf + 2, rf + 3, 0, 0, 0, 0 };
    if (bc_quantize(ctx, &x, &q, NULL) != BC_OK) { printf("# %s\n", bc_last_error(ctx)); return 0; }
    CK(cudaDeviceSynchronize());
    bc_ref_quantize(ctx, &hx, &hq);
    CK(cudaMemcpy(gf, fl, 16, cudaMemcpyDeviceToHost));
    good &= memcmp(&gf[2], &rf[2], 8) == 0;
    if (dirs & 1) { CK(cudaMemcpy(g, d_row, n, cudaMemcpyDeviceToHost)); good &= memcmp(g, r_row, n) == 0 && gf[0] == rf[0]; }
    if (dirs & 2) { CK(cudaMemcpy(g, d_col, n, cudaMemcpyDeviceToHost)); good &= memcmp(g, r_col, n) == 0 && gf[1] == rf[1]; }
    /* the dequantize variant timed below: rowwise -> bf16 */
    if (dirs == 3 && good) good &= dequantize_matches(ctx, &q, &hq, BC_ROWWISE, M, K);
  }
  cudaFree(d_row); cudaFree(d_col); cudaFree(fl);
  free(g); free(r_row); free(r_col);
  return good;
}

int main(int argc, char **argv) {
  const char *fname = "fp8_e4m3_tensor", *out = NULL, *only = NULL;
  int max_shapes = 3, ragged = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format") && i + 1 < argc) fname = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) max_shapes = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ragged")) ragged = 1;
    else {
      fprintf(stderr, "usage: bench_fp8_tensor [--format NAME] [--reps N] [--out FILE] [--only SUBSTRING] [--shapes 1..3] [--ragged]\n");
      return 2;
    }
  }
  if (reps < 5) reps = 5;
  if (!gpu_available()) { printf("no CUDA device: nothing to measure\n"); return 0; }
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("%s\n", err); return 1; }
  const bc_format *f;
  if (bc_format_get(ctx, fname, &f) != BC_OK) { printf("%s\n", bc_last_error(ctx)); return 1; }

  /* the copy: 1 GiB each way */
  float cms;
  double copy = copy_gbs(&cms);

  char line[512];
  FILE *o = out ? fopen(out, "w") : NULL;
#define EMIT(...) do { snprintf(line, sizeof line, __VA_ARGS__); fputs(line, stdout); if (o) fputs(line, o); } while (0)
  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  EMIT("# bench_fp8_tensor: %s, %s, %s\n\n", fname, gpu_name(), date);
  EMIT("device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (bytes read + written)\n", cms, copy);
  EMIT("timing: median of %d samples, each %d back-to-back launches; bytes = input once + each output once\n\n", reps, BATCH);
  EMIT("| variant | shape | time (us) | GB/s | %% of copy | validated |\n|---|---|---|---|---|---|\n");

  int64_t shapes[4][2] = { { 8192, 8192 }, { 8191, 8193 }, { 16384, 16384 }, { 0, 0 } };
  int nshapes = 3;
  if (ragged) { /* aligned, M-ragged, K-ragged, both */
    int64_t rs[4][2] = { { 8192, 8192 }, { 8191, 8192 }, { 8192, 8193 }, { 8191, 8193 } };
    memcpy(shapes, rs, sizeof rs);
    nshapes = max_shapes = 4;
  }
  int all_valid = 1;
  if (getenv("BLOCKCAST_TUNING")) EMIT("tuning override: %s\n\n", getenv("BLOCKCAST_TUNING"));
  for (int si = 0; si < nshapes && si < max_shapes; si++) {
    int64_t M = shapes[si][0], K = shapes[si][1];
    size_t n = (size_t)(M * K);
    uint16_t *h = malloc(n * 2);
    q_arg a;
    memset(&a, 0, sizeof a);
    a.f = f;
    void *bufs[3];
    for (int b = 0; b < 3; b++) {
      fill_bf16(h, n, 0x1234567ull + (uint64_t)b);
      bufs[b] = dmalloc(n * 2);
      CK(cudaMemcpy(bufs[b], h, n * 2, cudaMemcpyHostToDevice));
      a.x[b] = (bc_tensor){ bufs[b], BC_BF16, M, K, 0 };
    }
    /* h holds buffer 2's data */
    int valid = si == 2 ? -1 : validate(f, M, K, bufs[2], h);
    if (valid == 0) all_valid = 0;
    const char *vs = valid < 0 ? "(same kernels as above)" : valid ? "bit-exact" : "MISMATCH";
    uint8_t *row = dmalloc(n), *col = dmalloc(n);
    float *fl = dmalloc(16);
    float one = 1.0f;
    CK(cudaMemcpy(fl + 3, &one, 4, cudaMemcpyHostToDevice));
    struct { const char *name; int mode, dirs; double bytes; } vars[] = {
      { "cast rowwise", 0, 1, 3.0 * n }, { "cast columnwise", 0, 2, 3.0 * n }, { "cast both", 0, 3, 4.0 * n },
      { "quantize rowwise (amax+scale+cast)", 1, 1, 3.0 * n }, { "quantize columnwise (amax+scale+cast)", 1, 2, 3.0 * n },
      { "quantize both (amax+scale+cast)", 1, 3, 4.0 * n }, { "amax", 2, 0, 2.0 * n },
      { "dequantize rowwise -> bf16", 3, 1, 3.0 * n },
    };
    void *deq = dmalloc(n * 2);
    for (size_t v = 0; v < sizeof vars / sizeof *vars; v++) {
      if (only && !strstr(vars[v].name, only)) continue;
      a.mode = vars[v].mode;
      a.q = (bc_qtensor){ f, M, K, vars[v].dirs & 1 ? row : NULL, fl, vars[v].dirs & 2 ? col : NULL, fl + 1, fl + 2, fl + 3, 0, 0, 0, 0 };
      if (a.mode == 3) { a.q.rowwise_data = row; a.deq = (bc_tensor){ deq, BC_BF16, M, K, 0 }; }
      float ms = time_median(do_q, &a);
      if (ms < 0) { all_valid = 0; continue; }
      double gbs = vars[v].bytes / (ms * 1e-3) / 1e9;
      EMIT("| %s | %lldx%lld bf16 | %.1f | %.0f | %.1f%% | %s |\n", vars[v].name, (long long)M, (long long)K, ms * 1e3, gbs,
           100.0 * gbs / copy, vs);
    }
    cudaFree(deq); cudaFree(row); cudaFree(col); cudaFree(fl);
    for (int b = 0; b < 3; b++) cudaFree(bufs[b]);
    free(h);
  }
  bc_stats st;
  bc_get_stats(ctx, &st);
  EMIT("\nkernels: %llu loaded, %llu from the AOT set, %llu NVRTC compiles\n", (unsigned long long)st.kernels_loaded,
       (unsigned long long)st.aot_hits, (unsigned long long)st.nvrtc_compiles);
  if (o) fclose(o);
  bc_ctx_destroy(ctx);
  return all_valid ? 0 : 1;
}
