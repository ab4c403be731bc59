/* 23-gpu-delayed: delayed scaling of lists of 1 .. 5000 tensors in one launch
 * (bc_delayed_scale_update) bit-identical to the CPU reference: new scales, scale_inv and the
 * rolled history, for both algos, several margins and history lengths, histories holding zeros,
 * NaN, Inf, denormals and huge values; the outputs poisoned before each run. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockcast.h"
#include "gpu.h"
#include "tap.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next32(void) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static float special_amax(void) {
  switch (next32() % 16) {
  case 0: return 0.0f;
  case 1: return NAN;
  case 2: return INFINITY;
  case 3: return 1e-40f;                      /* denormal: the scale overflows */
  case 4: return 3.0e38f;
  default: return ldexpf((float)(next32() % 100000 + 1) / 1000.0f, (int)(next32() % 40) - 20);
  }
}

int main(void) {
  gpu_init_or_skip();
  bc_ctx *ctx;
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
  diag("device: %s", gpu_name());
  const char *fmts[] = { "fp8_e4m3_tensor", "fp8_e5m2_tensor" };
  const struct { int64_t n; int L; } cases[] = { { 1, 1 }, { 7, 16 }, { 100, 1024 }, { 1000, 16 }, { 5000, 3 } };
  for (int fi = 0; fi < 2; fi++) {
    const bc_format *f;
    bc_format_get(ctx, fmts[fi], &f);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      for (int algo = 0; algo < 2; algo++) {
        for (int margin = 0; margin <= 3; margin += 3) {
          int64_t n = cases[c].n;
          int L = cases[c].L;
          size_t hn = (size_t)n * (size_t)L;
          float *h = malloc(hn * 4), *s = malloc((size_t)n * 4), *si = malloc((size_t)n * 4);
          float *gh = malloc(hn * 4), *gs = malloc((size_t)n * 4), *gsi = malloc((size_t)n * 4);
          for (size_t i = 0; i < hn; i++) h[i] = special_amax();
          for (int64_t i = 0; i < n; i++) s[i] = ldexpf(1.0f, (int)(next32() % 20) - 10);
          float *dh = dmalloc(hn * 4), *ds = dmalloc((size_t)n * 4), *dsi = dmalloc((size_t)n * 4);
          CK(cudaMemcpy(dh, h, hn * 4, cudaMemcpyHostToDevice));
          CK(cudaMemcpy(ds, s, (size_t)n * 4, cudaMemcpyHostToDevice));
          CK(cudaMemset(dsi, 0xFF, (size_t)n * 4)); /* poison */
          bc_status st = bc_delayed_scale_update(ctx, f, n, L, dh, ds, dsi, margin, (bc_amax_algo)algo, NULL);
          if (st != BC_OK) diag("%s", bc_last_error(ctx));
          CK(cudaDeviceSynchronize());
          CK(cudaMemcpy(gh, dh, hn * 4, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(gs, ds, (size_t)n * 4, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(gsi, dsi, (size_t)n * 4, cudaMemcpyDeviceToHost));
          bc_ref_delayed_scale_update(ctx, f, n, L, h, s, si, margin, (bc_amax_algo)algo);
          char name[160];
          snprintf(name, sizeof name, "%s n=%lld L=%d %s margin %d", fmts[fi], (long long)n, L, algo ? "most_recent" : "max", margin);
          ok(st == BC_OK && memcmp(gs, s, (size_t)n * 4) == 0 && memcmp(gsi, si, (size_t)n * 4) == 0 &&
             memcmp(gh, h, hn * 4) == 0, "%s: scale, scale_inv and history bit-identical", name);
          if (memcmp(gs, s, (size_t)n * 4) != 0) is_bytes(gs, s, (size_t)n * 4, "  scale");
          if (memcmp(gsi, si, (size_t)n * 4) != 0) is_bytes(gsi, si, (size_t)n * 4, "  scale_inv");
          if (memcmp(gh, h, hn * 4) != 0) is_bytes(gh, h, hn * 4, "  history");
          cudaFree(dh); cudaFree(ds); cudaFree(dsi);
          free(h); free(s); free(si); free(gh); free(gs); free(gsi);
        }
      }
    }
  }
  /* scale_inv NULL: only the scales and the history */
  const bc_format *f;
  bc_format_get(ctx, "fp8_e4m3_tensor", &f);
  float h[2] = { 2.0f, 4.0f }, s[1] = { 1.0f }, *dh = dmalloc(8), *ds = dmalloc(4);
  CK(cudaMemcpy(dh, h, 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ds, s, 4, cudaMemcpyHostToDevice));
  bc_status st = bc_delayed_scale_update(ctx, f, 1, 2, dh, ds, NULL, 0, BC_AMAX_MAX, NULL);
  CK(cudaMemcpy(s, ds, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h, dh, 8, cudaMemcpyDeviceToHost));
  ok(st == BC_OK && s[0] == 112.0f && h[0] == 0.0f && h[1] == 2.0f, "scale_inv NULL: scale 448/4 = 112, history [0, 2] (got %g, [%g, %g])",
     s[0], h[0], h[1]);
  cudaFree(dh); cudaFree(ds);
  bc_ctx_destroy(ctx);
  return done_testing();
}
