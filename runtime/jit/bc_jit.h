/* jit/bc_jit.h: from a kernel's name to a loaded kernel: the embedded Lua generator (bc_lua.c),
 * NVRTC (bc_nvrtc.c), the AOT archive (bc_aot.c), the disk cache (bc_cache.c) and the kernel
 * registry with its launch (bc_kernel.c). Stands on fmt/ and base/ only. Nothing here is public. */
#ifndef BC_JIT_H
#define BC_JIT_H

#include "fmt/bc_fmt.h"

/* ---- kernels (bc_kernel.c) ---- */
typedef struct bci_launch {
  int threads, unroll, blocks_per_sm, tile_rows, tile_cols, col_vec, vec, min_blocks;
  int smem;       /* dynamic shared memory bytes per block */
  int row_staged; /* quantize_block.cu: rowwise codes always staged (BC_ROW_STAGED), never stored from the lanes */
  int row_smem;   /* quantize_block.cu: the staged rowwise codes' shared memory (BC_ROW_SMEM), which the host
                     adds to launches that stage them (rows not 16-byte aligned, or row_staged); 0 elsewhere */
} bci_launch;

typedef struct bci_kernel {
  char name[128];
  char arch[16];
  bci_launch launch;
  void *library; /* CUlibrary */
  void *func;    /* CUkernel, usable as CUfunction */
  void *func_p;  /* a list variant's parameter entry "<name>_p" (templates/list.cu), NULL if none */
  int smem_attr; /* the dynamic shared memory the kernel may use so far (48 KiB, or what was set) */
} bci_kernel;

/* Find (AOT -> compile) and load the kernel `name` for the current device. */
BCI_HIDDEN bc_status bci_kernel_get(bc_ctx *ctx, const char *name, const bci_kernel **out);
/* The same with the name made by a printf format ("bc_amax__%s", dtype name) whose only
 * conversions are %s. The format must be a string literal and each argument a string that stays
 * unchanged while ctx lives (a format's name, bc_dtype_name(), a literal; never a buffer that is
 * written again): a per-thread memo knows an earlier lookup by these addresses alone. */
BCI_HIDDEN bc_status bci_kernel_getf(bc_ctx *ctx, const bci_kernel **out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Its name formatting: printf's rules for %s and %%, the only conversions kernel names use
 * (half of vsnprintf's time on the development machine; tests/bench/bench_host). Returns the
 * length; -1 for another conversion; -2 when the name does not fit in cap bytes (out then holds
 * its first cap - 1). */
BCI_HIDDEN int bci_kernel_name(char *out, size_t cap, const char *fmt, va_list ap);
BCI_HIDDEN bc_status bci_kernel_launch(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, void *stream, void **params);
/* A list variant's parameter entry (k->func_p), one argument: the parameter block `p`. */
BCI_HIDDEN bc_status bci_kernel_launch_p(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned bx, int smem, void *stream,
                                         void *p);
/* The same with `smem` bytes of dynamic shared memory instead of the launch's own (a kernel whose
 * layout has an optional part, e.g. the staged rows of unaligned outputs of block quantize). */
BCI_HIDDEN bc_status bci_kernel_launch_smem(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, int smem, void *stream, void **params);
BCI_HIDDEN void bci_kernels_free(bc_ctx *ctx);
/* This context's kernels generated with the tuning file text `text` (named `path` in messages and
 * sources) instead of gen/tuning/<arch>.lua, the AOT set bypassed; NULL: back to the file. Drops
 * the kernels loaded so far (blockcast tune: one candidate after another), so the context must be
 * idle: no call of it running in another thread, no launch of it still queued. */
BCI_HIDDEN bc_status bci_set_tuning(bc_ctx *ctx, const char *path, const char *text);
/* Whether kernel `name` is loaded in ctx for the current device (a call launched it). */
BCI_HIDDEN int bci_kernel_loaded(bc_ctx *ctx, const char *name);

/* ---- a launch now, or recorded into a list (bc_kernel.c) ----
 * The operations of ops/ describe each launch once: kernel, grid, block, shared memory and the
 * arguments with their sizes. Without a sink it is launched at once; with one it is recorded,
 * its arguments packed as the list item of templates/list.cu holds them (each at a multiple of
 * its size, 8 at most), so that multi/ runs the records of many tensors as one launch of the
 * kernel's list variant. `stage` numbers a tensor's records in order (a later record of one
 * tensor may read what an earlier one wrote); `item` is the list index of the tensor. */
typedef struct bci_arg {
  const void *p;
  size_t size;
} bci_arg;
#define BCI_ARG(x) { &(x), sizeof(x) }

typedef struct bci_rec {
  const bci_kernel *k;
  unsigned grid[3], threads;
  int smem, stage;
  int64_t item;
  size_t off, len; /* packed arguments in the sink's bytes */
} bci_rec;

typedef struct bci_sink {
  bci_rec *recs;
  size_t n, cap;
  unsigned char *bytes;
  size_t len, bytes_cap;
  int stage;    /* the next record's stage (the caller resets it per tensor) */
  int64_t item; /* the tensor being recorded */
} bci_sink;

#define BCI_MAX_ARGS 24
BCI_HIDDEN bc_status bci_run(bc_ctx *ctx, bci_sink *sink, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz,
                             unsigned threads, int smem, void *stream, const bci_arg *args, int nargs);
/* n fp32 words at p set to 0: cuMemsetD32Async, or a record of kernel bc_zero */
BCI_HIDDEN bc_status bci_zero32(bc_ctx *ctx, bci_sink *sink, float *p, int64_t n, void *stream);
/* n fp32 words src -> dst: a launch or a record of kernel bc_copy32 */
BCI_HIDDEN bc_status bci_copy32(bc_ctx *ctx, bci_sink *sink, const float *src, float *dst, int64_t n, void *stream);
/* the packed size of arguments (what bci_run records) */
BCI_HIDDEN size_t bci_args_packed(const bci_arg *args, int nargs, unsigned char *out);

/* the context's loaded kernels (ctx->kmap) */
typedef struct bci_kmap_entry {
  char key[160];
  bci_kernel *k;
} bci_kmap_entry;

/* ---- disk cache (bc_cache.c) ---- */
#define BCI_CACHE_DIR_MAX 900 /* bytes of the cache directory's path, its NUL included */
/* the cache directory into out[BCI_CACHE_DIR_MAX]; a path that does not fit is an error */
BCI_HIDDEN bc_status bci_cache_dir(bc_ctx *ctx, char *out, size_t n);
BCI_HIDDEN void bci_cache_key(const char *src, size_t len, const char *const *opts, int nopts, const char *compiler,
                              char out[65]);
BCI_HIDDEN int bci_cache_read(bc_ctx *ctx, const char *key, void **out, size_t *len);
/* `blockcast cache`: the file at path (name: its file name) is a cache entry, named by its key in
 * the subdirectory of the key's first two digits, whole and valid (its mtime untouched) */
BCI_HIDDEN int bci_cache_entry_name(const char *path, const char *name);
BCI_HIDDEN int bci_cache_verify_file(const char *path, const char *name);
/* a temporary file of a cache writer (bci_write_atomic: <key>.bck.<pid>.<thread>.<n>.tmp) */
BCI_HIDDEN int bci_cache_tmp_name(const char *name);
BCI_HIDDEN void bci_cache_write(bc_ctx *ctx, const char *key, const void *data, size_t len);
BCI_HIDDEN size_t bci_cache_scan(const char *dir, size_t *files, uint64_t *bytes, uint64_t cap);
BCI_HIDDEN void bci_cache_foreach(const char *dir, void (*fn)(const char *path, const char *name, void *user), void *user);
/* $BLOCKCAST_CACHE_MAX_MB in bytes (default 1024 MiB); *bad (may be NULL) = 1 when it is set but
 * not a whole number of MiB from 1 to 2^40 (the default is then used) */
BCI_HIDDEN uint64_t bci_cache_cap(int *bad);

/* ---- NVRTC (bc_nvrtc.c) ---- */
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
/* The generator function M[fn] called with string arguments; a string result into *out
 * (malloc'ed; a boolean: "1" or "", nil: ""). */
BCI_HIDDEN bc_status bci_lua_call_str(bc_ctx *ctx, const char *fn, int argc, const char *const *argv, char **out);
/* What a kernel is (the generator's kernel_desc) */
typedef struct bci_kernel_desc {
  char family[32], dtype[8], dir[8], format[64], template_[48];
  int flat, list;
} bci_kernel_desc;
BCI_HIDDEN bc_status bci_lua_kernel_desc(bc_ctx *ctx, const char *kernel, bci_kernel_desc *out);

/* embedded sources (generated build/gen/embed.c) */
typedef struct bci_embedded_file {
  const char *path;
  const char *text;
  size_t len;
} bci_embedded_file;
extern const bci_embedded_file bci_embedded_files[];
extern const size_t bci_embedded_count;

/* ---- AOT archive (bc_aot.c) ---- */
/* Archive: "BCAOT006", u32 count, entries { u16 name_len, name, u16 arch_len, arch,
 * char[65] spec hash, char[65] cache key, bci_launch (11 x i32), u64 size, u8[32] sha256, payload }. */
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
BCI_HIDDEN void bci_aot_free(bc_ctx *ctx);
extern const unsigned char bci_aot_blob[];
extern const unsigned char bci_aot_blob_end[];

#endif
