/* tests/bench/bench.h: the timing method shared by the benchmarks. Each sample is a batch of
 * BATCH back-to-back launches (as in a training step, so one call's launch latency is not counted
 * as kernel time); the median sample is reported. The reference is a device-to-device copy timed
 * the same way in the same run. */
#ifndef BC_BENCH_H
#define BC_BENCH_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockcast.h"
#include "gpu.h"

static int reps = 30;

static inline int cmpf(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

typedef int (*op_fn)(int i, void *u);

#define BATCH 10

static inline float time_median(op_fn fn, void *u) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) if (fn(i, u)) return -1;
  float *ms = malloc(sizeof(float) * (size_t)reps);
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(a, 0));
    for (int k = 0; k < BATCH; k++)
      if (fn(i * BATCH + k, u)) return -1;
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[i], a, b));
    ms[i] /= BATCH;
  }
  qsort(ms, (size_t)reps, sizeof *ms, cmpf);
  float m = ms[reps / 2];
  free(ms);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return m;
}

typedef struct copy_arg { void *dst, *src; size_t n; } copy_arg;
static inline int do_copy(int i, void *u) {
  copy_arg *c = u;
  return cudaMemcpyAsync(c->dst, c->src, c->n, cudaMemcpyDeviceToDevice, 0) != cudaSuccess;
}

/* GB/s (bytes read + written) of a 1 GiB device-to-device copy; *ms gets its median time */
static inline double copy_gbs(float *ms) {
  copy_arg c = { NULL, NULL, (size_t)1 << 30 };
  c.src = dmalloc(c.n);
  c.dst = dmalloc(c.n);
  CK(cudaMemset(c.src, 1, c.n));
  float t = time_median(do_copy, &c);
  cudaFree(c.src);
  cudaFree(c.dst);
  if (ms) *ms = t;
  return 2.0 * (double)c.n / (t * 1e-3) / 1e9;
}
/* The weights of a ~1B-parameter transformer (hidden 2048, MLP 4x, 16 layers: qkv [6144, 2048],
 * proj [2048, 2048], fc1 [8192, 2048], fc2 [2048, 8192] per layer, embedding [50304, 2048]; 0.91B
 * parameters) into shape[65][2]; returns the number of weights (65) */
static inline int model_1b(int64_t shape[][2]) {
  int n = 0;
  shape[n][0] = 50304, shape[n][1] = 2048, n++;
  for (int l = 0; l < 16; l++) {
    const int64_t s4[4][2] = { { 6144, 2048 }, { 2048, 2048 }, { 8192, 2048 }, { 2048, 8192 } };
    for (int k = 0; k < 4; k++) shape[n][0] = s4[k][0], shape[n][1] = s4[k][1], n++;
  }
  return n;
}

/* ZeRO: the weights laid end to end in one flat buffer, a rank owning [lo, hi) of it. The part of
 * the weight of n elements that starts at `base` in the buffer: [*a, *b) of the weight (empty:
 * *a == *b) */
static inline void zero_part(int64_t lo, int64_t hi, int64_t base, int64_t n, int64_t *a, int64_t *b) {
  *a = lo > base ? lo - base : 0;
  *b = hi - base < n ? hi - base : n;
  if (*a > n) *a = n;
  if (*b < *a) *b = *a;
}

/* bf16 inputs: random sign, exponents 2^-16 .. 2^7, random mantissas (xorshift from seed) */

static inline void fill_bf16(uint16_t *h, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    int e = (int)(seed % 24) - 16;
    h[i] = (uint16_t)(((seed >> 40) & 1) << 15 | (unsigned)(127 + e) << 7 | ((seed >> 20) & 0x7F));
  }
}
/* Validation of a timed dequantize: direction `dir` of q (device) into a poisoned bf16 [rows, cols]
 * against the CPU reference of hq (the same codes on the host); 1 when bit-exact. */
static inline int dequantize_matches(bc_ctx *ctx, const bc_qtensor *q, const bc_qtensor *hq, bc_direction dir, int64_t rows,
                                     int64_t cols) {
  size_t ob = (size_t)(rows * cols) * 2;
  void *dout = dmalloc(ob), *g = malloc(ob), *want = malloc(ob);
  CK(cudaMemset(dout, 0xA5, ob));
  bc_tensor out = { dout, BC_BF16, rows, cols, 0 }, hout = { want, BC_BF16, rows, cols, 0 };
  int good = 1;
  if (bc_dequantize(ctx, q, dir, &out, NULL) != BC_OK || bc_ref_dequantize(ctx, hq, dir, &hout) != BC_OK) {
    printf("# %s\n", bc_last_error(ctx));
    good = 0;
  }
  CK(cudaMemcpy(g, dout, ob, cudaMemcpyDeviceToHost));
  good &= memcmp(g, want, ob) == 0;
  cudaFree(dout);
  free(g);
  free(want);
  return good;
}

#endif
