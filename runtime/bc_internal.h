/* bc_internal.h: declarations shared by the runtime's files; nothing here is public. */
#ifndef BC_INTERNAL_H
#define BC_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "blockcast.h"

#define BCI_HIDDEN __attribute__((visibility("hidden")))

struct lua_State;

/* ---- errors (bc_ctx.c) ---- */
#define BCI_ERR_MAX 8192
/* Set ctx's message and return s. */
BCI_HIDDEN bc_status bci_fail(bc_ctx *ctx, bc_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
BCI_HIDDEN void bci_clear_error(bc_ctx *ctx);

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
  int pack_high_first;     /* 4-bit data: element 2j in the high nibble */
  int sr_allowed;
  bci_dir_spec dir[2];     /* rowwise, columnwise */
};

/* ---- layouts (bc_layout.c) ---- */
/* A scale layout as kernels take it (templates/common.cuh: bc_sl, same field order). The
 * logical scale matrix [lrows, lcols] (rows: view rows or block rows; cols: blocks along a view
 * row) padded to [prows, pcols]; order 0 row-major (ld = pcols), 1 stored transposed (ld =
 * prows), 2 the 128x4 GEMM swizzle. */
typedef struct bci_sl {
  int64_t ld, lrows, lcols, prows, pcols;
  int32_t order, per_row;
} bci_sl;

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

/* ---- kernels (bc_kernel.c) ---- */
typedef struct bci_launch {
  int threads, unroll, blocks_per_sm, tile_rows, tile_cols, col_vec, vec, min_blocks;
  int smem; /* dynamic shared memory bytes per block */
} bci_launch;

typedef struct bci_kernel {
  char name[128];
  char arch[16];
  bci_launch launch;
  void *library; /* CUlibrary */
  void *func;    /* CUkernel, usable as CUfunction */
  int smem_attr; /* the dynamic shared memory the kernel may use so far (48 KiB, or what was set) */
} bci_kernel;

/* Find (AOT -> compile) and load the kernel `name` for the current device. */
BCI_HIDDEN bc_status bci_kernel_get(bc_ctx *ctx, const char *name, const bci_kernel **out);
BCI_HIDDEN bc_status bci_kernel_launch(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, void *stream, void **params);
/* The same with `smem` bytes of dynamic shared memory instead of the launch's own (a kernel whose
 * layout has an optional part, e.g. the staged rows of unaligned outputs of block quantize). */
BCI_HIDDEN bc_status bci_kernel_launch_smem(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, int smem, void *stream, void **params);
BCI_HIDDEN void bci_kernels_free(bc_ctx *ctx);

/* ---- CUDA driver and NVRTC, opened at run time (bc_dl.c) ---- */
BCI_HIDDEN bc_status bci_cuda_load(bc_ctx *ctx);
BCI_HIDDEN bc_status bci_nvrtc_load(bc_ctx *ctx);
/* Current device's arch ("sm_90") and SM count; fails without a context. */
BCI_HIDDEN bc_status bci_cuda_device(bc_ctx *ctx, char arch[16], int *sm_count);
BCI_HIDDEN bc_status bci_cuda_memset32(bc_ctx *ctx, void *dptr, uint32_t value, size_t count, void *stream);

/* ---- disk cache (bc_cache.c) ---- */
BCI_HIDDEN bc_status bci_cache_dir(bc_ctx *ctx, char *out, size_t n);
BCI_HIDDEN void bci_cache_key(const char *src, size_t len, const char *const *opts, int nopts, const char *compiler,
                              char out[65]);
BCI_HIDDEN int bci_cache_read(bc_ctx *ctx, const char *key, void **out, size_t *len);
BCI_HIDDEN void bci_cache_write(bc_ctx *ctx, const char *key, const void *data, size_t len);
BCI_HIDDEN size_t bci_cache_scan(const char *dir, size_t *files, uint64_t *bytes, uint64_t cap);
BCI_HIDDEN void bci_cache_foreach(const char *dir, void (*fn)(const char *path, const char *name, void *user), void *user);
BCI_HIDDEN uint64_t bci_cache_cap(void);

/* ---- NVRTC (bc_jit.c) ---- */
#define BCI_NVRTC_NOPTS 8
/* The NVRTC target for a device arch: the arch itself when NVRTC knows it, else PTX
 * (compute_XX) for the newest arch NVRTC knows. */
BCI_HIDDEN bc_status bci_jit_target(bc_ctx *ctx, const char *device_arch, char target[24]);
/* NVRTC loaded: the options of every compile and cache key (how many; at most BCI_NVRTC_NOPTS) */
BCI_HIDDEN int bci_nvrtc_options(const char *target, char archopt[64], const char *opts[BCI_NVRTC_NOPTS]);
BCI_HIDDEN const char *bci_fast_compile_option(void);
/* opts[0..n) joined by spaces into buf (truncated to size), for reports */
BCI_HIDDEN void bci_join_options(const char *const *opts, int n, char *buf, size_t size);
/* "nvrtc 13.0 archs sm_75 ... sm_120" */
BCI_HIDDEN bc_status bci_nvrtc_fingerprint(bc_ctx *ctx, char *out, size_t n);
/* generate + cache or compile: the image of kernel `name` for NVRTC target `target` */
BCI_HIDDEN bc_status bci_kernel_image(bc_ctx *ctx, const char *name, const char *target, void **image, size_t *len,
                                      bci_launch *launch);
BCI_HIDDEN bc_status bci_nvrtc_compile(bc_ctx *ctx, const char *name, const char *src, const char *arch,
                                       void **out, size_t *out_len);
BCI_HIDDEN bc_status bci_nvrtc_version(bc_ctx *ctx, int *major, int *minor);

/* ---- Lua generator (bc_lua.c) ---- */
BCI_HIDDEN bc_status bci_lua_open(bc_ctx *ctx, char *err, size_t errsz);
BCI_HIDDEN void bci_lua_close(bc_ctx *ctx);
BCI_HIDDEN bc_status bci_lua_load_spec(bc_ctx *ctx, const char *path, const char *text, size_t len,
                                       const bc_format **out);
BCI_HIDDEN bc_status bci_lua_kernel_names(bc_ctx *ctx, const char *arch, const char *format,
                                          void (*fn)(const char *, void *), void *user);
BCI_HIDDEN bc_status bci_lua_generate(bc_ctx *ctx, const char *kernel, const char *arch, char **out, size_t *len);
BCI_HIDDEN bc_status bci_lua_launch(bc_ctx *ctx, const char *kernel, const char *arch, bci_launch *out);
BCI_HIDDEN bc_status bci_lua_spec_hash(bc_ctx *ctx, const char *kernel, char hash[65]);

/* embedded sources (generated build/gen/embed.c) */
typedef struct bci_embedded_file {
  const char *path;
  const char *text;
  size_t len;
} bci_embedded_file;
extern const bci_embedded_file bci_embedded_files[];
extern const size_t bci_embedded_count;

/* ---- AOT archive (bc_aot.c) ---- */
/* Archive: "BCAOT004", u32 count, entries { u16 name_len, name, u16 arch_len, arch,
 * char[65] spec hash, char[65] cache key, bci_launch (9 x i32), u64 size, u8[32] sha256, payload }. */
typedef struct bci_aot_entry {
  const char *name;
  const char *arch;
  const char *spec_hash;
  const char *key; /* the disk-cache key of the entry's source and options */
  bci_launch launch;
  const void *data;
  size_t size;
} bci_aot_entry;
BCI_HIDDEN bc_status bci_aot_index(bc_ctx *ctx);
/* Parse an archive in [p, end); *out (malloc'ed) points into it. Bad data -> an error, never a crash. */
BCI_HIDDEN bc_status bci_aot_parse(bc_ctx *ctx, const unsigned char *p, const unsigned char *end, bci_aot_entry **out,
                                   size_t *count);
BCI_HIDDEN const bci_aot_entry *bci_aot_find(bc_ctx *ctx, const char *name, const char *arch);
BCI_HIDDEN size_t bci_aot_count(bc_ctx *ctx);
BCI_HIDDEN const bci_aot_entry *bci_aot_at(bc_ctx *ctx, size_t i);
extern const unsigned char bci_aot_blob[];
extern const unsigned char bci_aot_blob_end[];

/* ---- sha256 (bc_sha256.c) ---- */
typedef struct bci_sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t fill;
} bci_sha256;
BCI_HIDDEN void bci_sha256_init(bci_sha256 *s);
BCI_HIDDEN void bci_sha256_update(bci_sha256 *s, const void *data, size_t n);
BCI_HIDDEN void bci_sha256_final(bci_sha256 *s, unsigned char out[32]);
BCI_HIDDEN void bci_sha256_hex(const void *data, size_t n, char out[65]);
/* Which compression runs: mode 0 forces the portable code, 1 the SHA extensions where the CPU
 * has them, -1 asks; returns 1 while the SHA extensions are in use (tests compare the paths). */
BCI_HIDDEN int bci_sha256_accel(int mode);

/* ---- the context ---- */
typedef struct bci_kmap_entry {
  char key[160];
  bci_kernel *k;
} bci_kmap_entry;

struct bc_ctx {
  char err[BCI_ERR_MAX];
  pthread_mutex_t lock;
  struct lua_State *L;
  size_t lua_mem, lua_mem_limit;
  bc_format **formats;
  size_t nformats, cap_formats;
  /* loaded kernels: open addressing, key "name@arch" */
  bci_kmap_entry *kmap;
  size_t kmap_cap, kmap_n;
  /* AOT index */
  bci_aot_entry *aot;
  size_t naot;
  int aot_indexed;
  bc_stats stats;
  int cuda_tried, nvrtc_tried;
};

BCI_HIDDEN bc_status bci_format_add(bc_ctx *ctx, bc_format *f);
BCI_HIDDEN bc_status bci_check_tensor(bc_ctx *ctx, const char *fn, const char *arg, const bc_tensor *x, int64_t *ld);
BCI_HIDDEN bc_status bci_check_format(bc_ctx *ctx, const bc_format *fmt, const char *argname);
BCI_HIDDEN char *bci_strdup(const char *s);
/* a then b into path via a unique temp file + rename (no torn files); 0 or -1 */
BCI_HIDDEN int bci_write_atomic(const char *path, const void *a, size_t an, const void *b, size_t bn);
/* mkdir -p; 0 or -1 (errno set) */
BCI_HIDDEN int bci_mkdir_p(const char *path);
BCI_HIDDEN bc_status bci_read_file(bc_ctx *ctx, const char *path, char **out, size_t *len);

/* ---- CPU reference of the block formats (bc_ref.c, bc_ref_block.c) ---- */
/* bc_ref.c's element and dtype helpers: load/store an hp element (store: RN, canonical NaN),
 * RN-even saturating encode, decode, and the NaN-ignoring max |x| of a tensor. */
BCI_HIDDEN float bci_ref_load(const bc_tensor *x, int64_t ld, int64_t r, int64_t c);
BCI_HIDDEN void bci_ref_store(const bc_tensor *x, int64_t ld, int64_t r, int64_t c, float v);
BCI_HIDDEN unsigned bci_ref_encode(const bci_element *e, float x);
BCI_HIDDEN float bci_ref_decode(const bci_element *e, unsigned code);
BCI_HIDDEN float bci_ref_amax(const bc_tensor *x, int64_t ld);
/* bc_ref_quantize (current 1) / bc_ref_quantize_cast (0) and bc_ref_dequantize of a block
 * format; x is checked (ld its row stride), q's format and shape too. */
BCI_HIDDEN bc_status bci_ref_block_cast(bc_ctx *ctx, const char *fn, const bc_tensor *x, int64_t ld, bc_qtensor *q,
                                        int current);
BCI_HIDDEN bc_status bci_ref_block_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out);
/* Philox4x32-10 (Random123): out = the block of counter ctr under key. */
BCI_HIDDEN void bci_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* ---- end of the CPU reference block ---- */

#endif
