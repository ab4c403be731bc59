/* multi/bc_multi.h: operations on lists of tensors, one launch per kernel for a whole list
 * (bc_list.c: every family of ops/ and the grouped quantize; bc_delayed.c: delayed scaling).
 * Stands on ops/, jit/, fmt/ and base/. Nothing here is public. */
#ifndef BC_MULTI_H
#define BC_MULTI_H

#include "ops/bc_ops.h"

/* the context's list buffers (ctx->list): made by bc_ctx_create, freed by bc_ctx_destroy */
BCI_HIDDEN bc_status bci_list_init(bc_ctx *ctx);
BCI_HIDDEN void bci_list_free(bc_ctx *ctx);

/* After an all-reduce of the amaxes of some tensors of a list (comm/): for j < m, tensor
 * q[idx[j]] gets amax[j] (device) in its q->amax and, for per-tensor formats, the scale from
 * it in q->scale; one launch per kernel for all of them. */
BCI_HIDDEN bc_status bci_list_amax_back(bc_ctx *ctx, const char *fn, int64_t m, const int64_t *idx, const float *amax,
                                        const bc_qtensor *q, void *stream);

#endif
