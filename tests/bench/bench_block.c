/* bench_block: block-scaled quantize / dequantize bandwidth on the GPU for every block format,
 * beside a device-to-device copy measured in the same run (tests/bench/bench.h: medians of
 * batches of back-to-back launches). Every format x direction is first validated bit-exact
 * against the CPU reference (data and scales, and the dequantize of each) on a ragged bf16 shape; then timed at 8192x8192,
 * 8191x8193 (8190x8194 for 4-bit formats, which need even sizes; 8188x8196 for 6-bit, multiples of
 * 4) and 16384x16384 bf16.
 *   bench_block [--format NAME] [--reps N] [--out FILE] [--shapes 1..3] [--size N] [--quantize-only] [--profile]
 *               [--dtype bf16|fp32] [--ragged] [--swizzled]
 * --size N: the one shape NxN instead of the list; --quantize-only: no dequantize variants (tuning
 * sweeps); --profile: no validation and no timing, each variant launched once per shape (for ncu);
 * --dtype fp32: fp32 inputs (the same values; the copy's bytes and the dequantize output stay).
 * --ragged: the shapes 8192x8192, M-ragged x 8192, 8192 x K-ragged and both ragged (the ragged
 * sizes above), for the ragged-vs-aligned comparison. --swizzled: block scales in the 128x4 layout
 * GEMMs read (bc_qtensor.scale_swizzled) instead of the compact one.
 * Bytes counted: the input read once + every output (data and scales) written once; for
 * dequantize the data and scales read + the bf16 output. Two-level formats (NVFP4) are timed as
 * the cast with a given global amax (bc_quantize_cast), and also as bc_quantize (global amax
 * pass + cast: the input is read twice, the bytes counted once). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockcast.h"
#include "gpu.h"
#include "bench.h"

static bc_ctx *ctx;
static bc_dtype in_dt = BC_BF16; /* --dtype */
static size_t in_es = 2;
static int swz; /* --swizzled: the scales in the GEMM's 128x4 layout */

/* the n bf16 values h as an input buffer of in_dt (fp32: the same values) */
static void *as_input(const uint16_t *h, size_t n) {
  void *p = malloc(n * in_es);
  if (!p) { fprintf(stderr, "bench_block: out of memory for %zu input bytes\n", n * in_es); exit(1); }
  if (in_dt == BC_BF16) memcpy(p, h, n * 2);
  else for (size_t i = 0; i < n; i++) ((uint32_t *)p)[i] = (uint32_t)h[i] << 16;
  return p;
}

typedef struct q_arg {
  bc_tensor x[3];
  bc_qtensor q;
  int mode; /* 0 cast (bc_quantize_cast), 1 bc_quantize, 2 dequantize rowwise, 3 dequantize columnwise */
  bc_tensor deq;
} q_arg;

static int do_q(int i, void *u) {
  q_arg *a = u;
  bc_status s;
  if (a->mode == 0) s = bc_quantize_cast(ctx, &a->x[i % 3], &a->q, NULL);
  else if (a->mode == 1) s = bc_quantize(ctx, &a->x[i % 3], &a->q, NULL);
  else s = bc_dequantize(ctx, &a->q, a->mode == 2 ? BC_ROWWISE : BC_COLUMNWISE, &a->deq, NULL);
  if (s != BC_OK) { printf("# %s: %s\n", bc_status_string(s), bc_last_error(ctx)); return 1; }
  return 0;
}

typedef struct bufs {
  bc_qlayout l[2];
  uint8_t *data[2], *scale[2];
} bufs;

static int bufs_alloc(const bc_format *f, int64_t M, int64_t K, bufs *b) {
  bc_format_info info;
  bc_format_get_info(ctx, f, &info);
  memset(b, 0, sizeof *b);
  for (int d = 0; d < 2; d++) {
    if (!(d ? info.has_columnwise : info.has_rowwise)) continue;
    if (bc_qtensor_layout(ctx, f, M, K, (bc_direction)(d + 1), swz, &b->l[d]) != BC_OK) return 0;
    b->data[d] = dmalloc(b->l[d].data_bytes);
    b->scale[d] = dmalloc(b->l[d].scale_bytes);
  }
  return 1;
}
static void bufs_free(bufs *b) {
  for (int d = 0; d < 2; d++) { if (b->data[d]) cudaFree(b->data[d]); if (b->scale[d]) cudaFree(b->scale[d]); }
}

/* quantize each direction set on the GPU and on the CPU: data and scales bit-exact; then the
 * dequantize of each direction against the reference's */
static int validate(const bc_format *f, int64_t M, int64_t K) {
  size_t n = (size_t)(M * K);
  uint16_t *h = malloc(n * 2);
  fill_bf16(h, n, 77);
  void *hin = as_input(h, n);
  void *d_in = dmalloc(n * in_es);
  CK(cudaMemcpy(d_in, hin, n * in_es, cudaMemcpyHostToDevice));
  bufs b;
  if (!bufs_alloc(f, M, K, &b)) {
    free(h);
    free(hin);
    cudaFree(d_in);
    return 0;
  }
  float *amax = dmalloc(4), r_amax;
  int good = 1;
  for (int dirs = 1; dirs <= 3; dirs++) {
    uint8_t *rd[2] = { NULL, NULL }, *rs[2] = { NULL, NULL };
    for (int d = 0; d < 2; d++) {
      if (!(dirs >> d & 1) || !b.data[d]) continue;
      CK(cudaMemset(b.data[d], 0xA5, b.l[d].data_bytes));
      CK(cudaMemset(b.scale[d], 0xA5, b.l[d].scale_bytes));
      rd[d] = malloc(b.l[d].data_bytes);
      rs[d] = malloc(b.l[d].scale_bytes);
    }
    if ((dirs & 1 && !rd[0]) || (dirs & 2 && !rd[1])) continue;
    bc_tensor x = { d_in, in_dt, M, K, 0 }, hx = { hin, in_dt, M, K, 0 };
    bc_qtensor q = { f, M, K, rd[0] ? b.data[0] : NULL, b.scale[0], rd[1] ? b.data[1] : NULL, b.scale[1], amax, NULL, swz, 0, 0, 0 };
    bc_qtensor hq = { f, M, K, rd[0], rs[0], rd[1], rs[1], &r_amax, NULL, swz, 0, 0, 0 };
    if (bc_quantize(ctx, &x, &q, NULL) != BC_OK || bc_ref_quantize(ctx, &hx, &hq) != BC_OK) {
      printf("# %s\n", bc_last_error(ctx));
      good = 0;
    }
    CK(cudaDeviceSynchronize());
    for (int d = 0; d < 2 && good; d++) {
      if (!rd[d]) continue;
      uint8_t *g = malloc(b.l[d].data_bytes > b.l[d].scale_bytes ? b.l[d].data_bytes : b.l[d].scale_bytes);
      CK(cudaMemcpy(g, b.data[d], b.l[d].data_bytes, cudaMemcpyDeviceToHost));
      good &= memcmp(g, rd[d], b.l[d].data_bytes) == 0;
      CK(cudaMemcpy(g, b.scale[d], b.l[d].scale_bytes, cudaMemcpyDeviceToHost));
      good &= memcmp(g, rs[d], b.l[d].scale_bytes) == 0;
      free(g);
    }
    /* and the dequantize of each direction into bf16 (the variants timed below) */
    for (int d = 0; d < 2 && good && dirs == 3; d++)
      if (rd[d]) good &= dequantize_matches(ctx, &q, &hq, (bc_direction)(d + 1), b.l[d].data_rows, b.l[d].data_cols);
    for (int d = 0; d < 2; d++) { free(rd[d]); free(rs[d]); }
  }
  bufs_free(&b);
  cudaFree(d_in);
  cudaFree(amax);
  free(h);
  free(hin);
  return good;
}

int main(int argc, char **argv) {
  const char *only_fmt = NULL, *out = NULL;
  int max_shapes = 3, profile = 0, qonly = 0, ragged = 0;
  int64_t size = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--format") && i + 1 < argc) only_fmt = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) max_shapes = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--profile")) profile = 1;
    else if (!strcmp(argv[i], "--quantize-only")) qonly = 1;
    else if (!strcmp(argv[i], "--ragged")) ragged = 1;
    else if (!strcmp(argv[i], "--swizzled")) swz = 1;
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc && !strcmp(argv[i + 1], "fp32")) { in_dt = BC_FP32; in_es = 4; i++; }
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc && !strcmp(argv[i + 1], "bf16")) i++;
    else {
      fprintf(stderr, "usage: bench_block [--format NAME] [--reps N] [--out FILE] [--shapes 1..3] [--size N] [--quantize-only] "
                      "[--profile] [--dtype bf16|fp32] [--ragged] [--swizzled]\n");
      return 2;
    }
  }
  if (reps < 5) reps = 5;
  if (!gpu_available()) { printf("no CUDA device: nothing to measure\n"); return 0; }
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("%s\n", err); return 1; }
  float cms;
  double copy = copy_gbs(&cms);
  char line[512];
  FILE *o = out ? fopen(out, "w") : NULL;
#define EMIT(...) do { snprintf(line, sizeof line, __VA_ARGS__); fputs(line, stdout); if (o) fputs(line, o); fflush(stdout); } while (0)
  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  EMIT("# bench_block: %s, %s\n\n", gpu_name(), date);
  EMIT("device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (bytes read + written)\n", cms, copy);
  EMIT("timing: median of %d samples, each %d back-to-back launches; bytes = input once + each output (data + scales) once\n",
       reps, BATCH);
  EMIT("block scales: %s\n\n", swz ? "swizzled (the GEMM's 128x4 layout)" : "compact");
  EMIT("| format | variant | shape | time (us) | GB/s | %% of copy | validated |\n|---|---|---|---|---|---|---|\n");
  int all_valid = 1;
  for (size_t fi = 0; fi < bc_format_count(ctx); fi++) {
    const bc_format *f = bc_format_at(ctx, fi);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (info.block == BC_BLOCK_TENSOR || (only_fmt && strcmp(only_fmt, info.name))) continue;
    const int pk = info.element_pack; /* ragged shapes hold whole packing groups */
    int valid = profile ? 1 : validate(f, pk == 4 ? 996 : pk == 2 ? 998 : 999, pk == 4 ? 1028 : pk == 2 ? 1030 : 1031);
    all_valid &= valid;
    const char *vs = valid ? "bit-exact" : "MISMATCH";
    const int64_t mr = pk == 4 ? 8188 : pk == 2 ? 8190 : 8191, kr = pk == 4 ? 8196 : pk == 2 ? 8194 : 8193;
    int64_t shapes[4][2] = { { 8192, 8192 }, { mr, kr }, { 16384, 16384 }, { 0, 0 } };
    int nshapes = 3;
    if (ragged) { /* aligned, M-ragged, K-ragged, both */
      int64_t rs[4][2] = { { 8192, 8192 }, { mr, 8192 }, { 8192, kr }, { mr, kr } };
      memcpy(shapes, rs, sizeof rs);
      nshapes = max_shapes = 4;
    }
    if (size > 0) { shapes[0][0] = shapes[0][1] = size; max_shapes = 1; }
    for (int si = 0; si < nshapes && si < max_shapes; si++) {
      int64_t M = shapes[si][0], K = shapes[si][1];
      size_t n = (size_t)(M * K);
      uint16_t *h = malloc(n * 2);
      q_arg a;
      memset(&a, 0, sizeof a);
      void *in[3];
      for (int b = 0; b < 3; b++) {
        fill_bf16(h, n, 0x1234567ull + (uint64_t)b);
        void *hin = as_input(h, n);
        in[b] = dmalloc(n * in_es);
        CK(cudaMemcpy(in[b], hin, n * in_es, cudaMemcpyHostToDevice));
        free(hin);
        a.x[b] = (bc_tensor){ in[b], in_dt, M, K, 0 };
      }
      free(h);
      bufs b;
      bufs_alloc(f, M, K, &b);
      float *amax = dmalloc(4);
      CK(cudaMemset(amax, 0, 4));
      bc_amax(ctx, &a.x[0], amax, NULL); /* a real global amax for the two-level cast */
      void *deq = dmalloc(n * 2);
      struct { const char *name; int mode, dirs; } vars[] = {
        { "quantize rowwise", 0, 1 }, { "quantize columnwise", 0, 2 }, { "quantize both", 0, 3 },
        { "quantize both (global amax + cast)", 1, 3 }, { "dequantize rowwise -> bf16", 2, 1 },
        { "dequantize columnwise -> bf16", 3, 2 },
      };
      for (size_t v = 0; v < sizeof vars / sizeof *vars; v++) {
        if ((vars[v].mode == 1 && !info.two_level) || (qonly && vars[v].mode >= 2)) continue;
        int dirs = vars[v].dirs;
        if ((dirs & 1 && !b.data[0]) || (dirs & 2 && !b.data[1])) continue;
        a.mode = vars[v].mode;
        a.q = (bc_qtensor){ f, M, K, dirs & 1 ? b.data[0] : NULL, b.scale[0], dirs & 2 ? b.data[1] : NULL, b.scale[1], amax, NULL,
                            swz, 0, 0, 0 };
        double bytes = 0;
        for (int d = 0; d < 2; d++)
          if (dirs >> d & 1) bytes += (double)b.l[d].data_bytes + (double)b.l[d].scale_bytes;
        if (a.mode >= 2) {
          int d = a.mode - 2;
          a.deq = (bc_tensor){ deq, BC_BF16, b.l[d].data_rows, b.l[d].data_cols, 0 };
        }
        bytes += (a.mode >= 2 ? 2.0 : (double)in_es) * (double)n;
        if (profile) {
          if (do_q(0, &a)) all_valid = 0;
          CK(cudaDeviceSynchronize());
          continue;
        }
        float ms = time_median(do_q, &a);
        if (ms < 0) { all_valid = 0; continue; }
        double gbs = bytes / (ms * 1e-3) / 1e9;
        EMIT("| %s | %s | %lldx%lld %s | %.1f | %.0f | %.1f%% | %s |\n", info.name, vars[v].name, (long long)M, (long long)K,
             a.mode >= 2 ? "bf16" : in_dt == BC_FP32 ? "fp32" : "bf16", ms * 1e3, gbs, 100.0 * gbs / copy, vs);
      }
      cudaFree(deq);
      cudaFree(amax);
      bufs_free(&b);
      for (int k = 0; k < 3; k++) cudaFree(in[k]);
    }
  }
  bc_stats st;
  bc_get_stats(ctx, &st);
  EMIT("\nkernels: %llu loaded, %llu from the AOT set, %llu NVRTC compiles\n", (unsigned long long)st.kernels_loaded,
       (unsigned long long)st.aot_hits, (unsigned long long)st.nvrtc_compiles);
  if (o) fclose(o);
  bc_ctx_destroy(ctx);
  return all_valid ? 0 : 1;
}
