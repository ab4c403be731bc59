/* ops/bc_ops.h: the public operations of one tensor (amax, scale, quantize, dequantize,
 * swizzle): argument checks, kernel choice, grids and launches (bc_ops.c). Stands on jit/,
 * fmt/ and base/. The layers above it (multi/, comm/) include this header. Nothing here is public. */
#ifndef BC_OPS_H
#define BC_OPS_H

#include "jit/bc_jit.h"

/* The operations of blockcast.h on one tensor with a sink (NULL: launch now; else record the
 * launches for a list, jit/bc_jit.h). They do not clear the context's error first. */
BCI_HIDDEN bc_status bci_amax(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, float *amax, void *stream);
BCI_HIDDEN bc_status bci_amax_range(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t start, int64_t len, float *amax,
                                    void *stream);
/* the same folded into *amax as it is (the caller zeroed it, or it holds a max to extend) */
BCI_HIDDEN bc_status bci_amax_range_fold(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, int64_t start, int64_t len, float *amax,
                                         void *stream);
BCI_HIDDEN bc_status bci_compute_scale(bc_ctx *ctx, bci_sink *sink, const bc_format *fmt, const float *amax, float *scale,
                                       float *scale_inv, void *stream);
BCI_HIDDEN bc_status bci_quantize(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, bc_qtensor *q, void *stream);
BCI_HIDDEN bc_status bci_quantize_cast(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, bc_qtensor *q, void *stream);
/* Where a block quantize writes, when not q's own dense buffers (the sharded cast writes a band
 * of rows of a whole weight in place): stored columnwise data rows col_ld bytes apart (0: dense),
 * and a direction's scales in layout sl (set: the entries at q's scale pointer in that layout,
 * its padding left alone; a window of a larger layout, fmt/bc_fmt.h: bci_sl). A swizzled window
 * with an in-atom origin (roff, coff) needs a list sink: only the list variants take it. */
typedef struct bci_qdst {
  int64_t col_ld;
  int sl_set[2]; /* rowwise, columnwise */
  bci_sl sl[2];
} bci_qdst;
/* bci_quantize_cast of a block format (its global amax, if any, given) into dst */
BCI_HIDDEN bc_status bci_quantize_block_into(bc_ctx *ctx, bci_sink *sink, const bc_tensor *x, bc_qtensor *q, const bci_qdst *dst,
                                             void *stream);
BCI_HIDDEN bc_status bci_dequantize(bc_ctx *ctx, bci_sink *sink, const bc_qtensor *q, bc_direction dir, const bc_tensor *out,
                                    void *stream);
BCI_HIDDEN bc_status bci_scale_swizzle(bc_ctx *ctx, bci_sink *sink, const bc_format *fmt, int64_t rows, int64_t cols,
                                       bc_direction dir, const void *src, int from_swizzled, void *dst, void *stream);

#endif
