/* ref/bc_ref.h: the CPU reference (bc_ref_elem.c: elements, dtypes, amax; bc_ref_tensor.c: the
 * public reference calls and the per-tensor formats; bc_ref_block.c: the block formats). Stands
 * on fmt/ and base/ only: it launches nothing and never reaches the generator, so it stays an
 * independent check of the kernels. */
#ifndef BC_REF_H
#define BC_REF_H

#include <string.h>

#include "fmt/bc_fmt.h"

static inline float bci_f32_from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t bci_bits_from_f32(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* ---- primitives (bc_ref_elem.c) ---- */
/* load/store an hp element (store: RN, canonical NaN),
 * RN-even saturating encode, decode, and the NaN-ignoring max |x| of a tensor. */
BCI_HIDDEN float bci_ref_load(const bc_tensor *x, int64_t ld, int64_t r, int64_t c);
BCI_HIDDEN void bci_ref_store(const bc_tensor *x, int64_t ld, int64_t r, int64_t c, float v);
BCI_HIDDEN unsigned bci_ref_encode(const bci_element *e, float x);
BCI_HIDDEN float bci_ref_decode(const bci_element *e, unsigned code);
BCI_HIDDEN float bci_ref_amax(const bc_tensor *x, int64_t ld);
/* ---- block formats (bc_ref_block.c) ---- */
/* bc_ref_quantize (current 1) / bc_ref_quantize_cast (0) and bc_ref_dequantize of a block
 * format; x is checked (ld its row stride), q's format and shape too. */
BCI_HIDDEN bc_status bci_ref_block_cast(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t ld, bc_qtensor *q,
                                        int current);
BCI_HIDDEN bc_status bci_ref_block_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out);
/* Philox4x32-10 (Random123): out = the block of counter ctr under key. */
BCI_HIDDEN void bci_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
