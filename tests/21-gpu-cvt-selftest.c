/* 21-gpu-cvt-selftest: the hardware conversion (cvt.rn.satfinite.{e4m3,e5m2}x2.f32) that the
 * generated kernels use on sm_89+ gives exactly the bits of the generic encode derived from
 * specs/elements.lua, for all 2^32 fp32 inputs; and a sample of inputs agrees with the CPU
 * reference encode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bc_internal.h"
#include "gpu.h"
#include "tap.h"

int main(void) {
  gpu_init_or_skip();
  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  const char *elems[] = { "e4m3", "e5m2" };
  for (int i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof name, "bc_selftest_cvt_%s", elems[i]);
    const bci_kernel *k;
    bc_status s = bci_kernel_get(ctx, name, &k);
    is_int(s, BC_OK, "%s loads", name);
    if (s != BC_OK) { diag("%s", bc_last_error(ctx)); continue; }
    unsigned long long *bad = dmalloc(8);
    uint32_t *ex = dmalloc(3 * 16 * 4);
    CK(cudaMemset(bad, 0, 8));
    CK(cudaMemset(ex, 0, 3 * 16 * 4));
    /* BC_TEST_QUICK=1 (the compute-sanitizer run): the first 2^24 inputs only */
    unsigned long long first = 0, count = getenv("BC_TEST_QUICK") ? 1ull << 24 : 1ull << 32;
    int maxex = 16;
    void *params[] = { &first, &count, &bad, &ex, &maxex };
    s = bci_kernel_launch(ctx, k, 132 * 16, 1, 1, (unsigned)k->launch.threads, NULL, params);
    CK(cudaDeviceSynchronize());
    unsigned long long nbad = ~0ull;
    uint32_t hex[48];
    CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hex, ex, sizeof hex, cudaMemcpyDeviceToHost));
    ok(s == BC_OK && nbad == 0, "%s: hardware cvt == generic encode for %llu fp32 inputs, and hardware decode == generic decode for all code pairs (%llu differ)", elems[i], count, nbad);
    for (unsigned long long j = 0; j < nbad && j < 16; j++)
      diag("  input 0x%08X: generic 0x%02X, hardware 0x%02X", hex[3 * j], hex[3 * j + 1], hex[3 * j + 2]);
    cudaFree(bad);
    cudaFree(ex);
  }
  bc_ctx_destroy(ctx);
  return done_testing();
}
