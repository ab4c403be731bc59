/* fmt/bc_fmt.h: formats, their element tables and layouts, and the checks of the tensors the
 * operations take: the data that jit/ builds from specs and that ref/ and ops/ read. Stands on
 * base/ only. Nothing here is public. */
#ifndef BC_FMT_H
#define BC_FMT_H

#include "base/bc_base.h"

/* the most elements a tensor may span (rows x row stride) */
#define BCI_MAX_ELEMS ((int64_t)1 << 50)

/* ---- formats ---- */
typedef struct bci_element {
  char name[32];
  int bits, exponent_bits, mantissa_bits, bias, is_signed;
  int subnormals;          /* 0: exponent 0 is a normal binade (e8m0) */
  double max_finite;
  int max_code;            /* largest finite positive code */
  int nan_encode;          /* -1: no NaN */
  uint8_t is_nan[256], is_inf[256];
  double value[256];       /* layout value of each code (CPU reference) */
} bci_element;
/* value[] from the element's fields (bc_format.c) */
BCI_HIDDEN void bci_element_prepare(bci_element *e);

enum { BCI_RULE_AMAX = 0, BCI_RULE_RCEIL = 1, BCI_RULE_FLOOR = 2, BCI_RULE_TWO_LEVEL = 3 };

/* One direction of a block format, as its spec gives it. */
typedef struct bci_dir_spec {
  int transposed;          /* data stored [cols, rows] (columnwise only) */
  int scale_order;         /* 0: stored as the logical scale matrix, 1: stored transposed */
  int scale_per_row;       /* one entry per row of the view (a 2D block's scale repeated) */
  int pad_rows, pad_cols;  /* multiples the stored scale matrix is padded to */
} bci_dir_spec;

struct bc_format {
  char name[64];
  char *description;
  char *spec_file;
  char hash[65];
  bci_element elem;
  bc_block_kind block;
  int has_rowwise, has_columnwise, columnwise_transposed;
  /* scale rule */
  double eps;
  int pow2;
  int inf_dtype_max;       /* an Inf scale becomes the input dtype's max finite (else FLT_MAX) */
  /* block formats */
  int block_rows, block_cols;
  int rule;                /* BCI_RULE_* */
  char scale_type[32];     /* "fp32" or the scale element's name */
  int scale_bytes;
  bci_element selem;       /* the scale element (rceil/floor/two_level) */
  /* packing of sub-byte elements (gen/formats.lua: pack_group): a data row is groups of
   * pack_group_elems elements in pack_group_bytes bytes; in a group read as a little-endian
   * integer element k is at bits [k b, (k+1) b), or [(n-1-k) b, (n-k) b) when pack_high_first */
  int pack_high_first;
  int pack_group_elems, pack_group_bytes;
  int nan_scale;           /* nan_policy "scale_nan": a NaN input makes its block's scale NaN */
  int sr_allowed;
  bci_dir_spec dir[2];     /* rowwise, columnwise */
};

/* ---- the registry of a context (bc_format.c) ---- */
BCI_HIDDEN bc_status bci_format_add(bc_ctx *ctx, bc_format *f);
BCI_HIDDEN void bci_formats_free(bc_ctx *ctx);
/* fmt is a format of this context (argname names it in the message) */
BCI_HIDDEN bc_status bci_check_format(bc_ctx *ctx, const bc_format *fmt, const char *argname);

/* ---- layouts (bc_layout.c) ---- */
/* A scale layout as kernels take it (templates/common.cuh: bc_sl, same field order). The
 * logical scale matrix [lrows, lcols] (rows: view rows or block rows; cols: blocks along a view
 * row) padded to [prows, pcols]; order 0 row-major (ld = pcols), 1 stored transposed (ld =
 * prows), 2 the 128x4 GEMM swizzle (ld = pcols: atoms of 4 columns a band of 128 rows). A window
 * of a larger layout (bc_shard_cast's regions) has the larger one's ld and its own extent as the
 * padded one (no padding); a swizzled window's order is BCI_SL_SWZ_WINDOW(roff, coff): its entry
 * (r, c) is the larger layout's (r + roff, c + coff) counted from the atom that holds its first
 * entry (roff < 128, coff < 4). Only the block quantize kernels' list variants take one
 * (templates/common.cuh, BC_SL_WINDOW). */
typedef struct bci_sl {
  int64_t ld, lrows, lcols, prows, pcols;
  int32_t order, per_row;
} bci_sl;
#define BCI_SL_SWZ_WINDOW(roff, coff) (2 + ((int32_t)(roff) << 8) + ((int32_t)(coff) << 16))

/* The geometry of one direction of a quantized [rows, cols] tensor. The view is the matrix whose
 * rows hold the blocks: rowwise [rows, cols], columnwise [cols, rows]. Data is stored as the view
 * (data_is_view) or as its transpose (MXFP8 columnwise: [rows, cols]). */
typedef struct bci_geom {
  int64_t vrows, vcols;
  int vbr, vbc;            /* block shape in the view */
  int data_is_view;
  int64_t drows, dcols;    /* stored data matrix, elements */
  size_t data_bytes;
  bci_sl sl;
  int64_t srows, scols;    /* stored scale matrix */
  int64_t svalid_rows, svalid_cols;
  size_t scale_bytes;
} bci_geom;
BCI_HIDDEN bc_status bci_geom_get(bc_ctx *ctx, const char *fn, const bc_format *f, int64_t rows, int64_t cols,
                                  bc_direction dir, int swizzled, bci_geom *g);
BCI_HIDDEN int64_t bci_sl_offset(const bci_sl *sl, int64_t r, int64_t c);
/* fmt, a [rows, cols] shape and a direction, as the layout calls take them */
BCI_HIDDEN bc_status bci_check_shape_dir(bc_ctx *ctx, const char *fn, const bc_format *fmt, int64_t rows, int64_t cols,
                                          bc_direction dir);

/* ---- grouped tensors (bc_layout.c): group g of a [sum(group_rows), cols] input is the rows
 * [r0, r0 + group_rows[g]) and a tensor of its own at the offsets bc_grouped_layout gives ---- */
BCI_HIDDEN bc_status bci_check_grouped(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t groups,
                                       const int64_t *group_rows, const bc_qtensor *q, int64_t *ld);
typedef struct bci_group_cursor {
  int64_t g, r0;
  bc_group_offsets at;
} bci_group_cursor;
BCI_HIDDEN void bci_group_first(bci_group_cursor *c);
/* the views of the cursor's group (x rows, q buffers at their offsets; amax, scale at [g];
 * sr_offset + g), then the cursor moves to the next group */
BCI_HIDDEN bc_status bci_group_next(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t ld, const int64_t *group_rows,
                                    const bc_qtensor *q, bci_group_cursor *c, bc_tensor *xg, bc_qtensor *qg);

/* ---- tensor checks (bc_tensor.c) ---- */
/* x is a well-formed hp tensor of fn's argument arg; *ld its row stride in elements */
BCI_HIDDEN bc_status bci_check_tensor(bc_ctx *ctx, const char *fn, const char *arg, const bc_tensor *x, int64_t *ld);
/* the arguments of a delayed-scaling update (bc_delayed_scale_update and its reference) */
BCI_HIDDEN bc_status bci_check_delayed(bc_ctx *ctx, const char *fn, const bc_format *fmt, int64_t n, int history_len,
                                       const float *history, const float *scale, int margin, bc_amax_algo algo);

#endif
