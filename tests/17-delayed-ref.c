/* 17-delayed-ref: the CPU reference of delayed scaling (bc_ref_delayed_scale_update): the amax
 * each algo picks, the scale by hand ((448 / a) / 2^margin), old scales kept for 0 / NaN / Inf,
 * FLT_MAX for a tiny amax, the history roll, history_len 1, pow2 from a spec, argument errors. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "tap.h"

static bc_ctx *ctx;

int main(void) {
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
  const bc_format *e4, *e5, *blk;
  bc_format_get(ctx, "fp8_e4m3_tensor", &e4);
  bc_format_get(ctx, "fp8_e5m2_tensor", &e5);
  bc_format_get(ctx, "mxfp8_e4m3", &blk);

  /* L = 3 rows x n = 6 tensors; row 0 is the step just done */
  enum { L = 3, N = 6 };
  const float h0[L][N] = {
    { 2.0f, 1.0f, 0.0f, NAN, INFINITY, 1e-40f },
    { 4.0f, 8.0f, 0.0f, 1.0f, 1.0f, 0.0f },
    { 1.0f, 0.5f, 0.0f, 2.0f, 3.0f, 0.0f },
  };
  float h[L][N], scale[N], sinv[N];
  memcpy(h, h0, sizeof h);
  for (int i = 0; i < N; i++) scale[i] = 7.0f;
  is_int(bc_ref_delayed_scale_update(ctx, e4, N, L, &h[0][0], scale, sinv, 1, BC_AMAX_MAX), BC_OK, "max, margin 1: runs");
  /* tensor 0: max(2, 4, 1) = 4 -> (448 / 4) / 2 = 56; tensor 1: max 8 -> 28 */
  ok(scale[0] == 56.0f && sinv[0] == 1.0f / 56.0f, "max picks the largest amax of the history: (448/4)/2 = 56 (got %g)", scale[0]);
  ok(scale[1] == 28.0f, "(448/8)/2 = 28 (got %g)", scale[1]);
  ok(scale[2] == 7.0f && sinv[2] == 1.0f / 7.0f, "an all-zero history keeps the old scale (got %g)", scale[2]);
  ok(scale[3] == 7.0f, "a NaN in the history wins the max and keeps the old scale (got %g)", scale[3]);
  ok(scale[4] == 7.0f, "an Inf amax keeps the old scale (got %g)", scale[4]);
  ok(scale[5] == FLT_MAX, "a tiny amax whose scale overflows gives FLT_MAX (got %g)", scale[5]);
  /* the roll: row 0 <- row 1, row 1 <- row 2, row 2 <- old row 0; then row 0 = 0 */
  int rolled = 1;
  for (int i = 0; i < N; i++) {
    rolled &= h[0][i] == 0.0f;
    rolled &= memcmp(&h[1][i], &h0[2][i], 4) == 0;
    rolled &= memcmp(&h[2][i], &h0[0][i], 4) == 0;
  }
  ok(rolled, "the history rolls: row 1 <- row 2, row 2 <- the old row 0, row 0 zeroed");

  memcpy(h, h0, sizeof h);
  for (int i = 0; i < N; i++) scale[i] = 7.0f;
  bc_ref_delayed_scale_update(ctx, e4, N, L, &h[0][0], scale, NULL, 0, BC_AMAX_MOST_RECENT);
  ok(scale[0] == 224.0f && scale[1] == 448.0f, "most recent takes row 0: 448/2 = 224, 448/1 = 448 (got %g %g)", scale[0], scale[1]);
  ok(scale[3] == 7.0f, "most recent: a NaN amax keeps the old scale");

  /* a scale that is not exact: one rounding per division, as fp32 */
  float one[1] = { 3.0f }, s1[1] = { 1.0f };
  bc_ref_delayed_scale_update(ctx, e5, 1, 1, one, s1, NULL, 3, BC_AMAX_MAX);
  volatile float q = 57344.0f / 3.0f;
  ok(s1[0] == q / 8.0f && one[0] == 0.0f, "e5m2, L = 1, margin 3: (57344/3)/8 rounded as fp32, history zeroed (got %.9g)", s1[0]);

  /* pow2 from a run-time spec: the scale keeps sign and exponent */
  char path[256];
  snprintf(path, sizeof path, "%s/bc-delayed-%d.lua", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  FILE *fp = fopen(path, "w");
  fprintf(fp, "name = \"delayed_pow2\"\ndescription = \"e4m3 per tensor, power-of-two scales\"\nelement = \"e4m3\"\n"
              "block = \"tensor\"\nscale = { type = \"fp32\", rule = \"amax\", eps = 0, pow2 = true, inf_value = \"flt_max\" }\n"
              "rowwise = { layout = \"rowmajor\" }\ncolumnwise = { layout = \"transposed\" }\n");
  fclose(fp);
  const bc_format *p2;
  bc_status st = bc_format_load(ctx, path, &p2);
  remove(path);
  if (st != BC_OK) diag("%s", bc_last_error(ctx));
  float a3[1] = { 3.0f }, s3[1] = { 1.0f };
  bc_ref_delayed_scale_update(ctx, p2, 1, 1, a3, s3, NULL, 0, BC_AMAX_MAX);
  ok(st == BC_OK && s3[0] == 128.0f, "pow2: 448/3 = 149.33 -> 128 (got %g)", s3[0]);

  /* n = 0 does nothing, even with NULL arrays */
  is_int(bc_ref_delayed_scale_update(ctx, e4, 0, 4, NULL, NULL, NULL, 0, BC_AMAX_MAX), BC_OK, "n = 0: nothing to do");

  /* argument errors */
  float hh[4] = { 1, 1, 1, 1 }, ss[2] = { 1, 1 };
  is_int(bc_ref_delayed_scale_update(ctx, blk, 2, 2, hh, ss, NULL, 0, BC_AMAX_MAX), BC_ERR_UNSUPPORTED, "a block format");
  is_str_has(bc_last_error(ctx), "delayed scaling is for per-tensor formats", "  names what is accepted");
  is_int(bc_ref_delayed_scale_update(ctx, e4, 2, 0, hh, ss, NULL, 0, BC_AMAX_MAX), BC_ERR_ARG, "history_len 0");
  is_str_has(bc_last_error(ctx), "history_len is 0; expected 1 to 2^20", "  with the range");
  is_int(bc_ref_delayed_scale_update(ctx, e4, 2, 2, hh, ss, NULL, 127, BC_AMAX_MAX), BC_ERR_ARG, "margin 127");
  is_str_has(bc_last_error(ctx), "0 <= margin <= 126", "  with the range");
  is_int(bc_ref_delayed_scale_update(ctx, e4, 2, 2, hh, ss, NULL, 0, (bc_amax_algo)5), BC_ERR_ARG, "an unknown algo");
  is_int(bc_ref_delayed_scale_update(ctx, e4, -1, 2, hh, ss, NULL, 0, BC_AMAX_MAX), BC_ERR_ARG, "n < 0");
  is_int(bc_ref_delayed_scale_update(ctx, e4, 2, 2, NULL, ss, NULL, 0, BC_AMAX_MAX), BC_ERR_ARG, "history NULL");
  is_str_has(bc_last_error(ctx), "'history' is NULL", "  names the argument");
  is_int(bc_ref_delayed_scale_update(ctx, NULL, 2, 2, hh, ss, NULL, 0, BC_AMAX_MAX), BC_ERR_ARG, "fmt NULL");
  /* the GPU entry point checks the same arguments before it needs a device */
  is_int(bc_delayed_scale_update(ctx, e4, 2, 2, hh, ss, NULL, -1, BC_AMAX_MAX, NULL), BC_ERR_ARG, "GPU call: margin -1");
  is_str_has(bc_last_error(ctx), "bc_delayed_scale_update: margin is -1", "  names the call");
  is_int(bc_delayed_scale_update(NULL, e4, 2, 2, hh, ss, NULL, 0, BC_AMAX_MAX, NULL), BC_ERR_ARG, "GPU call: ctx NULL");
  bc_ctx_destroy(ctx);
  return done_testing();
}
