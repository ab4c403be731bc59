/* 21-gpu-cvt-selftest: the fast conversions the generated kernels use give exactly the bits of
 * the generic ones derived from specs/elements.lua: the hardware encode (cvt.rn.satfinite.
 * {e4m3,e5m2}x2.f32, sm_89+) and the integer-form encode against the float-arithmetic encode for
 * all 2^32 fp32 inputs; the hardware decode (e4m3, e5m2) and the fp16-placement decode (e2m1)
 * against the generic decode for every pair of codes; for e2m1 (bf16x2 arithmetic, sm_90+) the pair
 * encode through the round-to-odd narrowing on all 2^32 fp32 inputs in either half and on every bf16
 * pair times every e8m0 factor; ue4m3 (NVFP4's scales) through e4m3's conversions for every
 * non-negative or NaN input and every code; and the exact reciprocal bc_rcp_rn against __frcp_rn for all 2^32
 * fp32 inputs, __frcp_rn against the double quotient rounded to fp32 for the positive finite ones. A new element with a fast path gets a bc_selftest_cvt_NAME kernel: add it to elems[]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jit/bc_jit.h"
#include "gpu.h"
#include "tap.h"

/* Run self-test kernel `name` (params: first, count, bad, examples, max_examples) over all 2^32
 * fp32 inputs (BC_TEST_QUICK=1, the compute-sanitizer run: the first 2^24). Returns the number of
 * mismatches (~0 when the kernel does not load or launch); the first 16 examples go to hex[3 * j]
 * (zeros where there are none). */
static unsigned long long run_selftest(bc_ctx *ctx, const char *name, unsigned long long *count, uint32_t hex[48]) {
  const bci_kernel *k;
  memset(hex, 0, 48 * sizeof *hex);
  bc_status s = bci_kernel_get(ctx, name, &k);
  is_int(s, BC_OK, "%s loads", name);
  if (s != BC_OK) { diag("%s", bc_last_error(ctx)); return ~0ull; }
  unsigned long long *bad = dmalloc(8);
  uint32_t *ex = dmalloc(3 * 16 * 4);
  CK(cudaMemset(bad, 0, 8));
  CK(cudaMemset(ex, 0, 3 * 16 * 4));
  unsigned long long first = 0;
  *count = getenv("BC_TEST_QUICK") ? 1ull << 24 : 1ull << 32;
  int maxex = 16;
  void *params[] = { &first, count, &bad, &ex, &maxex };
  s = bci_kernel_launch(ctx, k, 132 * 16, 1, 1, (unsigned)k->launch.threads, NULL, params);
  CK(cudaDeviceSynchronize());
  unsigned long long nbad = ~0ull;
  CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hex, ex, 48 * sizeof *hex, cudaMemcpyDeviceToHost));
  cudaFree(bad);
  cudaFree(ex);
  return s == BC_OK ? nbad : ~0ull;
}

int main(void) {
  gpu_init_or_skip();
  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  const char *elems[] = { "e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "ue4m3" };
  unsigned long long count = 0, nbad;
  uint32_t hex[48];
  for (int i = 0; i < (int)(sizeof elems / sizeof *elems); i++) {
    char name[64];
    snprintf(name, sizeof name, "bc_selftest_cvt_%s", elems[i]);
    nbad = run_selftest(ctx, name, &count, hex);
    ok(nbad == 0, "%s: fast encodes == generic encode for %llu fp32 inputs, and fast decode == generic decode for all code pairs (%llu differ)", elems[i], count, nbad);
    for (unsigned long long j = 0; j < nbad && j < 16; j++)
      diag("  input 0x%08X: generic 0x%02X, fast 0x%02X", hex[3 * j], hex[3 * j + 1], hex[3 * j + 2]);
  }
  /* the exact reciprocal the per-tensor kernels write scale_inv with, against __frcp_rn; and
   * __frcp_rn against the double quotient rounded to fp32 (the reference's two-level 1 / s_enc,
   * which the kernels may then take as __frcp_rn: common.cuh bc_tensor_scale_from_amax) for every
   * positive finite input */
  nbad = run_selftest(ctx, "bc_selftest_rcp", &count, hex);
  ok(nbad == 0, "bc_rcp_rn == __frcp_rn for %llu fp32 inputs, and __frcp_rn == (float)(1.0 / (double)x) for the positive "
     "finite ones (%llu differ)", count, nbad);
  for (unsigned long long j = 0; j < nbad && j < 16; j++)
    diag("  input 0x%08X: __frcp_rn 0x%08X, the other 0x%08X", hex[3 * j], hex[3 * j + 1], hex[3 * j + 2]);
  bc_ctx_destroy(ctx);
  return done_testing();
}
