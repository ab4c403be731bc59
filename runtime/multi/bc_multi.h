/* multi/bc_multi.h: operations on lists of tensors, one launch per kernel for a whole list
 * (bc_list.c: every family of ops/ and the grouped quantize; bc_delayed.c: delayed scaling).
 * Stands on ops/, jit/, fmt/ and base/. Nothing here is public. */
#ifndef BC_MULTI_H
#define BC_MULTI_H

#include "ops/bc_ops.h"

/* A byte range [lo, hi) that a list call writes, for the overlap check (bc_spans.c): sorts s[0, n)
 * by lo (stably: equal starts keep their order), tmp[n] its scratch; returns 1 with the sorted
 * indexes a < b of the first range b that starts inside an earlier one a, else 0. */
typedef struct bci_span {
  uintptr_t lo, hi;
  int64_t item;
  const char *what;
} bci_span;
BCI_HIDDEN int bci_spans_overlap(bci_span *s, size_t n, bci_span *tmp, size_t *a, size_t *b);

/* the context's list buffers (ctx->list): made by bc_ctx_create, freed by bc_ctx_destroy */
BCI_HIDDEN bc_status bci_list_init(bc_ctx *ctx);
/* side streams allowed (BLOCKCAST_LIST_SIDE is not 0): the lists' and bc_shard_cast's */
BCI_HIDDEN int bci_list_side_on(bc_ctx *ctx);
BCI_HIDDEN void bci_list_free(bc_ctx *ctx);

/* After an all-reduce of the amaxes of some tensors of a list (comm/): for j < m, tensor
 * q[idx[j]] gets amax[j] (device) in its q->amax and, for per-tensor formats, the scale from
 * it in q->scale; one launch per kernel for all of them. */
BCI_HIDDEN bc_status bci_list_amax_back(bc_ctx *ctx, const char *fn, int64_t m, const int64_t *idx, const float *amax,
                                        const bc_qtensor *q, void *stream);

/* A list of launches built by a layer above: begin (takes the context's list lock; n and array
 * are checked as a list call's), then per entry i the sink to record into (its stages start at
 * 0), flush (one launch per kernel and stage), end (releases the lock; returns s). */
BCI_HIDDEN bc_status bci_list_begin(bc_ctx *ctx, const char *fn, int64_t n, const void *array, const char *what);
BCI_HIDDEN bci_sink *bci_list_item(bc_ctx *ctx, int64_t i);
BCI_HIDDEN bc_status bci_list_flush(bc_ctx *ctx, const char *fn, void *stream);
BCI_HIDDEN bc_status bci_list_end(bc_ctx *ctx, bc_status s);

#endif
