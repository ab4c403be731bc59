/* fmt/bc_tensor.c: the checks of tensor and list arguments, shared by ops/, multi/ and ref/. */
#include <stdint.h>

#include "fmt/bc_fmt.h"

bc_status bci_check_tensor(bc_ctx *ctx, const char *fn, const char *arg, const bc_tensor *x, int64_t *ld) {
  if (!x) return bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL; expected a bc_tensor", fn, arg);
  if (bc_dtype_size(x->dtype) == 0)
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s->dtype is %d; expected BC_FP32, BC_BF16 or BC_FP16", fn, arg, (int)x->dtype);
  if (x->rows < 1 || x->cols < 1)
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s has shape [%lld, %lld]; expected rows >= 1 and cols >= 1", fn, arg,
                    (long long)x->rows, (long long)x->cols);
  int64_t s = x->row_stride ? x->row_stride : x->cols;
  if (s < x->cols)
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s->row_stride is %lld, less than cols %lld; expected 0 (contiguous) or >= cols", fn,
                    arg, (long long)x->row_stride, (long long)x->cols);
  if (x->rows > BCI_MAX_ELEMS / s)
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s spans %lld x %lld elements, more than 2^50", fn, arg, (long long)x->rows,
                    (long long)s);
  if (!x->data) return bci_fail(ctx, BC_ERR_ARG, "%s: %s->data is NULL; expected a device pointer", fn, arg);
  if (!bci_aligned(x->data, bc_dtype_size(x->dtype)))
    return bci_fail(ctx, BC_ERR_ARG, "%s: %s->data %p is not aligned to its %zu-byte elements", fn, arg, x->data,
                    bc_dtype_size(x->dtype));
  *ld = s;
  return BC_OK;
}

bc_status bci_check_delayed(bc_ctx *ctx, const char *fn, const bc_format *fmt, int64_t n, int history_len,
                            const float *history, const float *scale, int margin, bc_amax_algo algo) {
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (fmt->block != BC_BLOCK_TENSOR)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: format '%s' is block-scaled: its scales come from each block's amax "
                    "in bc_quantize; delayed scaling is for per-tensor formats", fn, fmt->name);
  if (n < 0 || n > ((int64_t)1 << 40))
    return bci_fail(ctx, BC_ERR_ARG, "%s: n is %lld; expected 0 <= n <= 2^40 tensors", fn, (long long)n);
  if (history_len < 1 || history_len > (1 << 20))
    return bci_fail(ctx, BC_ERR_ARG, "%s: history_len is %d; expected 1 to 2^20 steps", fn, history_len);
  if (margin < 0 || margin > 126)
    return bci_fail(ctx, BC_ERR_ARG, "%s: margin is %d; expected 0 <= margin <= 126 (the scale is divided by 2^margin)",
                    fn, margin);
  if (algo != BC_AMAX_MAX && algo != BC_AMAX_MOST_RECENT)
    return bci_fail(ctx, BC_ERR_ARG, "%s: algo is %d; expected BC_AMAX_MAX or BC_AMAX_MOST_RECENT", fn, (int)algo);
  if (n > 0 && (!history || !scale))
    return bci_fail(ctx, BC_ERR_ARG, "%s: argument '%s' is NULL; expected fp32[%s]", fn, history ? "scale" : "history",
                    history ? "n" : "history_len * n");
  if (n > 0 && (!bci_aligned(history, 4) || !bci_aligned(scale, 4)))
    return bci_fail(ctx, BC_ERR_ARG, "%s: history and scale must be 4-byte aligned fp32 arrays", fn);
  return BC_OK;
}
