/* multi/bc_delayed.c: delayed scaling (amax-history roll and scale update) of a list of tensors
 * in one launch, one thread per tensor (templates/delayed_scale.cu). */
#include <string.h>

#include "multi/bc_multi.h"

bc_status bc_delayed_scale_update(bc_ctx *ctx, const bc_format *fmt, int64_t n, int history_len, float *history,
                                  float *scale, float *scale_inv, int margin, bc_amax_algo algo, void *stream) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_delayed(ctx, "bc_delayed_scale_update", fmt, n, history_len, history, scale, margin, algo);
  if (s != BC_OK || n == 0) return s;
  char name[128];
  snprintf(name, sizeof name, "bc_delayed_scale_%s", fmt->name);
  const bci_kernel *k;
  s = bci_kernel_get(ctx, name, &k);
  if (s != BC_OK) return s;
  int64_t blocks = (n + k->launch.threads - 1) / k->launch.threads;
  if (blocks > 0x7FFFFFFF) return bci_fail(ctx, BC_ERR_ARG, "bc_delayed_scale_update: n is %lld: too many tensors for one grid", (long long)n);
  uint32_t bits = (uint32_t)(127 + margin) << 23; /* 2^margin, exact for 0..126 */
  float margin_div;
  memcpy(&margin_div, &bits, 4);
  int alg = (int)algo;
  void *params[] = { &history, &n, &history_len, &scale, &scale_inv, &margin_div, &alg };
  return bci_kernel_launch(ctx, k, (unsigned)blocks, 1, 1, (unsigned)k->launch.threads, stream, params);
}
