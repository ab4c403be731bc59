/* jit/bc_kernel.c: kernel lookup and launch. Order: loaded in this context -> ahead-of-time
 * archive (built by build.sh) -> generate with the embedded generator + compile with NVRTC.
 * Kernels are loaded with cuLibraryLoadData + cuLibraryGetKernel and launched with
 * cuLaunchKernelEx on the caller's stream. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/bc_jit.h"

/* A 64-bit hash of a kernel name (or registry key), 8 bytes a step (it was FNV-1a, a byte a
 * step, on every cached lookup). */
static uint64_t name_hash(const char *s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    memcpy(&w, s + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  w = 0;
  memcpy(&w, s + i, n - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33; /* every input bit reaches the low bits the tables index by */
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 29);
}
static uint64_t str_hash(const char *s) { return name_hash(s, strlen(s)); }

static bci_kernel *kmap_find(bc_ctx *ctx, const char *key) {
  if (!ctx->kmap_cap) return NULL;
  for (size_t i = str_hash(key) & (ctx->kmap_cap - 1);; i = (i + 1) & (ctx->kmap_cap - 1)) {
    if (!ctx->kmap[i].k) return NULL;
    if (strcmp(ctx->kmap[i].key, key) == 0) return ctx->kmap[i].k;
  }
}

static bc_status kmap_put(bc_ctx *ctx, const char *key, bci_kernel *k) {
  if (2 * (ctx->kmap_n + 1) > ctx->kmap_cap) {
    size_t cap = ctx->kmap_cap ? 2 * ctx->kmap_cap : 64;
    bci_kmap_entry *m = calloc(cap, sizeof *m);
    if (!m) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ctx->kmap_cap; i++) {
      if (!ctx->kmap[i].k) continue;
      size_t j = str_hash(ctx->kmap[i].key) & (cap - 1);
      while (m[j].k) j = (j + 1) & (cap - 1);
      m[j] = ctx->kmap[i];
    }
    free(ctx->kmap);
    ctx->kmap = m;
    ctx->kmap_cap = cap;
  }
  size_t j = str_hash(key) & (ctx->kmap_cap - 1);
  while (ctx->kmap[j].k) j = (j + 1) & (ctx->kmap_cap - 1);
  snprintf(ctx->kmap[j].key, sizeof ctx->kmap[j].key, "%s", key);
  ctx->kmap[j].k = k;
  ctx->kmap_n++;
  return BC_OK;
}

void bci_kernels_free(bc_ctx *ctx) {
  for (size_t i = 0; i < ctx->kmap_cap; i++) {
    bci_kernel *k = ctx->kmap[i].k;
    if (!k) continue;
    if (k->library && bci_cu.LibraryUnload) bci_cu.LibraryUnload((CUlibrary)k->library);
    free(k);
  }
  free(ctx->kmap);
  ctx->kmap = NULL;
  ctx->kmap_cap = ctx->kmap_n = 0;
}

/* ctx->lock held */
static bc_status kernel_get_locked(bc_ctx *ctx, const char *name, const bci_kernel **out) {
  char arch[16];
  bc_status s = bci_cuda_device(ctx, arch, NULL);
  if (s != BC_OK) return s;
  char key[160];
  snprintf(key, sizeof key, "%s@%s", name, arch);
  bci_kernel *k = kmap_find(ctx, key);
  if (k) {
    *out = k;
    return BC_OK;
  }
  s = bci_aot_index(ctx);
  if (s != BC_OK) return s;
  char hash[65];
  s = bci_lua_spec_hash(ctx, name, hash);
  if (s != BC_OK) return s;

  const void *image = NULL;
  void *compiled = NULL;
  size_t image_len = 0;
  bci_launch launch;
  const bci_aot_entry *e = bci_aot_find(ctx, name, arch);
  /* experiment knobs (a tuning override, another NVRTC optimization level) bypass the AOT set */
  const char *tuning = getenv("BLOCKCAST_TUNING");
  int experiment = (tuning && *tuning) || ctx->tuning_text || strcmp(bci_fast_compile_option(), "--Ofast-compile=0") != 0;
  if (e && strcmp(e->spec_hash, hash) == 0 && !experiment) {
    unsigned char sum[32];
    bci_sha256 sh;
    bci_sha256_init(&sh);
    bci_sha256_update(&sh, e->data, e->size);
    bci_sha256_final(&sh, sum);
    if (memcmp(sum, (const unsigned char *)e->data - 32, 32) != 0)
      return bci_fail(ctx, BC_ERR_INTERNAL, "the embedded AOT kernel %s (%s) fails its checksum; rebuild with ./build.sh", name, arch);
    image = e->data;
    image_len = e->size;
    launch = e->launch;
    ctx->stats.aot_hits++;
  } else {
    char target[24];
    s = bci_jit_target(ctx, arch, target);
    if (s == BC_OK) s = bci_kernel_image(ctx, name, target, &compiled, &image_len, &launch);
    if (s != BC_OK) return s;
    image = compiled;
  }
  (void)image_len;
  k = calloc(1, sizeof *k);
  if (!k) {
    free(compiled);
    return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  }
  snprintf(k->name, sizeof k->name, "%s", name);
  snprintf(k->arch, sizeof k->arch, "%s", arch);
  k->launch = launch;
  CUlibrary lib;
  CUresult r = bci_cu.LibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
  free(compiled);
  if (r != CUDA_SUCCESS) {
    free(k);
    return bci_fail(ctx, BC_ERR_CUDA, "cuLibraryLoadData(%s for %s) failed: %s", name, arch, bci_cu_error_name(r));
  }
  CUkernel kern;
  r = bci_cu.LibraryGetKernel(&kern, lib, name);
  if (r != CUDA_SUCCESS) {
    bci_cu.LibraryUnload(lib);
    free(k);
    return bci_fail(ctx, BC_ERR_CUDA, "cuLibraryGetKernel(%s) failed: %s", name, bci_cu_error_name(r));
  }
  /* a list variant's second entry, taking its items in the kernel parameters (block quantize) */
  CUkernel kern_p = NULL;
  const size_t nl = strlen(name);
  if (nl > 6 && !strcmp(name + nl - 6, "__list")) {
    char pname[160];
    snprintf(pname, sizeof pname, "%s_p", name);
    if (bci_cu.LibraryGetKernel(&kern_p, lib, pname) != CUDA_SUCCESS) kern_p = NULL;
  }
  k->smem_attr = 48 * 1024;
  if (launch.smem > 48 * 1024) {
    /* more than the default 48 KiB of dynamic shared memory must be asked for */
    CUdevice dev;
    r = bci_cu.CtxGetDevice(&dev);
    if (r == CUDA_SUCCESS)
      r = bci_cu.KernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.smem, kern, dev);
    if (r == CUDA_SUCCESS && kern_p)
      r = bci_cu.KernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.smem, kern_p, dev);
    if (r != CUDA_SUCCESS) {
      bci_cu.LibraryUnload(lib);
      free(k);
      return bci_fail(ctx, BC_ERR_CUDA, "cuKernelSetAttribute(%s, %d bytes of shared memory) failed: %s", name, launch.smem,
                      bci_cu_error_name(r));
    }
    k->smem_attr = launch.smem;
  }
  k->library = lib;
  k->func = kern;
  k->func_p = kern_p;
  s = kmap_put(ctx, key, k);
  if (s != BC_OK) {
    bci_cu.LibraryUnload(lib);
    free(k);
    return s;
  }
  ctx->stats.kernels_loaded++;
  *out = k;
  return BC_OK;
}

/* Per thread, the kernels this thread got last, direct-mapped by name hash and keyed by
 * (context id, kernel generation, CUDA context, name): a list of 1000 tensors asks for the same
 * few kernels thousands of times, and the locked lookup (device query, key, map) is most of a
 * list entry's host time. Kernels live as long as their bc_ctx, whose id is never reused, or
 * until bci_set_tuning drops them, which moves ctx->kgen on: an entry of an older generation is
 * never used. */
typedef struct kcache_entry {
  uint64_t ctx_id, kgen, hash;
  CUcontext cu;
  const bci_kernel *k;
} kcache_entry;
static __thread kcache_entry kcache[32];

bc_status bci_set_tuning(bc_ctx *ctx, const char *path, const char *text) {
  char *t = NULL, *p = NULL;
  if (text) {
    t = bci_strdup(text);
    p = bci_strdup(path ? path : "(tuning override)");
    if (!t || !p) {
      free(t);
      free(p);
      return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
    }
  }
  pthread_mutex_lock(&ctx->lock);
  free(ctx->tuning_text);
  free(ctx->tuning_path);
  ctx->tuning_text = t;
  ctx->tuning_path = p;
  bci_kernels_free(ctx);
  __atomic_add_fetch(&ctx->kgen, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&ctx->lock);
  return BC_OK;
}

int bci_kernel_loaded(bc_ctx *ctx, const char *name) {
  char arch[16], key[160];
  if (bci_cuda_device(ctx, arch, NULL) != BC_OK) return 0;
  snprintf(key, sizeof key, "%s@%s", name, arch);
  pthread_mutex_lock(&ctx->lock);
  int found = kmap_find(ctx, key) != NULL;
  pthread_mutex_unlock(&ctx->lock);
  return found;
}

/* whether a per-thread cache entry made for (context id, kernel generation, CUDA context) may be
 * used now: its kernel is still loaded and for this thread's device */
static int entry_live(bc_ctx *ctx, uint64_t ctx_id, uint64_t kgen, CUcontext cu) {
  CUcontext c = NULL;
  return ctx_id == ctx->id && kgen == __atomic_load_n(&ctx->kgen, __ATOMIC_ACQUIRE) && bci_cu.CtxGetCurrent &&
         bci_cu_current(&c) == CUDA_SUCCESS && c == cu;
}

int bci_kernel_name(char *out, size_t cap, const char *fmt, va_list ap) {
  size_t n = 0;
  for (const char *p = fmt; *p;) {
    const char *piece = p;
    size_t len;
    if (*p != '%') {
      while (p[0] && p[0] != '%') p++;
      len = (size_t)(p - piece);
    } else if (p[1] == 's' || p[1] == '%') {
      piece = p[1] == 's' ? va_arg(ap, const char *) : "%";
      len = strlen(piece);
      p += 2;
    } else {
      return -1;
    }
    if (len >= cap - n) {
      memcpy(out + n, piece, cap - 1 - n);
      out[cap - 1] = 0;
      return -2;
    }
    memcpy(out + n, piece, len);
    n += len;
  }
  out[n] = 0;
  return (int)n;
}

static bc_status kernel_get_n(bc_ctx *ctx, const char *name, size_t n, const bci_kernel **out);

/* Per thread, what bci_kernel_getf returned last for a (format, argument addresses) pair, in
 * front of the name cache: a hit formats and hashes no name (a list entry asks 2 to 5 times).
 * Keyed like kcache below (context id, kernel generation, CUDA context), so an entry never
 * outlives its kernel; the addresses stand for the strings because bci_kernel_getf's callers
 * pass a literal format and arguments that stay unchanged while the context lives (bc_jit.h). */
#define GETF_ARGS 4
typedef struct fcache_entry {
  uint64_t ctx_id, kgen;
  CUcontext cu;
  const char *fmt, *arg[GETF_ARGS];
  const bci_kernel *k;
} fcache_entry;
static __thread fcache_entry fcache[32];

bc_status bci_kernel_getf(bc_ctx *ctx, const bci_kernel **out, const char *fmt, ...) {
  const char *arg[GETF_ARGS] = { 0 };
  int na = 0, memo = 1;
  va_list ap;
  va_start(ap, fmt);
  for (const char *p = fmt; *p; p++) {
    if (p[0] != '%') continue;
    if (p[1] == 's' && na < GETF_ARGS) arg[na++] = va_arg(ap, const char *);
    else if (p[1] != '%') memo = 0; /* more arguments than the key holds (or a bad conversion: the name says) */
    if (!p[1]) break;
    p++;
  }
  va_end(ap);
  uint64_t h = (uint64_t)(uintptr_t)fmt * 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < na; i++) h = (h ^ (uint64_t)(uintptr_t)arg[i]) * 0xFF51AFD7ED558CCDull;
  fcache_entry *e = &fcache[(h >> 32) & 31];
  if (memo && e->k && e->fmt == fmt && !memcmp(e->arg, arg, sizeof arg) && entry_live(ctx, e->ctx_id, e->kgen, e->cu)) {
    *out = e->k;
    return BC_OK;
  }
  char name[128];
  va_start(ap, fmt);
  int n = bci_kernel_name(name, sizeof name, fmt, ap);
  va_end(ap);
  if (n == -2)
    return bci_fail(ctx, BC_ERR_UNSUPPORTED, "the name of kernel '%.40s...' would be longer than %zu bytes: use a shorter format name",
                    name, sizeof name - 1);
  if (n < 0) return bci_fail(ctx, BC_ERR_INTERNAL, "kernel name format '%s' has a conversion other than %%s", fmt);
  uint64_t gen = __atomic_load_n(&ctx->kgen, __ATOMIC_ACQUIRE); /* before the lookup: a later generation only misses */
  bc_status s = kernel_get_n(ctx, name, (size_t)n, out);
  CUcontext cu = NULL;
  if (s == BC_OK && memo && bci_cu_current(&cu) == CUDA_SUCCESS) {
    e->ctx_id = ctx->id;
    e->kgen = gen;
    e->cu = cu;
    e->fmt = fmt;
    memcpy(e->arg, arg, sizeof arg);
    e->k = *out;
  }
  return s;
}

bc_status bci_kernel_get(bc_ctx *ctx, const char *name, const bci_kernel **out) { return kernel_get_n(ctx, name, strlen(name), out); }

static bc_status kernel_get_n(bc_ctx *ctx, const char *name, size_t n, const bci_kernel **out) {
  CUcontext cu = NULL;
  uint64_t h = name_hash(name, n);
  kcache_entry *e = &kcache[h & 31];
  if (e->k && e->hash == h && entry_live(ctx, e->ctx_id, e->kgen, e->cu) && strcmp(e->k->name, name) == 0) {
    *out = e->k;
    return BC_OK;
  }
  pthread_mutex_lock(&ctx->lock);
  bc_status s = kernel_get_locked(ctx, name, out);
  uint64_t gen = ctx->kgen; /* the generation *out belongs to, read under the lock */
  pthread_mutex_unlock(&ctx->lock);
  if (s == BC_OK && bci_cu_current(&cu) == CUDA_SUCCESS) *e = (kcache_entry){ ctx->id, gen, h, cu, *out };
  return s;
}

bc_status bci_kernel_launch(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            void *stream, void **params) {
  return bci_kernel_launch_smem(ctx, k, gx, gy, gz, bx, k->launch.smem, stream, params);
}

static bc_status launch(bc_ctx *ctx, const bci_kernel *k, void *func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        int smem, void *stream, void **params);

bc_status bci_kernel_launch_smem(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 int smem, void *stream, void **params) {
  return launch(ctx, k, k->func, gx, gy, gz, bx, smem, stream, params);
}

bc_status bci_kernel_launch_p(bc_ctx *ctx, const bci_kernel *k, unsigned gx, unsigned bx, int smem, void *stream, void *p) {
  if (!k->func_p) return bci_fail(ctx, BC_ERR_INTERNAL, "kernel %s has no parameter entry %s_p", k->name, k->name);
  void *params[] = { p };
  return launch(ctx, k, k->func_p, gx, 1, 1, bx, smem, stream, params);
}

static bc_status launch(bc_ctx *ctx, const bci_kernel *k, void *func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        int smem, void *stream, void **params) {
  if (gx == 0 || gy == 0 || gz == 0) return BC_OK;
  if (smem > __atomic_load_n(&k->smem_attr, __ATOMIC_ACQUIRE)) {
    /* more than the kernel was allowed so far: ask once (kernels are shared, under the lock) */
    pthread_mutex_lock(&ctx->lock);
    CUresult r = CUDA_SUCCESS;
    if (smem > k->smem_attr) {
      CUdevice dev;
      r = bci_cu.CtxGetDevice(&dev);
      if (r == CUDA_SUCCESS) r = bci_cu.KernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem, (CUkernel)k->func, dev);
      if (r == CUDA_SUCCESS && k->func_p)
        r = bci_cu.KernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem, (CUkernel)k->func_p, dev);
      if (r == CUDA_SUCCESS) __atomic_store_n(&((bci_kernel *)k)->smem_attr, smem, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (r != CUDA_SUCCESS)
      return bci_fail(ctx, BC_ERR_CUDA, "cuKernelSetAttribute(%s, %d bytes of shared memory) failed: %s", k->name, smem,
                      bci_cu_error_name(r));
  }
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = gx;
  cfg.gridDimY = gy;
  cfg.gridDimZ = gz;
  cfg.blockDimX = bx;
  cfg.blockDimY = 1;
  cfg.blockDimZ = 1;
  cfg.hStream = (CUstream)stream;
  cfg.sharedMemBytes = (unsigned)smem;
  CUresult r = bci_cu.LaunchKernelEx(&cfg, (CUfunction)func, params, NULL);
  if (r == CUDA_SUCCESS) __atomic_fetch_add(&ctx->stats.launches, 1, __ATOMIC_RELAXED);
  if (r != CUDA_SUCCESS) {
    const char *en = bci_cu_error_name(r), *es = "?";
    bci_cu.GetErrorString(r, &es);
    return bci_fail(ctx, BC_ERR_CUDA, "cuLaunchKernelEx(%s%s, grid %ux%ux%u, block %u) failed: %s: %s", k->name,
                    func == k->func ? "" : "_p", gx, gy, gz,
                    bx, en, es);
  }
  return BC_OK;
}

size_t bci_args_packed(const bci_arg *args, int nargs, unsigned char *out) {
  size_t off = 0;
  for (int i = 0; i < nargs; i++) {
    /* alignment: the size, 8 at most; kernel parameter types are 4- or 8-byte scalars and
     * 8-aligned structs (gen/blockcast.lua: param_align refuses others) */
    size_t sz = args[i].size, a = sz < 8 ? sz : 8;
    off = (off + a - 1) & ~(a - 1);
    if (out) {
      if (sz == 8) memcpy(out + off, args[i].p, 8);
      else if (sz == 4) memcpy(out + off, args[i].p, 4);
      else memcpy(out + off, args[i].p, sz);
    }
    off += sz;
  }
  return (off + 7) & ~(size_t)7;
}

static bc_status sink_put(bc_ctx *ctx, bci_sink *sink, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz,
                          unsigned threads, int smem, const bci_arg *args, int nargs) {
  if (sink->n == sink->cap) {
    size_t cap = sink->cap ? 2 * sink->cap : 256;
    bci_rec *r = realloc(sink->recs, cap * sizeof *r);
    if (!r) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory recording a list of %zu launches", sink->n);
    sink->recs = r;
    sink->cap = cap;
  }
  size_t bound = 8; /* the packed size is at most the sizes plus 7 bytes of padding each */
  for (int i = 0; i < nargs; i++) bound += args[i].size + 7;
  if (sink->len + bound > sink->bytes_cap) {
    size_t cap = sink->bytes_cap ? sink->bytes_cap : 16384;
    while (cap < sink->len + bound) cap *= 2;
    unsigned char *b = realloc(sink->bytes, cap);
    if (!b) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory recording a list's arguments (%zu bytes)", cap);
    sink->bytes = b;
    sink->bytes_cap = cap;
  }
  size_t len = bci_args_packed(args, nargs, sink->bytes + sink->len);
  bci_rec *r = &sink->recs[sink->n++];
  r->k = k;
  r->grid[0] = gx;
  r->grid[1] = gy;
  r->grid[2] = gz;
  r->threads = threads;
  r->smem = smem;
  r->stage = sink->stage++;
  r->item = sink->item;
  r->off = sink->len;
  r->len = len;
  sink->len += len;
  return BC_OK;
}

bc_status bci_run(bc_ctx *ctx, bci_sink *sink, const bci_kernel *k, unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                  int smem, void *stream, const bci_arg *args, int nargs) {
  if (gx == 0 || gy == 0 || gz == 0) return BC_OK;
  if (nargs > BCI_MAX_ARGS) return bci_fail(ctx, BC_ERR_INTERNAL, "kernel %s: %d arguments, more than %d", k->name, nargs, BCI_MAX_ARGS);
  if (sink) return sink_put(ctx, sink, k, gx, gy, gz, threads, smem, args, nargs);
  void *params[BCI_MAX_ARGS];
  for (int i = 0; i < nargs; i++) params[i] = (void *)args[i].p;
  return bci_kernel_launch_smem(ctx, k, gx, gy, gz, threads, smem, stream, params);
}

bc_status bci_zero32(bc_ctx *ctx, bci_sink *sink, float *p, int64_t n, void *stream) {
  if (!sink) return bci_cuda_memset32(ctx, p, 0, (size_t)n, stream);
  const bci_kernel *k;
  bc_status s = bci_kernel_get(ctx, "bc_zero", &k);
  if (s != BC_OK) return s;
  int64_t blocks = (n + k->launch.threads - 1) / k->launch.threads;
  unsigned gx = blocks < 1024 ? (unsigned)blocks : 1024;
  bci_arg args[] = { BCI_ARG(p), BCI_ARG(n) };
  return bci_run(ctx, sink, k, gx, 1, 1, (unsigned)k->launch.threads, 0, stream, args, 2);
}

/* n fp32 words src -> dst: one launch of bc_copy32, now or recorded */
bc_status bci_copy32(bc_ctx *ctx, bci_sink *sink, const float *src, float *dst, int64_t n, void *stream) {
  const bci_kernel *k;
  bc_status s = bci_kernel_get(ctx, "bc_copy32", &k);
  if (s != BC_OK) return s;
  int64_t blocks = (n + k->launch.threads - 1) / k->launch.threads;
  unsigned gx = blocks < 1024 ? (unsigned)(blocks > 0 ? blocks : 1) : 1024;
  bci_arg args[] = { BCI_ARG(src), BCI_ARG(dst), BCI_ARG(n) };
  return bci_run(ctx, sink, k, gx, 1, 1, (unsigned)k->launch.threads, 0, stream, args, 3);
}

/* ---- public kernel calls ---- */

static bc_status check_arch(bc_ctx *ctx, const char *arch) {
  if (!arch) return bci_fail(ctx, BC_ERR_ARG, "argument 'arch' is NULL; expected sm_XX or sm_XXa such as \"sm_90\"");
  const char *p = arch;
  if (strncmp(p, "sm_", 3) != 0) goto bad;
  p += 3;
  if (*p < '1' || *p > '9') goto bad;
  while (*p >= '0' && *p <= '9') p++;
  if (*p == 'a') p++;
  if (*p || p - arch > 10) goto bad;
  return BC_OK;
bad:
  return bci_fail(ctx, BC_ERR_ARG, "arch '%s': expected sm_XX or sm_XXa such as \"sm_90\" or \"sm_100a\"", arch);
}

bc_status bc_kernel_names(bc_ctx *ctx, const char *arch, const char *format, void (*fn)(const char *, void *),
                          void *user) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!fn) return bci_fail(ctx, BC_ERR_ARG, "bc_kernel_names: argument 'fn' is NULL");
  if (arch && check_arch(ctx, arch) != BC_OK) return BC_ERR_ARG;
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_lua_kernel_names(ctx, arch, format, fn, user);
  pthread_mutex_unlock(&ctx->lock);
  return s;
}

bc_status bc_kernel_source(bc_ctx *ctx, const char *kernel, const char *arch, char **out, size_t *len) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_kernel_source: argument 'out' is NULL");
  *out = NULL;
  if (!kernel) return bci_fail(ctx, BC_ERR_ARG, "bc_kernel_source: argument 'kernel' is NULL");
  if (check_arch(ctx, arch) != BC_OK) return BC_ERR_ARG;
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_lua_generate(ctx, kernel, arch, out, len);
  pthread_mutex_unlock(&ctx->lock);
  return s;
}

bc_status bc_kernel_compile(bc_ctx *ctx, const char *kernel, const char *arch, void **cubin, size_t *len) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!cubin || !len) return bci_fail(ctx, BC_ERR_ARG, "bc_kernel_compile: arguments 'cubin' and 'len' must not be NULL");
  *cubin = NULL;
  *len = 0;
  if (!kernel) return bci_fail(ctx, BC_ERR_ARG, "bc_kernel_compile: argument 'kernel' is NULL");
  if (arch && strncmp(arch, "compute_", 8) == 0) {
    char sm[24];
    snprintf(sm, sizeof sm, "sm_%s", arch + 8);
    if (check_arch(ctx, sm) != BC_OK) return BC_ERR_ARG;
  } else if (check_arch(ctx, arch) != BC_OK) {
    return BC_ERR_ARG;
  }
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_kernel_image(ctx, kernel, arch, cubin, len, NULL);
  pthread_mutex_unlock(&ctx->lock);
  return s;
}
