/* tests/bench/comm_bytes.c: the bytes each rank sends in bc_all_gather (bc_all_gather_bytes, the
 * count the transports make), for every format and direction, next to a bf16 all-gather of the
 * same rows; a markdown table for README.md. CPU only (no GPU, no NCCL).
 *   comm_bytes [ranks rows_per_rank cols]     default 8 4096 4096, and the same with rows cut */
#include <stdio.h>
#include <stdlib.h>

#include "blockcast.h"

int main(int argc, char **argv) {
  int W = argc > 1 ? atoi(argv[1]) : 8;
  int64_t m = argc > 2 ? atoll(argv[2]) : 4096, K = argc > 3 ? atoll(argv[3]) : 4096;
  if (W < 1 || W > 64 || m < 1 || K < 2) {
    fprintf(stderr, "usage: comm_bytes [ranks (1-64) rows_per_rank cols]\n");
    return 2;
  }
  bc_ctx *ctx;
  char err[512];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) {
    fprintf(stderr, "comm_bytes: %s\n", err);
    return 1;
  }
  int64_t even[64], cut[64];
  for (int r = 0; r < W; r++) {
    even[r] = m;
    cut[r] = m - 2 * (r + 1); /* every rank's rows cut blocks (even counts: 4-bit columnwise) */
  }
  double bf16 = (double)m * (double)K * 2;
  printf("Bytes rank 0 sends in `bc_all_gather` of a bf16 [%d x %lld, %lld] tensor over %d ranks (%lld rows each; then %lld, %lld, ... "
         "rows, which cut blocks), and as a fraction of the bf16 all-gather of the same rows (%.0f bytes):\n\n",
         W, (long long)m, (long long)K, W, (long long)m, (long long)cut[0], (long long)cut[1], bf16);
  printf("| format | directions | bytes (whole blocks) | vs bf16 | bytes (cut blocks) | vs bf16 (%lld rows) |\n|---|---|---:|---:|---:|---:|\n",
         (long long)cut[0]);
  const char *dn[] = { "", "rowwise", "columnwise", "both" };
  for (size_t i = 0; i < bc_format_count(ctx); i++) {
    const bc_format *f = bc_format_at(ctx, i);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    if (info.element_bits != 8 && info.element_bits != 4) continue; /* the collectives refuse other widths */
    for (int d = 1; d <= 3; d++) {
      if (((d & 1) && !info.has_rowwise) || ((d & 2) && !info.has_columnwise)) continue;
      uint64_t a = 0, b = 0;
      if (bc_all_gather_bytes(ctx, f, W, even, K, d, 0, &a) != BC_OK || bc_all_gather_bytes(ctx, f, W, cut, K, d, 0, &b) != BC_OK) {
        fprintf(stderr, "comm_bytes: %s\n", bc_last_error(ctx));
        return 1;
      }
      printf("| %s | %s | %llu | %.3f | %llu | %.3f |\n", info.name, dn[d], (unsigned long long)a, (double)a / bf16,
             (unsigned long long)b, (double)b / ((double)cut[0] * (double)K * 2));
    }
  }
  bc_ctx_destroy(ctx);
  return 0;
}
