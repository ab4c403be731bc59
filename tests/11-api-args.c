/* 11-api-args: every public entry point rejects bad arguments with BC_ERR_ARG (or the status
 * that fits) and a message naming the argument and what would be right; nothing crashes. */
#include <stdint.h>
#include <string.h>

#include "blockcast.h"
#include "tap.h"

static bc_ctx *ctx;

int main(void) {
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  is_int(bc_ctx_create(NULL, err, sizeof err), BC_ERR_ARG, "bc_ctx_create(NULL)");
  is_str_has(err, "'out' is NULL", "bc_ctx_create(NULL): message");
  is_int(bc_amax(NULL, NULL, NULL, NULL), BC_ERR_ARG, "NULL ctx");
  is_str_has(bc_last_error(NULL), "ctx is NULL", "bc_last_error(NULL) explains");
  ok(strcmp(bc_status_string(BC_ERR_NVRTC), "BC_ERR_NVRTC") == 0 && bc_status_string((bc_status)99) != NULL, "status names");

  const bc_format *f = NULL, *g = NULL;
  ERR_HAS(bc_format_get(ctx, "nope", &f), BC_ERR_ARG, "no format named 'nope'; known formats: fp8_block_128x128, fp8_block_1x128, fp8_e4m3_tensor", "unknown format");
  ERR_HAS(bc_format_get(ctx, NULL, &f), BC_ERR_ARG, "'name' is NULL", "NULL name");
  is_int(bc_format_get(ctx, "fp8_e4m3_tensor", &f), BC_OK, "format by name");

  bc_ctx *other;
  bc_ctx_create(&other, err, sizeof err);
  bc_format_get(other, "fp8_e4m3_tensor", &g);
  bc_format_info info;
  ERR_HAS(bc_format_get_info(ctx, g, &info), BC_ERR_ARG, "not a format of this context", "format of another context");
  ERR_HAS(bc_format_get_info(ctx, NULL, &info), BC_ERR_ARG, "'fmt' is NULL", "NULL format");
  bc_ctx_destroy(other);

  static char dev[1 << 16]; /* stands in for device memory: every call below fails before using it */
  float *fp = (float *)dev;
  bc_tensor x = { dev, BC_BF16, 4, 8, 0 };
  bc_tensor t;

  t = x; t.dtype = (bc_dtype)7;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "x->dtype is 7; expected BC_FP32, BC_BF16 or BC_FP16", "bad dtype");
  t = x; t.rows = 0;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "x has shape [0, 8]; expected rows >= 1 and cols >= 1", "zero rows");
  t = x; t.cols = -3;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "expected rows >= 1 and cols >= 1", "negative cols");
  t = x; t.row_stride = 5;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "row_stride is 5, less than cols 8", "stride below cols");
  t = x; t.data = NULL;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "x->data is NULL", "NULL data");
  t = x; t.data = dev + 1;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "not aligned to its 2-byte elements", "misaligned data");
  t = x; t.rows = (int64_t)1 << 40; t.cols = (int64_t)1 << 20;
  ERR_HAS(bc_amax(ctx, &t, fp, NULL), BC_ERR_ARG, "more than 2^50", "too many elements");
  ERR_HAS(bc_amax(ctx, NULL, fp, NULL), BC_ERR_ARG, "argument 'x' is NULL", "NULL tensor");
  ERR_HAS(bc_amax(ctx, &x, NULL, NULL), BC_ERR_ARG, "'amax' is NULL", "NULL amax");

  bc_qtensor q = { f, 4, 8, dev + 4096, fp + 100, dev + 8192, fp + 101, fp + 102, fp + 103, 0, 0, 0, 0 };
  bc_qtensor r;
  r = q; r.rows = 5;
  ERR_HAS(bc_quantize(ctx, &x, &r, NULL), BC_ERR_ARG, "q has shape [5, 8] but x has [4, 8]", "shape mismatch");
  r = q; r.rowwise_data = NULL; r.columnwise_data = NULL;
  ERR_HAS(bc_quantize(ctx, &x, &r, NULL), BC_ERR_ARG, "neither rowwise_data nor columnwise_data", "no direction");
  r = q; r.scale = NULL;
  ERR_HAS(bc_quantize_cast(ctx, &x, &r, NULL), BC_ERR_ARG, "q->scale is NULL", "no scale");
  r = q; r.amax = NULL;
  ERR_HAS(bc_quantize(ctx, &x, &r, NULL), BC_ERR_ARG, "q->amax is NULL", "no amax for current scaling");
  r = q; r.format = NULL;
  ERR_HAS(bc_quantize(ctx, &x, &r, NULL), BC_ERR_ARG, "'q->format' is NULL", "no format");
  ERR_HAS(bc_quantize(ctx, &x, NULL, NULL), BC_ERR_ARG, "argument 'q' is NULL", "NULL q");
  ERR_HAS(bc_dequantize(ctx, &q, (bc_direction)3, &x, NULL), BC_ERR_ARG, "dir is 3; expected BC_ROWWISE or BC_COLUMNWISE", "bad direction");
  ERR_HAS(bc_dequantize(ctx, &q, BC_COLUMNWISE, &x, NULL), BC_ERR_ARG, "out has shape [4, 8]; the columnwise data of q is [8, 4]", "dequantize shape");
  r = q; r.rowwise_scale_inv = NULL;
  ERR_HAS(bc_dequantize(ctx, &r, BC_ROWWISE, &x, NULL), BC_ERR_ARG, "q->rowwise_scale_inv is NULL", "dequantize without scale_inv");
  ERR_HAS(bc_compute_scale(ctx, f, NULL, fp, fp, NULL), BC_ERR_ARG, "'amax' is NULL", "compute_scale without amax");
  size_t db, sb;
  ERR_HAS(bc_qtensor_sizes(ctx, f, 0, 4, BC_ROWWISE, &db, &sb), BC_ERR_ARG, "shape [0, 4]", "sizes of an empty shape");
  is_int(bc_qtensor_sizes(ctx, f, 3, 5, BC_COLUMNWISE, &db, &sb), BC_OK, "sizes");
  ok(db == 15 && sb == 4, "sizes: 15 data bytes, 4 scale bytes");
  ERR_HAS(bc_kernel_names(ctx, "gfx90a", NULL, NULL, NULL), BC_ERR_ARG, "'fn' is NULL", "kernel_names without fn");

  /* valid arguments on a machine without a driver or without a current context */
  bc_status s = bc_amax(ctx, &x, fp, NULL);
  ok(s == BC_ERR_UNAVAILABLE || s == BC_ERR_CUDA, "valid call without a usable GPU context: %s", bc_status_string(s));
  ok(strstr(bc_last_error(ctx), "libcuda") || strstr(bc_last_error(ctx), "cuInit") ||
     strstr(bc_last_error(ctx), "no current CUDA context"), "and the message says why: %s", bc_last_error(ctx));
  bc_ctx_destroy(ctx);
  return done_testing();
}
