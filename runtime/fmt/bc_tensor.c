/* fmt/bc_tensor.c: the checks of a high-precision tensor argument, shared by ops/ and ref/. */
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
