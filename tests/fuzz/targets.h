/* tests/fuzz/targets.h: the fuzz targets, shared by the libFuzzer drivers (fuzz_*.c, built by
 * `./build.sh fuzz`) and the corpus replay test (tests/13-fuzz-corpus.c, in every tier).
 *   spec: arbitrary bytes as a spec file -> loader, validator, and the generator when it loads
 *   args: bytes decoded into calls of every public entry point with fuzzed shapes, strides,
 *         dtypes, pointers, formats, names and values (host pointers only: no device memory)
 *   aot:  bytes as an AOT kernel archive -> the archive reader
 *   cache: bytes as a disk-cache file -> the cache reader (a miss or a verified hit, never a crash)
 * Each returns 0; a bug shows as a crash, a sanitizer report, or abort() on a broken invariant
 * (a failed call must leave a message). Run without a GPU driver: valid GPU calls then stop at
 * BC_ERR_UNAVAILABLE before touching memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/bc_jit.h"

#ifdef BC_FUZZ_LUA_COVERAGE
/* libFuzzer sees only C coverage; the spec validator and the generator are Lua. A line hook on
 * the generator's state feeds (chunk, line) pairs into libFuzzer's extra counters. */
#include <lua.h>
__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t fz_lua_counters[1 << 14];
static void fz_line_hook(lua_State *L, lua_Debug *ar) {
  if (!lua_getinfo(L, "S", ar)) return;
  uint32_t h = 2166136261u;
  for (const char *c = ar->source; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
  h = (h ^ (uint32_t)ar->currentline) * 16777619u;
  fz_lua_counters[h & ((1 << 14) - 1)]++;
}
#endif

static inline bc_ctx *fz_ctx(void) {
  static bc_ctx *ctx;
  static unsigned uses;
  if (ctx && ++uses % 512 == 0) { /* formats loaded by the spec target accumulate: start over now and then */
    bc_ctx_destroy(ctx);
    ctx = NULL;
  }
  if (!ctx) {
    if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) abort();
#ifdef BC_FUZZ_LUA_COVERAGE
    lua_sethook(ctx->L, fz_line_hook, LUA_MASKLINE, 0);
#endif
  }
  return ctx;
}

static inline void fz_expect_message(bc_ctx *ctx, bc_status s) {
  if (s != BC_OK && bc_last_error(ctx)[0] == 0) abort();
}

static inline int fuzz_spec_one(const uint8_t *d, size_t n) {
  bc_ctx *ctx = fz_ctx();
  const bc_format *f = NULL;
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_lua_load_spec(ctx, "fuzz.lua", (const char *)d, n, &f);
  pthread_mutex_unlock(&ctx->lock);
  fz_expect_message(ctx, s);
  if (s == BC_OK) {
    char name[160];
    snprintf(name, sizeof name, "bc_quantize_%s__bf16__rowcol", f->name);
    char *src = NULL;
    s = bc_kernel_source(ctx, name, "sm_90", &src, NULL);
    fz_expect_message(ctx, s);
    free(src);
  }
  return 0;
}

typedef struct fz_reader {
  const uint8_t *p;
  size_t n;
} fz_reader;

static inline uint64_t fz_u64(fz_reader *r, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) {
    v = v << 8 | (r->n ? *r->p : 0);
    if (r->n) { r->p++; r->n--; }
  }
  return v;
}

/* interesting int64 values for shapes and strides */
static inline int64_t fz_dim(fz_reader *r) {
  static const int64_t special[] = { 0, 1, 2, 3, 7, 16, 17, 127, 128, 129, -1, -128, INT64_MAX, INT64_MIN,
                                     (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 40, (int64_t)1 << 50,
                                     ((int64_t)1 << 50) + 1, INT64_MAX / 2 };
  uint64_t sel = fz_u64(r, 1);
  if (sel < 200) return (int64_t)(sel % 64);
  if (sel < 240) return special[sel % (sizeof special / sizeof *special)];
  return (int64_t)fz_u64(r, 8);
}

static inline void *fz_ptr(fz_reader *r, void *good) {
  switch (fz_u64(r, 1) % 4) {
  case 0: return NULL;
  case 1: return (char *)good + 1; /* misaligned */
  default: return good;
  }
}

static inline int fuzz_args_one(const uint8_t *d, size_t n) {
  static _Alignas(64) unsigned char host[1 << 16]; /* stands in for memory; never used as device memory */
  bc_ctx *ctx = fz_ctx();
  fz_reader r = { d, n };
  /* per-tensor and block formats (1D fp8, 2D, MX e8m0, two-level 4-bit), NULL, a bogus one */
  const char *names[] = { "fp8_e4m3_tensor", "fp8_e5m2_tensor", "fp8_block_128x128", "mxfp8_e4m3", "mxfp4", "nvfp4", "nvfp4_2d" };
  const bc_format *fmts[8] = { NULL };
  for (int i = 0; i < 7; i++) bc_format_get(ctx, names[i], &fmts[i + 1]);
  bc_format bogus;
  memset(&bogus, 0, sizeof bogus);
  for (int iter = 0; iter < 8 && r.n; iter++) {
    unsigned op = (unsigned)fz_u64(&r, 1) % 15;
    bc_tensor x = { fz_ptr(&r, host), (bc_dtype)((int)fz_u64(&r, 1) % 5 - 1), fz_dim(&r), fz_dim(&r), fz_dim(&r) };
    unsigned fsel = (unsigned)fz_u64(&r, 1) % 9;
    const bc_format *fmt = fsel < 8 ? fmts[fsel] : &bogus;
    bc_qtensor q = { fmt, fz_dim(&r), fz_dim(&r), fz_ptr(&r, host + 4096), fz_ptr(&r, host + 8192),
                     fz_ptr(&r, host + 12288), fz_ptr(&r, host + 16384), fz_ptr(&r, host + 20480),
                     fz_ptr(&r, host + 24576), 0, 0, 0, 0 };
    unsigned flags = (unsigned)fz_u64(&r, 1);
    q.scale_swizzled = flags & 1;
    q.stochastic_rounding = (flags >> 1) & 1;
    q.sr_seed = fz_u64(&r, 8);
    q.sr_offset = fz_u64(&r, 8);
    char str[64];
    size_t sl = fz_u64(&r, 1) % sizeof str;
    for (size_t i = 0; i < sl; i++) str[i] = (char)fz_u64(&r, 1);
    str[sl] = 0;
    bc_status s = BC_OK;
    switch (op) {
    case 0: s = bc_amax(ctx, &x, fz_ptr(&r, host + 32768), NULL); break;
    case 1: s = bc_quantize(ctx, &x, &q, NULL); break;
    case 2: s = bc_quantize_cast(ctx, &x, &q, NULL); break;
    case 3: s = bc_dequantize(ctx, &q, (bc_direction)fz_u64(&r, 1), &x, NULL); break;
    case 4: s = bc_compute_scale(ctx, fmt, fz_ptr(&r, host), fz_ptr(&r, host + 4), fz_ptr(&r, host + 8), NULL); break;
    case 5: {
      size_t a, b;
      bc_direction dir = (bc_direction)fz_u64(&r, 1);
      s = bc_qtensor_sizes(ctx, fmt, q.rows, q.cols, dir, &a, &b);
      bc_qlayout l;
      bc_status s2 = bc_qtensor_layout(ctx, fmt, q.rows, q.cols, dir, q.scale_swizzled, (flags & 4) ? NULL : &l);
      if (s == BC_OK && s2 == BC_OK && (l.data_bytes != a || (!q.scale_swizzled && l.scale_bytes != b))) abort();
      if (flags & 8) s = bc_scale_swizzle(ctx, fmt, q.rows, q.cols, dir, q.rowwise_data, (flags >> 4) & 1, q.columnwise_data, NULL);
      break;
    }
    case 6: {
      const bc_format *g;
      s = bc_format_get(ctx, sl ? str : NULL, &g);
      break;
    }
    case 7: {
      char *src = NULL;
      s = bc_kernel_source(ctx, str, (fz_u64(&r, 1) & 1) ? "sm_90" : str, &src, NULL);
      free(src);
      break;
    }
    case 8: {
      float v;
      uint32_t bits = (uint32_t)fz_u64(&r, 4);
      memcpy(&v, &bits, 4);
      uint8_t code;
      float back, sc, si;
      s = bc_ref_encode(ctx, fmt, v, &code);
      if (s == BC_OK) s = bc_ref_decode(ctx, fmt, code, &back);
      if (s == BC_OK) s = bc_ref_scale(ctx, fmt, v, &sc, &si);
      break;
    }
    case 9: {
      /* host reference with buffers sized from the shape when it is small and valid */
      if (x.rows > 0 && x.cols > 0 && x.rows <= 64 && x.cols <= 64 && x.row_stride >= 0 && x.row_stride <= 64) {
        x.data = host;
        x.dtype = (bc_dtype)(fz_u64(&r, 1) % 3);
        for (size_t i = 0; i < 4096 * 4 && r.n; i++) host[i] = (unsigned char)fz_u64(&r, 1);
        /* data <= 4 KiB and scales <= 4 KiB each for a 64 x 64 tensor of any built-in format */
        float fl[4] = { 0 };
        bc_qtensor hq = { fmt, x.rows, x.cols, host + 20480, host + 28672, (fz_u64(&r, 1) & 1) ? host + 24576 : NULL, host + 32768,
                          &fl[2], &fl[3], q.scale_swizzled, q.stochastic_rounding, q.sr_seed, q.sr_offset };
        if (fmt && fmt->block == BC_BLOCK_TENSOR) { hq.rowwise_scale_inv = &fl[0]; hq.columnwise_scale_inv = &fl[1]; }
        s = bc_ref_quantize(ctx, &x, &hq);
        if (s == BC_OK) {
          bc_tensor o = { host + 40000, (bc_dtype)(fz_u64(&r, 1) % 3), x.rows, x.cols, 0 };
          s = bc_ref_dequantize(ctx, &hq, BC_ROWWISE, &o);
        }
      }
      break;
    }
    case 10: s = bc_ref_amax(ctx, &x, NULL); break;
    case 11: {
      /* delayed scaling: any n, history length, margin and algo; the reference on host memory
       * when the history fits (L * n <= 1024 floats) */
      int64_t dn = (int64_t)fz_u64(&r, 2) - 8;
      int hl = (int)fz_u64(&r, 2) - 4;
      int margin = (int)fz_u64(&r, 1) - 64;
      bc_amax_algo algo = (bc_amax_algo)((int)fz_u64(&r, 1) % 4 - 1);
      s = bc_delayed_scale_update(ctx, fmt, dn, hl, fz_ptr(&r, host), fz_ptr(&r, host + 4096), fz_ptr(&r, host + 8192),
                                  margin, algo, NULL);
      fz_expect_message(ctx, s);
      if (dn >= 0 && hl >= 1 && dn * hl <= 1024) {
        for (size_t i = 0; i < 4096 * 2 && r.n; i++) host[i] = (unsigned char)fz_u64(&r, 1);
        s = bc_ref_delayed_scale_update(ctx, fmt, dn, hl, (float *)host, (float *)(host + 4096),
                                        (flags & 1) ? (float *)(host + 8192) : NULL, margin, algo);
      }
      break;
    }
    case 12: {
      /* lists and groups: the list calls on up to 4 entries made of x and q (without a GPU they
       * end in argument errors or the missing driver), the grouped layout, and the grouped CPU
       * reference on host buffers when the groups are small */
      bc_tensor xs[4] = { x, x, x, x };
      bc_qtensor qs[4] = { q, q, q, q };
      int64_t ln = (int64_t)(fz_u64(&r, 1) % 7) - 2, gr[4];
      for (int i = 0; i < 4; i++) gr[i] = (int64_t)(fz_u64(&r, 1) % 24) - 2;
      bc_direction dir = (bc_direction)fz_u64(&r, 1);
      switch ((flags >> 5) & 7) {
      case 0: s = bc_quantize_list(ctx, ln, (flags & 16) ? NULL : xs, qs, NULL); break;
      case 1: s = bc_quantize_cast_list(ctx, ln, xs, (flags & 16) ? NULL : qs, NULL); break;
      case 2: s = bc_amax_list(ctx, ln, xs, fz_ptr(&r, host + 32768), NULL); break;
      case 3: s = bc_dequantize_list(ctx, ln, qs, dir, (flags & 16) ? NULL : xs, NULL); break;
      case 4: {
        bc_swizzle_job jobs[4];
        for (int i = 0; i < 4; i++) jobs[i] = (bc_swizzle_job){ fmt, q.rows, q.cols, dir, q.rowwise_data, q.columnwise_data };
        s = bc_scale_swizzle_list(ctx, ln, jobs, flags & 1, NULL);
        break;
      }
      case 5: s = bc_compute_scale_list(ctx, fmt, ln, fz_ptr(&r, host), fz_ptr(&r, host + 64), fz_ptr(&r, host + 128), NULL); break;
      case 6: {
        int64_t st[4], len[4];
        for (int i = 0; i < 4; i++) {
          st[i] = (int64_t)fz_u64(&r, 8);
          len[i] = (int64_t)fz_u64(&r, 8);
        }
        s = (flags & 16) ? bc_amax_range(ctx, &x, st[0], len[0], fz_ptr(&r, host + 32768), NULL)
                         : bc_amax_range_list(ctx, ln, xs, st, len, fz_ptr(&r, host + 32768), NULL);
        break;
      }
      default: {
        bc_group_offsets off[5];
        int dirs = (int)(fz_u64(&r, 1) % 5) - 1;
        s = bc_grouped_layout(ctx, fmt, ln, (flags & 16) ? NULL : gr, x.cols, dirs, q.scale_swizzled, off);
        int64_t rows = 0;
        for (int i = 0; i < ln && i < 4; i++) rows += gr[i];
        if (s == BC_OK && x.cols > 0 && x.cols <= 64 && rows <= 64 && off[ln].rowwise_data <= 4096 && off[ln].rowwise_scale_inv <= 4096 &&
            off[ln].columnwise_data <= 4096 && off[ln].columnwise_scale_inv <= 4096) {
          fz_expect_message(ctx, s);
          for (size_t i = 0; i < 64 * 64 * 4 && r.n; i++) host[i] = (unsigned char)fz_u64(&r, 1);
          bc_tensor hx = { host, (bc_dtype)(fz_u64(&r, 1) % 3), rows, x.cols, 0 };
          float fl[8] = { 0 };
          bc_qtensor hq = { fmt, rows, x.cols, (dirs & 1) ? host + 20480 : NULL, host + 24576, (dirs & 2) ? host + 28672 : NULL,
                            host + 32768, fl, fl + 4, q.scale_swizzled, q.stochastic_rounding, q.sr_seed, q.sr_offset };
          s = bc_ref_quantize_grouped(ctx, &hx, ln, gr, &hq);
        }
        break;
      }
      }
      break;
    }
    case 13: {
      /* collectives on a one-rank local communicator (no peer to wait for): the byte formula
       * with any rank count and rows, the calls' argument checks (without a GPU they end in
       * argument errors or the missing driver), the sharded cast and its finish, NCCL id strings */
      static bc_comm *one;
      if (!one && bc_comm_create_local(ctx, 1, &one) != BC_OK) break;
      int64_t rows[70];
      int W = (int)(fz_u64(&r, 1) % 70) - 2;
      for (int i = 0; i < 70; i++) rows[i] = (int64_t)fz_u64(&r, 2) - 16;
      int dirs = (int)(fz_u64(&r, 1) % 5) - 1, rank = (int)(fz_u64(&r, 1) % 72) - 1;
      uint64_t bytes = 0;
      int64_t r1[1] = { x.rows };
      bc_comm_id id;
      switch ((int)(fz_u64(&r, 1) % 9)) {
      case 0: s = bc_all_gather_bytes(ctx, fmt, W, (flags & 16) ? NULL : rows, x.cols, dirs, rank, &bytes); break;
      case 1: s = bc_all_gather(ctx, one, &x, (flags & 16) ? rows : r1, &q, NULL); break;
      case 2: s = bc_all_gather_quantized(ctx, one, &q, (flags & 16) ? rows : r1, &q, NULL); break;
      case 3: s = bc_quantize_comm(ctx, one, &x, &q, NULL); break;
      case 4: {
        bc_tensor x4[3] = { x, x, x };
        bc_qtensor q4[3] = { q, q, q };
        s = bc_quantize_list_comm(ctx, one, (int64_t)(fz_u64(&r, 1) % 4) - 1, x4, q4, NULL);
        break;
      }
      case 5: s = bc_amax_allreduce(ctx, one, fz_ptr(&r, host + 32768), (int64_t)(fz_u64(&r, 1) % 4) - 1, NULL); break;
      case 6: { /* the sharded cast: any shard range, dtype, list length */
        bc_shard sh[3];
        for (int i = 0; i < 3; i++)
          sh[i] = (bc_shard){ x.data, x.dtype, (int64_t)fz_u64(&r, 4) - 8, (int64_t)fz_u64(&r, 4) - 8, (int)(fz_u64(&r, 1) % 3) - 1 };
        bc_qtensor q3[3] = { q, q, q };
        s = bc_shard_cast(ctx, one, (int64_t)(fz_u64(&r, 1) % 4) - 1, (flags & 16) ? NULL : sh, q3, NULL);
        break;
      }
      case 7: {
        bc_qtensor q3[3] = { q, q, q };
        s = bc_shard_finish(ctx, (int64_t)(fz_u64(&r, 1) % 4) - 1, (flags & 16) ? NULL : q3, NULL);
        break;
      }
      default: s = bc_comm_id_from_string(ctx, str, &id); break;
      }
      break;
    }
    default: {
      bc_format_info info;
      s = bc_format_get_info(ctx, fmt, &info);
      break;
    }
    }
    fz_expect_message(ctx, s);
  }
  return 0;
}

static inline int fuzz_aot_one(const uint8_t *d, size_t n) {
  bc_ctx *ctx = fz_ctx();
  /* copy so that reads past the end are caught by the sanitizers */
  unsigned char *buf = malloc(n ? n : 1);
  if (!buf) return 0;
  memcpy(buf, d, n);
  bci_aot_entry *es;
  size_t count;
  bc_status s = bci_aot_parse(ctx, buf, buf + n, &es, &count);
  fz_expect_message(ctx, s);
  if (s == BC_OK) {
    for (size_t i = 0; i < count; i++) {
      volatile size_t sum = strlen(es[i].name) + strlen(es[i].arch) + strlen(es[i].spec_hash);
      const unsigned char *data = es[i].data;
      for (size_t k = 0; k < es[i].size; k++) sum += data[k];
      (void)sum;
    }
    free(es);
  }
  free(buf);
  return 0;
}

/* The cache target writes the bytes as the cache file of a fixed key in a private directory,
 * then reads it back through bci_cache_read. The first 64 bytes of a valid file are its own
 * key, so inputs that start with "BCCACHE1" + this key reach the checksum. */
static char fz_cache_dir[64];
static void fz_cache_cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", fz_cache_dir);
  if (system(cmd) != 0) return;
}

static inline int fuzz_cache_one(const uint8_t *d, size_t n) {
  const char *dir = fz_cache_dir;
  static const char key[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  if (!fz_cache_dir[0]) {
    snprintf(fz_cache_dir, sizeof fz_cache_dir, "/tmp/bc-fuzz-cache-%ld", (long)getpid());
    setenv("BLOCKCAST_CACHE_DIR", fz_cache_dir, 1);
    atexit(fz_cache_cleanup);
  }
  char sub[128], path[256];
  snprintf(sub, sizeof sub, "%s/01", dir);
  snprintf(path, sizeof path, "%s/%s.bck", sub, key);
  if (bci_mkdir_p(sub) != 0) return 0;
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  if (n) fwrite(d, 1, n, f);
  fclose(f);
  void *buf = NULL;
  size_t len = 0;
  if (bci_cache_read(NULL, key, &buf, &len)) {
    /* a hit must be exactly the payload of a well-formed file */
    if (n < 112 + len || memcmp(d, "BCCACHE1", 8) != 0) abort();
    volatile unsigned sum = 0;
    for (size_t i = 0; i < len; i++) sum += ((unsigned char *)buf)[i];
    (void)sum;
    free(buf);
  }
  return 0;
}
