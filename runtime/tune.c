/* tune.c: `blockcast tune`, the tuner behind gen/tuning/<arch>.lua's per-kernel entries.
 *
 * For each chosen kernel (a single quantize, dequantize or amax kernel: family x format x input
 * dtype x direction), the generator lists candidate tuning entries (gen/blockcast.lua,
 * TUNE_SPACE: tile shape, threads, unroll, blocks per SM, min_blocks...), the incumbent (what the
 * kernel has now) first. Every candidate is compiled in parallel (one bc_ctx per thread, the disk
 * cache between the phases), then, on the GPU, one kernel after the other:
 *   1. checked: the public call that launches the kernel (bc_quantize_cast, bc_dequantize,
 *      bc_amax) on two small shapes (check_shapes: an aligned and a ragged one; block dequantize,
 *      which picks its kernel by alignment, two of the kind its kernel takes), bit-exact against
 *      the CPU reference (bc_ref_*), and at the timed shape bit-exact against the incumbent's
 *      output; before each of these calls the context's kernels are dropped, and the call must
 *      load the kernel under test (else the candidate measured something else);
 *   2. timed: the median of --reps samples, each 10 back-to-back calls on 3 inputs in rotation
 *      (each larger than L2 at the default size; dequantize: one quantized source), with CUDA
 *      events; a 1 GiB device-to-device copy timed the same way in the same run gives the % of
 *      copy.
 * The winner replaces the incumbent only when it is faster by --min-gain (default 2%: the same
 * kernel's median moves by 1-2% between runs on the H200). The results go into the tune section of the
 * tuning file (gen/blockcast.lua, tune_render: each entry with its measured figures, a line
 * naming the run's date, device and command), or only to stdout with --dry-run. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "jit/bc_jit.h"
#include "tune.h"

static const char *tune_usage =
  "usage: blockcast tune [options]          (needs a CUDA device)\n"
  "Measure candidate launch parameters of single kernels on this GPU and write the winners into\n"
  "the tuning file of its arch (the section at its end that `blockcast tune` owns); the AOT build\n"
  "and the JIT then generate those kernels with them. Every candidate is checked bit-exact against\n"
  "the CPU reference (two small shapes, aligned and ragged) and against the incumbent at the timed\n"
  "shape, each call seen to launch the kernel under test, before it is timed.\n"
  "  --format NAME      only this format (repeatable; default: every loaded format)\n"
  "  --family F         quantize, dequantize or amax (repeatable; default: all three)\n"
  "  --dtype D          bf16, fp16 or fp32: the input of quantize and amax, the output of\n"
  "                     dequantize (repeatable; default: all)\n"
  "  --dir D            row, col or rowcol (repeatable; default: all)\n"
  "  --kernel NAME      only this kernel (repeatable; overrides the filters above)\n"
  "  --flat             also the _flat dequantize kernels (timed at a ragged shape)\n"
  "  --size N           timed shape N x N, 256 .. 32768 (default 16384; _flat kernels: (N - p) x (N + p),\n"
  "                     p the packing; dequantize reads one quantized source: at the default size, larger\n"
  "                     than L2)\n"
  "  --shape RxC        timed shape R rows x C columns instead (each 1 .. 1048576, at most 2^30\n"
  "                     elements; not with --size): a model's own shapes (a kernel's best launch can\n"
  "                     differ with them); taken as given by _flat kernels too, so give those a shape\n"
  "                     they take (rows or columns not a multiple of the packing)\n"
  "  --reps N           timed samples per candidate (default 15; each 10 calls)\n"
  "  --min-gain PCT     a candidate must beat the incumbent by this much to replace it (default 2)\n"
  "  -j N               compile threads (default: the CPUs)\n"
  "  --out FILE         the tuning file to rewrite (default gen/tuning/<arch>.lua, run from the\n"
  "                     source tree); its text is the base the candidates start from\n"
  "  --dry-run          measure and print, write nothing\n"
  "  --list             print the chosen kernels and their candidates, measure nothing (no GPU)\n"
  "  --arch sm_XX       with --list: the arch to plan for (default sm_90)\n"
  "Output: one line per kernel (candidates, incumbent and winner times, gain, % of copy).\n";

#define BATCH 10
#define MAX_SEL 64

typedef struct cand {
  char body[200];
  char err[512]; /* a failed compile or check: why */
  int compiled, valid;
  float us;
} cand;

typedef struct tkern {
  char name[128];
  bci_kernel_desc d;
  const bc_format *f, *ftune; /* the format in the main context, in the candidates' context */
  bc_format_info info;
  char source[160];
  cand *c;
  int nc, winner;
  int64_t rows, cols; /* the timed shape */
  double bytes;       /* per call at the timed shape */
} tkern;

typedef struct topts {
  const char *formats[MAX_SEL], *families[MAX_SEL], *dtypes[MAX_SEL], *dirs[MAX_SEL], *kernels[MAX_SEL];
  int nformats, nfamilies, ndtypes, ndirs, nkernels;
  int flat, dry_run, list, jobs, reps;
  int64_t size;
  int64_t shape_r, shape_c; /* --shape (0: none, the timed shape from size) */
  double min_gain;
  const char *out, *arch;
} topts;

static int in_set(const char *const *set, int n, const char *v) {
  if (n == 0) return 1;
  for (int i = 0; i < n; i++)
    if (strcmp(set[i], v) == 0) return 1;
  return 0;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "blockcast tune: out of memory (%zu bytes)\n", n); exit(1); }
  return p;
}

static int tfail(bc_ctx *ctx, const char *what) {
  fprintf(stderr, "blockcast tune: %s: %s\n", what, ctx ? bc_last_error(ctx) : "");
  return 1;
}

/* ---- the plan: kernels and candidates (no GPU) ---- */

/* the dtype named s (bc_dtype_name's names); 0 if none */
static int dtype_of(const char *s, bc_dtype *out) {
  for (bc_dtype t = BC_FP32; t <= BC_FP16; t++)
    if (strcmp(bc_dtype_name(t), s) == 0) { *out = t; return 1; }
  return 0;
}

/* The kernels the options choose, each with its candidates (the incumbent first). */
static int plan(bc_ctx *ctx, const topts *o, const char *arch, tkern **out, int *nout) {
  names all = { 0 };
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_lua_kernel_names(ctx, arch, NULL, collect, &all);
  pthread_mutex_unlock(&ctx->lock);
  if (s != BC_OK) {
    names_free(&all);
    return tfail(ctx, "the kernel list");
  }
  for (int i = 0; i < o->nkernels; i++) {
    int found = 0;
    for (size_t j = 0; j < all.n; j++) found |= strcmp(all.v[j], o->kernels[i]) == 0;
    if (!found) {
      fprintf(stderr, "blockcast tune: --kernel %s: no such kernel for %s (see `blockcast list --arch %s`)\n", o->kernels[i],
              arch, arch);
      names_free(&all);
      return 1;
    }
  }
  tkern *ks = xmalloc(all.n * sizeof *ks);
  int n = 0, rc = 0;
  for (size_t i = 0; i < all.n && !rc; i++) {
    const char *name = all.v[i];
    char *r = NULL;
    const char *argv1[] = { name };
    pthread_mutex_lock(&ctx->lock);
    s = bci_lua_call_str(ctx, "tunable", 1, argv1, &r);
    tkern k;
    memset(&k, 0, sizeof k);
    if (s == BC_OK) s = bci_lua_kernel_desc(ctx, name, &k.d);
    pthread_mutex_unlock(&ctx->lock);
    if (s != BC_OK) { rc = tfail(ctx, name); free(r); break; }
    int tunable = r && *r;
    free(r);
    if (!tunable && o->nkernels && in_set(o->kernels, o->nkernels, name)) {
      fprintf(stderr, "blockcast tune: --kernel %s: not tunable (blockcast tune sweeps single quantize, dequantize and amax "
                      "kernels; a list variant takes its kernel's entry)\n", name);
      rc = 2;
      break;
    }
    if (!tunable) continue;
    if (o->nkernels) {
      if (!in_set(o->kernels, o->nkernels, name)) continue;
    } else {
      const char *dir = k.d.dir[0] ? k.d.dir : "row";
      if (!in_set(o->formats, o->nformats, k.d.format) || !in_set(o->families, o->nfamilies, k.d.family) ||
          !in_set(o->dtypes, o->ndtypes, k.d.dtype) || !in_set(o->dirs, o->ndirs, dir) || (k.d.flat && !o->flat))
        continue;
    }
    snprintf(k.name, sizeof k.name, "%s", name);
    if (k.d.format[0]) {
      if (bc_format_get(ctx, k.d.format, &k.f) != BC_OK) { rc = tfail(ctx, name); break; }
      bc_format_get_info(ctx, k.f, &k.info);
    }
    const char *argv2[] = { name, arch };
    pthread_mutex_lock(&ctx->lock);
    s = bci_lua_call_str(ctx, "tune_candidates", 2, argv2, &r);
    pthread_mutex_unlock(&ctx->lock);
    if (s != BC_OK) { rc = tfail(ctx, name); break; }
    /* line 1: the incumbent's source; then one entry body a line */
    int lines = 1;
    for (const char *p = r; *p; p++) lines += *p == '\n';
    k.c = calloc((size_t)lines, sizeof *k.c);
    if (!k.c) { free(r); fprintf(stderr, "blockcast tune: out of memory\n"); rc = 1; break; }
    char *save = NULL, *line = strtok_r(r, "\n", &save);
    snprintf(k.source, sizeof k.source, "%s", line ? line : "?");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) snprintf(k.c[k.nc++].body, sizeof k.c[0].body, "%s", line);
    free(r);
    ks[n++] = k;
  }
  names_free(&all);
  if (rc) {
    for (int i = 0; i < n; i++) free(ks[i].c);
    free(ks);
    return rc;
  }
  *out = ks;
  *nout = n;
  return 0;
}

/* ---- compile phase: every candidate into the disk cache, -j threads ---- */

typedef struct cjob {
  tkern *ks;
  int nk;
  const char *base_path, *base_text, *target;
  int next; /* the next (kernel, candidate) index, taken under lock */
  int total;
  pthread_mutex_t lock;
} cjob;

static const char CAND_PATH[] = "blockcast tune candidate";

/* The tuning text of candidate c of kernel k (ctx->lock taken here); NULL on failure (ctx error). */
static char *cand_text(bc_ctx *ctx, const char *base_text, const tkern *k, const cand *c) {
  const char *argv[] = { base_text, k->name, c->body };
  char *t = NULL;
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_lua_call_str(ctx, "tune_candidate_text", 3, argv, &t);
  pthread_mutex_unlock(&ctx->lock);
  return s == BC_OK ? t : NULL;
}

static void *compile_worker(void *arg) {
  cjob *j = arg;
  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) {
    fprintf(stderr, "blockcast tune: a compile thread: %s\n", err);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&j->lock);
    int i = j->next++;
    pthread_mutex_unlock(&j->lock);
    if (i >= j->total) break;
    tkern *k = j->ks;
    int ci = i;
    while (ci >= k->nc) ci -= k->nc, k++;
    cand *c = &k->c[ci];
    char *text = cand_text(ctx, j->base_text, k, c);
    bc_status s = text ? bci_set_tuning(ctx, CAND_PATH, text) : BC_ERR_INTERNAL;
    free(text);
    void *bin = NULL;
    size_t n = 0;
    if (s == BC_OK) s = bc_kernel_compile(ctx, k->name, j->target, &bin, &n);
    free(bin);
    if (s == BC_OK) c->compiled = 1;
    else snprintf(c->err, sizeof c->err, "compile: %s", bc_last_error(ctx));
  }
  bc_ctx_destroy(ctx);
  return NULL;
}

static void compile_all(tkern *ks, int nk, const char *base_text, const char *target, int jobs) {
  cjob j = { ks, nk, CAND_PATH, base_text, target, 0, 0, PTHREAD_MUTEX_INITIALIZER };
  for (int i = 0; i < nk; i++) j.total += ks[i].nc;
  if (jobs < 1) jobs = 1;
  if (jobs > j.total) jobs = j.total > 0 ? j.total : 1;
  pthread_t *t = xmalloc((size_t)jobs * sizeof *t);
  int started = 0;
  for (int i = 0; i < jobs; i++)
    if (pthread_create(&t[started], NULL, compile_worker, &j) == 0) started++;
  if (started == 0) compile_worker(&j);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  free(t);
}

/* ---- device helpers (the driver API the library opened) ---- */

#define CUOK(call) ((call) == CUDA_SUCCESS)

static void *dalloc(size_t n) {
  CUdeviceptr p = 0;
  CUresult r = bci_cu.MemAlloc(&p, n ? n : 16);
  if (r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      fprintf(stderr, "blockcast tune: cuMemAlloc(%zu bytes) failed: the GPU is out of memory (use a smaller --size or --shape)\n", n);
    else
      fprintf(stderr, "blockcast tune: cuMemAlloc(%zu bytes) failed: %s\n", n, bci_cu_error_name(r));
    exit(1);
  }
  return (void *)(uintptr_t)p;
}

/* After a kernel failed on the GPU: an error that a second synchronization, or a small
 * allocation after it, returns again is sticky (an illegal address, a trap): the CUDA context
 * cannot run anything more, so the run must stop. Returns that error, or CUDA_SUCCESS when the
 * context still works (a full GPU refusing the probe's 16 bytes is not a dead context). */
static CUresult sticky_error(void) {
  CUresult r = bci_cu.StreamSynchronize(NULL);
  if (r == CUDA_SUCCESS) {
    CUdeviceptr p = 0;
    r = bci_cu.MemAlloc(&p, 16);
    if (r == CUDA_SUCCESS) bci_cu.MemFree(p);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY) r = CUDA_SUCCESS;
  }
  return r;
}
static void dfree(void *p) {
  if (p) bci_cu.MemFree((CUdeviceptr)(uintptr_t)p);
}
static int h2d(void *d, const void *h, size_t n) {
  return CUOK(bci_cu.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)d, h, n, NULL)) && CUOK(bci_cu.StreamSynchronize(NULL));
}
static int d2h(void *h, const void *d, size_t n) {
  return CUOK(bci_cu.MemcpyDtoHAsync(h, (CUdeviceptr)(uintptr_t)d, n, NULL)) && CUOK(bci_cu.StreamSynchronize(NULL));
}
/* a pinned host buffer of at least n bytes (grown as needed; kept for the run): fast copies back */
static void *pinned;
static size_t pinned_n;
static void *staging(size_t n) {
  if (n <= pinned_n) return pinned;
  if (pinned) bci_cu.MemFreeHost(pinned);
  pinned = NULL;
  pinned_n = 0;
  if (!CUOK(bci_cu.MemHostAlloc(&pinned, n, 0))) return NULL;
  pinned_n = n;
  return pinned;
}
static void staging_free(void) {
  if (pinned) bci_cu.MemFreeHost(pinned);
  pinned = NULL;
  pinned_n = 0;
}
/* device bytes d equal host bytes want (through the staging buffer) */
static int d_equals(const void *d, const void *want, size_t n) {
  void *g = staging(n);
  if (!g) {
    g = xmalloc(n);
    int eq = d2h(g, d, n) && memcmp(g, want, n) == 0;
    free(g);
    return eq;
  }
  return d2h(g, d, n) && memcmp(g, want, n) == 0;
}

/* every byte of d[0, n) set to 0xA5 (what no output keeps by chance) */
static void dpoison(void *d, size_t n) {
  bci_cu.MemsetD8Async((CUdeviceptr)(uintptr_t)d, 0xA5, n, NULL);
}

/* ---- test data ---- */

/* values exact in bf16, fp16 and fp32: random sign, 2^-14 .. 2^7, 7 mantissa bits */
static void fill_input(void *h, bc_dtype dt, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    unsigned sign = (unsigned)(seed >> 40) & 1, e = (unsigned)(seed % 22) + 113, m = (unsigned)(seed >> 20) & 0x7F;
    uint32_t f32 = sign << 31 | e << 23 | m << 16;
    if (dt == BC_FP32) ((uint32_t *)h)[i] = f32;
    else if (dt == BC_BF16) ((uint16_t *)h)[i] = (uint16_t)(f32 >> 16);
    else ((uint16_t *)h)[i] = (uint16_t)(sign << 15 | (e - 112) << 10 | m << 3);
  }
}

/* the buffers of one quantized tensor (host or device) */
typedef struct qbuf {
  bc_qlayout l[2];
  void *data[2], *scale[2];
  float *amax, *scale1; /* fp32[1] each */
} qbuf;

static int q_layout(bc_ctx *ctx, const tkern *k, int64_t rows, int64_t cols, qbuf *b) {
  memset(b, 0, sizeof *b);
  for (int d = 0; d < 2; d++) {
    if (!(d ? k->info.has_columnwise : k->info.has_rowwise)) continue;
    if (bc_qtensor_layout(ctx, k->f, rows, cols, (bc_direction)(d + 1), 0, &b->l[d]) != BC_OK) return 0;
  }
  return 1;
}
static void q_alloc(qbuf *b, int dev) {
  for (int d = 0; d < 2; d++) {
    if (!b->l[d].data_bytes) continue;
    b->data[d] = dev ? dalloc(b->l[d].data_bytes) : xmalloc(b->l[d].data_bytes);
    b->scale[d] = dev ? dalloc(b->l[d].scale_bytes) : xmalloc(b->l[d].scale_bytes);
  }
  b->amax = dev ? dalloc(4) : xmalloc(4);
  b->scale1 = dev ? dalloc(4) : xmalloc(4);
}
static void q_free(qbuf *b, int dev) {
  for (int d = 0; d < 2; d++) {
    if (dev) { dfree(b->data[d]); dfree(b->scale[d]); }
    else { free(b->data[d]); free(b->scale[d]); }
  }
  if (dev) { dfree(b->amax); dfree(b->scale1); }
  else { free(b->amax); free(b->scale1); }
  memset(b->data, 0, sizeof b->data);
  memset(b->scale, 0, sizeof b->scale);
  b->amax = b->scale1 = NULL;
}
/* the qtensor of buffers b writing directions `dirs` (bit 0 rowwise, bit 1 columnwise) */
static bc_qtensor q_of(const bc_format *f, int64_t rows, int64_t cols, const qbuf *b, int dirs) {
  bc_qtensor q = { f, rows, cols, dirs & 1 ? b->data[0] : NULL, b->scale[0], dirs & 2 ? b->data[1] : NULL, b->scale[1],
                   b->amax, b->scale1, 0, 0, 0, 0 };
  return q;
}
static int dirs_of(const tkern *k) {
  if (strcmp(k->d.family, "dequantize") == 0) return strcmp(k->d.dir, "col") == 0 ? 2 : 1;
  if (strcmp(k->d.dir, "col") == 0) return 2;
  if (strcmp(k->d.dir, "rowcol") == 0) return 3;
  return 1;
}

/* ---- one kernel's measurement ---- */

enum { FAM_QUANTIZE, FAM_DEQUANTIZE, FAM_AMAX };

typedef struct shape_data {
  int64_t rows, cols;
  bc_dtype dt;  /* the high-precision side */
  void *hx;     /* host input (quantize, amax) or host output reference (dequantize) */
  qbuf hq;      /* host quantized reference */
  float hamax;  /* amax reference */
  /* device */
  void *dx;     /* input / the dequantize output */
  qbuf dq;
} shape_data;

typedef struct tctx {
  bc_ctx *plain;  /* AOT kernels: preparing inputs */
  bc_ctx *tune;   /* the candidate's tuning */
  int fam;
} tctx;

static int fam_of(const tkern *k) {
  if (strcmp(k->d.family, "dequantize") == 0) return FAM_DEQUANTIZE;
  if (strcmp(k->d.family, "amax") == 0) return FAM_AMAX;
  return FAM_QUANTIZE;
}

static bc_dtype kdtype(const tkern *k) {
  bc_dtype dt = BC_BF16;
  dtype_of(k->d.dtype, &dt);
  return dt;
}

/* Data and references of one check shape (host side, computed once per kernel). */
static int shape_prepare(bc_ctx *ctx, const tkern *k, int fam, int64_t rows, int64_t cols, shape_data *sd, uint64_t seed) {
  memset(sd, 0, sizeof *sd);
  sd->rows = rows, sd->cols = cols, sd->dt = kdtype(k);
  size_t n = (size_t)(rows * cols), es = bc_dtype_size(sd->dt);
  if (fam == FAM_AMAX) {
    sd->hx = xmalloc(n * es);
    fill_input(sd->hx, sd->dt, n, seed);
    bc_tensor hx = { sd->hx, sd->dt, rows, cols, 0 };
    if (bc_ref_amax(ctx, &hx, &sd->hamax) != BC_OK) return 0;
    sd->dx = dalloc(n * es);
    sd->dq.amax = dalloc(4);
    return h2d(sd->dx, sd->hx, n * es);
  }
  if (!q_layout(ctx, k, rows, cols, &sd->hq)) return 0;
  sd->dq = sd->hq;
  q_alloc(&sd->hq, 0);
  q_alloc(&sd->dq, 1);
  /* the quantized reference of a random input (bf16 for dequantize kernels' sources) */
  bc_dtype in_dt = fam == FAM_QUANTIZE ? sd->dt : BC_BF16;
  size_t ies = bc_dtype_size(in_dt);
  void *hin = xmalloc(n * ies);
  fill_input(hin, in_dt, n, seed);
  bc_tensor hx = { hin, in_dt, rows, cols, 0 };
  bc_qtensor hq = q_of(k->f, rows, cols, &sd->hq, fam == FAM_QUANTIZE ? dirs_of(k) : 3);
  if (k->info.block == BC_BLOCK_TENSOR || k->info.two_level) {
    /* amax and scale from the reference's current scaling, then the cast of the kernel under test */
    if (bc_ref_quantize(ctx, &hx, &hq) != BC_OK) { free(hin); return 0; }
  } else if (bc_ref_quantize_cast(ctx, &hx, &hq) != BC_OK) {
    free(hin);
    return 0;
  }
  if (!h2d(sd->dq.amax, sd->hq.amax, 4) || !h2d(sd->dq.scale1, sd->hq.scale1, 4)) { free(hin); return 0; }
  if (fam == FAM_QUANTIZE) {
    sd->hx = hin;
    sd->dx = dalloc(n * ies);
    return h2d(sd->dx, hin, n * ies);
  }
  /* dequantize: the codes on the device, the reference output on the host */
  free(hin);
  int d = dirs_of(k) - 1;
  for (int e = 0; e < 2; e++) {
    if (!sd->hq.data[e]) continue;
    if (!h2d(sd->dq.data[e], sd->hq.data[e], sd->hq.l[e].data_bytes) ||
        !h2d(sd->dq.scale[e], sd->hq.scale[e], sd->hq.l[e].scale_bytes))
      return 0;
  }
  size_t on = (size_t)(sd->hq.l[d].data_rows * sd->hq.l[d].data_cols) * es;
  sd->hx = xmalloc(on);
  bc_tensor ho = { sd->hx, sd->dt, sd->hq.l[d].data_rows, sd->hq.l[d].data_cols, 0 };
  if (bc_ref_dequantize(ctx, &hq, (bc_direction)(d + 1), &ho) != BC_OK) return 0;
  sd->dx = dalloc(on);
  return 1;
}

static void shape_free(shape_data *sd) {
  free(sd->hx);
  q_free(&sd->hq, 0);
  q_free(&sd->dq, 1);
  dfree(sd->dx);
  memset(sd, 0, sizeof *sd);
}

/* one call of the kernel's public operation on shape sd (input `x` for quantize / amax), in the
 * candidates' context */
static bc_status call_op(bc_ctx *ctx, const tkern *k, int fam, shape_data *sd, void *x) {
  if (fam == FAM_AMAX) {
    bc_tensor t = { x, sd->dt, sd->rows, sd->cols, 0 };
    return bc_amax(ctx, &t, sd->dq.amax, NULL);
  }
  if (fam == FAM_QUANTIZE) {
    bc_tensor t = { x, sd->dt, sd->rows, sd->cols, 0 };
    bc_qtensor q = q_of(k->ftune, sd->rows, sd->cols, &sd->dq, dirs_of(k));
    return bc_quantize_cast(ctx, &t, &q, NULL);
  }
  int d = dirs_of(k) - 1;
  bc_qtensor q = q_of(k->ftune, sd->rows, sd->cols, &sd->dq, 3);
  bc_tensor o = { sd->dx, sd->dt, sd->dq.l[d].data_rows, sd->dq.l[d].data_cols, 0 };
  return bc_dequantize(ctx, &q, (bc_direction)(d + 1), &o, NULL);
}

/* the call's outputs on the device vs `want` (host); 1 equal. want: for quantize the host qbuf,
 * for dequantize the host output, for amax the float. */
static int outputs_match(const tkern *k, int fam, shape_data *sd, const qbuf *wq, const void *wx, float wamax, char *why,
                         size_t whysz) {
  if (fam == FAM_AMAX) {
    float g;
    if (!d2h(&g, sd->dq.amax, 4)) { snprintf(why, whysz, "copying the amax back failed"); return 0; }
    if (memcmp(&g, &wamax, 4) != 0) { snprintf(why, whysz, "amax %.9g, the reference %.9g", g, wamax); return 0; }
    return 1;
  }
  if (fam == FAM_DEQUANTIZE) {
    int d = dirs_of(k) - 1;
    size_t on = (size_t)(sd->dq.l[d].data_rows * sd->dq.l[d].data_cols) * bc_dtype_size(sd->dt);
    int ok = d_equals(sd->dx, wx, on);
    if (!ok) snprintf(why, whysz, "the dequantized output differs from the reference");
    return ok;
  }
  int dirs = dirs_of(k);
  for (int d = 0; d < 2; d++) {
    if (!(dirs >> d & 1)) continue;
    int dok = d_equals(sd->dq.data[d], wq->data[d], sd->dq.l[d].data_bytes);
    int sok = d_equals(sd->dq.scale[d], wq->scale[d], sd->dq.l[d].scale_bytes);
    if (!dok || !sok) {
      snprintf(why, whysz, "the %s %s differ from the reference", d ? "columnwise" : "rowwise", dok ? "scales" : "codes");
      return 0;
    }
  }
  return 1;
}

static void poison_outputs(const tkern *k, int fam, shape_data *sd) {
  if (fam == FAM_AMAX) { dpoison(sd->dq.amax, 4); return; }
  if (fam == FAM_DEQUANTIZE) {
    int d = dirs_of(k) - 1;
    dpoison(sd->dx, (size_t)(sd->dq.l[d].data_rows * sd->dq.l[d].data_cols) * bc_dtype_size(sd->dt));
    return;
  }
  for (int d = 0; d < 2; d++)
    if (dirs_of(k) >> d & 1) { dpoison(sd->dq.data[d], sd->dq.l[d].data_bytes); dpoison(sd->dq.scale[d], sd->dq.l[d].scale_bytes); }
}

static int cmpf(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

typedef bc_status (*op_fn)(int i, void *u);

/* median over reps samples of BATCH back-to-back calls, in microseconds per call; < 0 on failure */
static float time_median(op_fn fn, void *u, int reps) {
  CUevent a, b;
  if (!CUOK(bci_cu.EventCreate(&a, 0)) || !CUOK(bci_cu.EventCreate(&b, 0))) return -1;
  float *ms = xmalloc(sizeof(float) * (size_t)reps), r = -1;
  for (int i = 0; i < 3; i++)
    if (fn(i, u) != BC_OK) goto out;
  for (int i = 0; i < reps; i++) {
    bci_cu.EventRecord(a, NULL);
    for (int j = 0; j < BATCH; j++)
      if (fn(i * BATCH + j, u) != BC_OK) goto out;
    bci_cu.EventRecord(b, NULL);
    if (!CUOK(bci_cu.EventSynchronize(b)) || !CUOK(bci_cu.EventElapsedTime(&ms[i], a, b))) goto out;
  }
  qsort(ms, (size_t)reps, sizeof *ms, cmpf);
  r = ms[reps / 2] * 1000.0f / BATCH;
out:
  free(ms);
  bci_cu.EventDestroy(a);
  bci_cu.EventDestroy(b);
  return r;
}

typedef struct copy_arg {
  CUdeviceptr dst, src;
  size_t n;
} copy_arg;
static bc_status do_copy(int i, void *u) {
  (void)i;
  copy_arg *c = u;
  return CUOK(bci_cu.MemcpyAsync(c->dst, c->src, c->n, NULL)) ? BC_OK : BC_ERR_CUDA;
}

typedef struct op_arg {
  bc_ctx *ctx;
  const tkern *k;
  int fam;
  shape_data *sd;
  void *x[3];
} op_arg;
static bc_status do_op(int i, void *u) {
  op_arg *a = u;
  return call_op(a->ctx, a->k, a->fam, a->sd, a->x[i % 3]);
}

/* the timed inputs (3, in rotation), kept from one kernel to the next of the same dtype and shape */
static struct {
  bc_dtype dt;
  int64_t rows, cols;
  void *x[3];
} inputs;
static void inputs_free(void) {
  for (int i = 0; i < 3; i++) dfree(inputs.x[i]);
  memset(&inputs, 0, sizeof inputs);
}

/* the timed shape of a kernel: --shape as given, else N x N, or (N - p) x (N + p) for _flat
 * kernels (p: the packing) */
static void timed_shape(const tkern *k, const topts *o, int64_t *rows, int64_t *cols) {
  int64_t p = k->info.element_pack > 0 ? k->info.element_pack : 1;
  if (o->shape_r > 0) {
    *rows = o->shape_r, *cols = o->shape_c;
    return;
  }
  *rows = *cols = o->size;
  if (k->d.flat) *rows = o->size - p, *cols = o->size + p;
}

/* The two check shapes of a kernel; each must launch it. Block dequantize picks its kernel by
 * alignment (runtime/ops/bc_ops.c): a contiguous output with unaligned rows (either dimension
 * ragged, for the columnwise data's transposed rows) goes to _flat, aligned ones to the by-row
 * kernel. Others: an aligned and a ragged shape (rows and columns held in whole packing groups). */
static void check_shapes(const tkern *k, int fam, int64_t sh[2][2]) {
  int64_t pk = k->info.element_pack > 0 ? k->info.element_pack : 1;
  int64_t rr = pk == 4 ? 996 : pk == 2 ? 998 : 999, rc = pk == 4 ? 1028 : pk == 2 ? 1030 : 1031;
  sh[0][0] = 384, sh[0][1] = 1024, sh[1][0] = rr, sh[1][1] = rc;
  if (fam == FAM_DEQUANTIZE && k->info.block != BC_BLOCK_TENSOR) {
    if (k->d.flat) sh[0][0] = pk == 4 ? 380 : pk == 2 ? 382 : 383, sh[0][1] = rc;
    else sh[1][0] = 1000, sh[1][1] = 1040;
  }
}

/* Drop ctx's kernels (the stream drained first: nothing of them may still be queued) and run it
 * under `text` (NULL: the file). */
static bc_status retune(bc_ctx *ctx, const char *text) {
  bci_cu.StreamSynchronize(NULL);
  return bci_set_tuning(ctx, text ? CAND_PATH : NULL, text);
}

/* Measure every candidate of kernel k; returns 0 when the kernel could not be measured at all,
 * -1 when a candidate left the CUDA context unusable (sticky_error: the run stops). */
static int measure(bc_ctx *plain, bc_ctx *tune, tkern *k, const char *base_text, const topts *o) {
  int fam = fam_of(k), dead = 0;
  int64_t sh[2][2];
  check_shapes(k, fam, sh);
  shape_data chk[2], big;
  int nchk = 0, ok = 1;
  char why[256];
  ok = shape_prepare(plain, k, fam, sh[0][0], sh[0][1], &chk[nchk++], 11) &&
       shape_prepare(plain, k, fam, sh[1][0], sh[1][1], &chk[nchk++], 12);
  if (!ok) {
    fprintf(stderr, "blockcast tune: %s: preparing the check shapes failed: %s\n", k->name, bc_last_error(plain));
    for (int i = 0; i < nchk; i++) shape_free(&chk[i]);
    return 0;
  }
  /* the timed shape: 3 inputs in rotation; the incumbent's output kept as the reference */
  timed_shape(k, o, &k->rows, &k->cols);
  memset(&big, 0, sizeof big);
  big.rows = k->rows, big.cols = k->cols, big.dt = kdtype(k);
  size_t n = (size_t)(k->rows * k->cols), es = bc_dtype_size(big.dt);
  op_arg a = { tune, k, fam, &big, { NULL, NULL, NULL } };
  void *hbuf = NULL;
  if (fam != FAM_AMAX && !q_layout(plain, k, k->rows, k->cols, &big.dq)) {
    fprintf(stderr, "blockcast tune: %s: %s\n", k->name, bc_last_error(plain));
    for (int i = 0; i < nchk; i++) shape_free(&chk[i]);
    return 0;
  }
  if (fam == FAM_AMAX) big.dq.amax = dalloc(4);
  else q_alloc(&big.dq, 1);
  bc_dtype in_dt = fam == FAM_DEQUANTIZE ? BC_BF16 : big.dt;
  size_t ies = bc_dtype_size(in_dt);
  if (inputs.dt != in_dt || inputs.rows != k->rows || inputs.cols != k->cols || !inputs.x[0]) {
    inputs_free();
    hbuf = xmalloc(n * ies);
    for (int i = 0; i < 3; i++) {
      fill_input(hbuf, in_dt, n, 0x1234567ull + (uint64_t)i);
      inputs.x[i] = dalloc(n * ies);
      if (!h2d(inputs.x[i], hbuf, n * ies)) {
        fprintf(stderr, "blockcast tune: copying the timed input to the GPU failed\n");
        ok = 0;
      }
    }
    if (ok) inputs.dt = in_dt, inputs.rows = k->rows, inputs.cols = k->cols;
    else inputs_free();
  }
  for (int i = 0; i < 3; i++) a.x[i] = inputs.x[i];
  /* amax and scale (per-tensor, two-level) of input 0 by the plain context */
  if (fam != FAM_AMAX) {
    bc_tensor x0 = { a.x[0], in_dt, k->rows, k->cols, 0 };
    bc_qtensor q = q_of(k->f, k->rows, k->cols, &big.dq, fam == FAM_QUANTIZE ? dirs_of(k) : 3);
    bc_status s = bc_quantize(plain, &x0, &q, NULL);
    if (s != BC_OK) {
      fprintf(stderr, "blockcast tune: %s: preparing the timed shape: %s\n", k->name, bc_last_error(plain));
      ok = 0;
    }
    if (fam == FAM_DEQUANTIZE)
      big.dx = dalloc((size_t)(big.dq.l[dirs_of(k) - 1].data_rows * big.dq.l[dirs_of(k) - 1].data_cols) * es);
  }
  /* bytes per call */
  if (fam == FAM_AMAX) k->bytes = (double)(n * es);
  else if (fam == FAM_QUANTIZE) {
    k->bytes = (double)(n * es);
    for (int d = 0; d < 2; d++)
      if (dirs_of(k) >> d & 1) k->bytes += (double)big.dq.l[d].data_bytes + (double)big.dq.l[d].scale_bytes;
  } else {
    int d = dirs_of(k) - 1;
    k->bytes = (double)big.dq.l[d].data_bytes + (double)big.dq.l[d].scale_bytes +
               (double)(big.dq.l[d].data_rows * big.dq.l[d].data_cols) * (double)es;
  }
  qbuf ref; /* the incumbent's output at the timed shape (host) */
  void *ref_x = NULL;
  float ref_amax = 0;
  memset(&ref, 0, sizeof ref);
  int have_ref = 0;
  for (int ci = 0; ci < k->nc && ok; ci++) {
    cand *c = &k->c[ci];
    if (!c->compiled) continue;
    char *text = cand_text(tune, base_text, k, c);
    if (!text) {
      snprintf(c->err, sizeof c->err, "%s", bc_last_error(tune));
      continue;
    }
    /* 1. the check shapes against the CPU reference; before each call the kernels are dropped,
       so that what the call loads is what it launched, and the kernel under test must be among it */
    int good = 1;
    for (int i = 0; i < nchk && good; i++) {
      if (retune(tune, text) != BC_OK) { snprintf(c->err, sizeof c->err, "%s", bc_last_error(tune)); good = 0; break; }
      poison_outputs(k, fam, &chk[i]);
      bc_status s = call_op(tune, k, fam, &chk[i], chk[i].dx);
      if (s != BC_OK) {
        snprintf(c->err, sizeof c->err, "%s", bc_last_error(tune));
        good = 0;
        if (s == BC_ERR_CUDA && sticky_error() != CUDA_SUCCESS) dead = 1;
        break;
      }
      CUresult r = bci_cu.StreamSynchronize(NULL);
      if (r != CUDA_SUCCESS) {
        snprintf(c->err, sizeof c->err, "%lldx%lld: the kernel failed on the GPU: %s", (long long)chk[i].rows, (long long)chk[i].cols,
                 bci_cu_error_name(r));
        good = 0;
        if (sticky_error() != CUDA_SUCCESS) dead = 1;
        break;
      }
      if (!bci_kernel_loaded(tune, k->name)) {
        snprintf(c->err, sizeof c->err, "the check at %lldx%lld did not launch %s", (long long)chk[i].rows,
                 (long long)chk[i].cols, k->name);
        good = 0;
      } else if (!outputs_match(k, fam, &chk[i], &chk[i].hq, chk[i].hx, chk[i].hamax, why, sizeof why)) {
        snprintf(c->err, sizeof c->err, "%lldx%lld: %s", (long long)chk[i].rows, (long long)chk[i].cols, why);
        good = 0;
      }
    }
    /* 2. the timed shape: the kernel under test ran, and its output equals the incumbent's */
    if (good && retune(tune, text) != BC_OK) {
      snprintf(c->err, sizeof c->err, "%s", bc_last_error(tune));
      good = 0;
    }
    if (good) {
      poison_outputs(k, fam, &big);
      bc_status s = call_op(tune, k, fam, &big, a.x[0]);
      CUresult r = s == BC_OK ? bci_cu.StreamSynchronize(NULL) : CUDA_SUCCESS;
      if (s != BC_OK || r != CUDA_SUCCESS) {
        if (s != BC_OK) snprintf(c->err, sizeof c->err, "timed shape: %s", bc_last_error(tune));
        else snprintf(c->err, sizeof c->err, "timed shape: the kernel failed on the GPU: %s", bci_cu_error_name(r));
        good = 0;
        if ((s == BC_ERR_CUDA || r != CUDA_SUCCESS) && sticky_error() != CUDA_SUCCESS) dead = 1;
      } else if (!bci_kernel_loaded(tune, k->name)) {
        snprintf(c->err, sizeof c->err, "the call at %lldx%lld did not launch %s", (long long)k->rows, (long long)k->cols, k->name);
        good = 0;
      } else if (!have_ref) {
        /* the first good candidate (the incumbent, unless it failed) is the reference */
        int copied = 1;
        if (fam == FAM_AMAX) copied = d2h(&ref_amax, big.dq.amax, 4);
        else if (fam == FAM_DEQUANTIZE) {
          int d = dirs_of(k) - 1;
          size_t on = (size_t)(big.dq.l[d].data_rows * big.dq.l[d].data_cols) * es;
          ref_x = xmalloc(on);
          copied = d2h(ref_x, big.dx, on);
        } else {
          ref = big.dq;
          ref.data[0] = ref.data[1] = ref.scale[0] = ref.scale[1] = NULL;
          for (int d = 0; d < 2; d++) {
            if (!(dirs_of(k) >> d & 1)) continue;
            ref.data[d] = xmalloc(big.dq.l[d].data_bytes);
            ref.scale[d] = xmalloc(big.dq.l[d].scale_bytes);
            copied &= d2h(ref.data[d], big.dq.data[d], big.dq.l[d].data_bytes);
            copied &= d2h(ref.scale[d], big.dq.scale[d], big.dq.l[d].scale_bytes);
          }
        }
        if (!copied) {
          fprintf(stderr, "blockcast tune: %s: copying the reference output back failed\n", k->name);
          ok = good = 0;
        }
        have_ref = 1;
      } else if (!outputs_match(k, fam, &big, &ref, ref_x, ref_amax, why, sizeof why)) {
        snprintf(c->err, sizeof c->err, "%lldx%lld vs the first candidate: %s", (long long)k->rows, (long long)k->cols, why);
        good = 0;
      }
    }
    free(text);
    if (dead) break;
    if (!good) continue;
    c->valid = 1;
    c->us = time_median(do_op, &a, o->reps);
    if (c->us < 0) {
      c->valid = 0;
      snprintf(c->err, sizeof c->err, "timing failed: %s", bc_last_error(tune));
      /* the timing also runs the two other inputs, which the checks did not */
      if (sticky_error() != CUDA_SUCCESS) {
        dead = 1;
        break;
      }
    }
  }
  if (!dead) retune(tune, NULL);
  free(ref_x);
  for (int d = 0; d < 2; d++) { free(ref.data[d]); free(ref.scale[d]); }
  free(hbuf);
  q_free(&big.dq, 1);
  dfree(big.dx);
  for (int i = 0; i < nchk; i++) shape_free(&chk[i]);
  return dead ? -1 : ok;
}

/* ---- the command ---- */


/* the options that take a value (a name alone, not a prefix of one: --f is not --format) */
static int takes_value(const char *a) {
  static const char *valued[] = { "--format", "--family", "--dtype", "--dir", "--kernel", "--size", "--shape", "--reps", "--min-gain",
                                  "-j", "--out", "--arch" };
  for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
    if (strcmp(a, valued[k]) == 0) return 1;
  return 0;
}

static int bad_number(const char *opt, const char *v, const char *want) {
  fprintf(stderr, "blockcast tune: %s %s: expected %s\n", opt, v, want);
  return 2;
}

static int parse(int argc, char **argv, topts *o) {
  memset(o, 0, sizeof *o);
  o->reps = 15;
  o->size = 16384;
  o->min_gain = 2.0;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  o->jobs = cpus > 0 ? (int)cpus : 1;
  int size_given = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define SETV(flag, set, n)                                                                     \
    if (strcmp(a, flag) == 0 && v) {                                                           \
      if (o->n == MAX_SEL) { fprintf(stderr, "blockcast tune: too many %s (at most %d)\n", flag, MAX_SEL); return 2; } \
      o->set[o->n++] = v;                                                                      \
      i++;                                                                                     \
      continue;                                                                                \
    }
    SETV("--format", formats, nformats)
    SETV("--family", families, nfamilies)
    SETV("--dtype", dtypes, ndtypes)
    SETV("--dir", dirs, ndirs)
    SETV("--kernel", kernels, nkernels)
#undef SETV
    if (strcmp(a, "--flat") == 0) o->flat = 1;
    else if (strcmp(a, "--dry-run") == 0) o->dry_run = 1;
    else if (strcmp(a, "--list") == 0) o->list = 1;
    else if (strcmp(a, "--size") == 0 && v) {
      long long sz;
      if (!whole_number(argv[++i], &sz)) return bad_number(a, v, "a whole number of rows and columns, 256 .. 32768");
      o->size = sz;
      size_given = 1;
    } else if (strcmp(a, "--shape") == 0 && v) {
      /* R x C: two whole numbers around one 'x' */
      const char *x = strchr(v, 'x');
      char rbuf[32];
      long long r = 0, c = 0;
      const size_t rl = x ? (size_t)(x - v) : 0;
      if (!x || rl == 0 || rl >= sizeof rbuf) return bad_number(a, v, "R x C, written RxC (e.g. 8192x2048)");
      memcpy(rbuf, v, rl);
      rbuf[rl] = 0;
      if (!whole_number(rbuf, &r) || !whole_number(x + 1, &c)) return bad_number(a, v, "R x C, written RxC (e.g. 8192x2048)");
      if (r < 1 || c < 1 || r > 1048576 || c > 1048576 || r * c > (1LL << 30))
        return bad_number(a, v, "rows and columns 1 .. 1048576 each, at most 2^30 elements");
      o->shape_r = r, o->shape_c = c;
      i++;
    } else if (strcmp(a, "--reps") == 0 && v) {
      long long r;
      if (!whole_number(argv[++i], &r) || r < 0 || r > 100000) return bad_number(a, v, "a whole number, 5 .. 1000");
      o->reps = (int)r;
    } else if (strcmp(a, "--min-gain") == 0 && v) {
      char *end = NULL;
      o->min_gain = strtod(argv[++i], &end);
      if (end == v || *end || !isfinite(o->min_gain)) return bad_number(a, v, "a percentage, 0 .. 50");
    } else if (strcmp(a, "-j") == 0 && v) {
      long long j;
      if (!whole_number(argv[++i], &j) || j < 0 || j > 100000) return bad_number(a, v, "a whole number of compile jobs, 1 .. 256");
      o->jobs = (int)j;
    }
    else if (strcmp(a, "--out") == 0 && v) o->out = argv[++i];
    else if (strcmp(a, "--arch") == 0 && v) o->arch = argv[++i];
    else if (!v && takes_value(a)) {
      fprintf(stderr, "blockcast tune: option %s needs a value (see blockcast tune --help)\n", a);
      return 2;
    } else {
      fprintf(stderr, "blockcast tune: unknown argument '%s'\n%s", a, tune_usage);
      return 2;
    }
  }
  for (int i = 0; i < o->nfamilies; i++)
    if (strcmp(o->families[i], "quantize") && strcmp(o->families[i], "dequantize") && strcmp(o->families[i], "amax")) {
      fprintf(stderr, "blockcast tune: --family %s: expected quantize, dequantize or amax\n", o->families[i]);
      return 2;
    }
  for (int i = 0; i < o->ndtypes; i++) {
    bc_dtype dt;
    if (!dtype_of(o->dtypes[i], &dt)) { fprintf(stderr, "blockcast tune: --dtype %s: expected bf16, fp16 or fp32\n", o->dtypes[i]); return 2; }
  }
  for (int i = 0; i < o->ndirs; i++)
    if (strcmp(o->dirs[i], "row") && strcmp(o->dirs[i], "col") && strcmp(o->dirs[i], "rowcol")) {
      fprintf(stderr, "blockcast tune: --dir %s: expected row, col or rowcol\n", o->dirs[i]);
      return 2;
    }
  if (size_given && o->shape_r > 0) {
    fprintf(stderr, "blockcast tune: --size and --shape both given; expected one timed shape (--size N for N x N, or --shape RxC)\n");
    return 2;
  }
  if (o->size < 256 || o->size > 32768) { fprintf(stderr, "blockcast tune: --size %lld: expected 256 .. 32768\n", (long long)o->size); return 2; }
  if (o->reps < 5 || o->reps > 1000) { fprintf(stderr, "blockcast tune: --reps %d: expected 5 .. 1000\n", o->reps); return 2; }
  if (o->min_gain < 0 || o->min_gain > 50) { fprintf(stderr, "blockcast tune: --min-gain %g: expected 0 .. 50 (percent)\n", o->min_gain); return 2; }
  if (o->jobs < 1 || o->jobs > 256) { fprintf(stderr, "blockcast tune: -j %d: expected 1 .. 256\n", o->jobs); return 2; }
  if (o->arch && !o->list) { fprintf(stderr, "blockcast tune: --arch goes with --list (a run tunes the current GPU's arch)\n"); return 2; }
  return 0;
}

/* the base tuning text: the file at `path` when it exists, else the embedded one of arch */
static char *base_text_of(bc_ctx *ctx, const char *path, const char *arch, int *from_file) {
  char *t = NULL;
  size_t n;
  *from_file = 0;
  if (access(path, F_OK) == 0) {
    if (bci_read_file(ctx, path, &t, &n) != BC_OK) return NULL;
    *from_file = 1;
    return t;
  }
  char emb[64];
  snprintf(emb, sizeof emb, "gen/tuning/%s.lua", arch);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < bci_embedded_count; i++)
      if (strcmp(bci_embedded_files[i].path, emb) == 0) return bci_strdup(bci_embedded_files[i].text);
    snprintf(emb, sizeof emb, "gen/tuning/default.lua");
  }
  return NULL;
}

/* the tuning file `outp`: base with its tune section rewritten with `entries` (atomically) */
static int write_results(bc_ctx *ctx, const char *outp, const char *base, const char *entries, const char *doc) {
  const char *args[] = { outp, base, entries, doc };
  char *text = NULL;
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_lua_call_str(ctx, "tune_render", 4, args, &text);
  pthread_mutex_unlock(&ctx->lock);
  int rc = 0;
  if (s != BC_OK) rc = tfail(ctx, "writing the results");
  else if (bci_write_atomic(outp, text, strlen(text), NULL, 0) != 0) {
    fprintf(stderr, "blockcast tune: cannot write %s: %s\n", outp, strerror(errno));
    rc = 1;
  }
  free(text);
  return rc;
}

static void fmt_cmd(char *buf, size_t n, int argc, char **argv) {
  snprintf(buf, n, "blockcast tune");
  for (int i = 0; i < argc; i++) {
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, " %s", argv[i]);
  }
}

int bc_cli_tune(bc_ctx *ctx, int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(tune_usage, stdout);
      return 0;
    }
  topts o;
  int rc = parse(argc, argv, &o);
  if (rc) return rc;
  char arch[16] = "sm_90", devname[256] = "", target[24];
  int sms = 0;
  if (!o.list) {
    if (bci_cuda_load(ctx) != BC_OK) return tfail(ctx, "needs a CUDA device");
    CUdevice dev;
    CUcontext cu;
    if (!CUOK(bci_cu.DeviceGet(&dev, 0)) || !CUOK(bci_cu.DevicePrimaryCtxRetain(&cu, dev)) || !CUOK(bci_cu.CtxSetCurrent(cu))) {
      fprintf(stderr, "blockcast tune: cannot open device 0 (cuDeviceGet / cuDevicePrimaryCtxRetain failed)\n");
      return 1;
    }
    bci_cu.DeviceGetName(devname, sizeof devname, dev);
    if (bci_cuda_device(ctx, arch, &sms) != BC_OK) return tfail(ctx, "the device");
    if (bci_jit_target(ctx, arch, target) != BC_OK) return tfail(ctx, "NVRTC");
  } else if (o.arch) {
    snprintf(arch, sizeof arch, "%s", o.arch);
  }
  char outp[512];
  if (o.out && strlen(o.out) >= sizeof outp) {
    fprintf(stderr, "blockcast tune: --out: a path of at most %zu characters\n", sizeof outp - 1);
    return 2;
  }
  snprintf(outp, sizeof outp, "%s", o.out ? o.out : "");
  if (!o.out) snprintf(outp, sizeof outp, "gen/tuning/%s.lua", arch);
  if (!o.out && !o.dry_run && !o.list && access("gen/blockcast.lua", F_OK) != 0) {
    fprintf(stderr, "blockcast tune: run it from the source tree (to rewrite gen/tuning/%s.lua), or give --out FILE or --dry-run\n", arch);
    return 2;
  }
  int from_file;
  char *base = base_text_of(ctx, outp, arch, &from_file);
  if (!base) return tfail(ctx, outp);
  /* the base must be a tuning file the tuner can rewrite before anything is measured against it */
  const char *chk[] = { outp, base };
  char *r = NULL;
  pthread_mutex_lock(&ctx->lock);
  bc_status cs = bci_lua_call_str(ctx, "tune_check", 2, chk, &r);
  pthread_mutex_unlock(&ctx->lock);
  free(r);
  if (cs != BC_OK || bci_set_tuning(ctx, outp, base) != BC_OK) { free(base); return tfail(ctx, "the tuning file"); }
  tkern *ks = NULL;
  int nk = 0;
  rc = plan(ctx, &o, arch, &ks, &nk);
  bci_set_tuning(ctx, NULL, NULL);
  if (rc) { free(base); return rc; }
  if (nk == 0) {
    fprintf(stderr, "blockcast tune: no kernel matches the options (see --help and `blockcast list`)\n");
    free(base);
    return 2;
  }
  int total = 0;
  for (int i = 0; i < nk; i++) total += ks[i].nc;
  if (o.list) {
    for (int i = 0; i < nk; i++) {
      printf("%s (incumbent: %s), %d candidates\n", ks[i].name, ks[i].source, ks[i].nc);
      for (int c = 0; c < ks[i].nc; c++) printf("  %s{ %s }\n", c ? "" : "* ", ks[i].c[c].body);
    }
    printf("%d kernels, %d candidates\n", nk, total);
    for (int i = 0; i < nk; i++) free(ks[i].c);
    free(ks);
    free(base);
    return 0;
  }
  time_t t0 = time(NULL);
  fprintf(stderr, "blockcast tune: %s (%s, %d SMs): %d kernels, %d candidates; compiling with %d threads\n", devname, arch, sms,
          nk, total, o.jobs);
  compile_all(ks, nk, base, target, o.jobs);
  fprintf(stderr, "blockcast tune: compiled in %ld s; measuring\n", (long)(time(NULL) - t0));

  /* the copy, timed like the kernels */
  copy_arg cp = { 0, 0, (size_t)1 << 30 };
  cp.src = (CUdeviceptr)(uintptr_t)dalloc(cp.n);
  cp.dst = (CUdeviceptr)(uintptr_t)dalloc(cp.n);
  bci_cu.MemsetD32Async(cp.src, 0x3C003C00u, cp.n / 4, NULL);
  float copy_us = time_median(do_copy, &cp, o.reps);
  dfree((void *)(uintptr_t)cp.src);
  dfree((void *)(uintptr_t)cp.dst);
  if (copy_us <= 0) {
    fprintf(stderr, "blockcast tune: timing the reference copy failed\n");
    return 1;
  }
  double copy_gbs = 2.0 * (double)cp.n / (copy_us * 1e-6) / 1e9;
  printf("# blockcast tune on %s (%s), copy of 1 GiB: %.1f us, %.0f GB/s\n", devname, arch, copy_us, copy_gbs);
  printf("| kernel | candidates (valid) | incumbent (us) | winner (us) | gain | %% of copy | winner |\n|---|---|---|---|---|---|---|\n");
  fflush(stdout);

  bc_ctx *tune;
  char err[1024];
  if (bc_ctx_create(&tune, err, sizeof err) != BC_OK) { fprintf(stderr, "blockcast tune: %s\n", err); return 1; }
  size_t ecap = 4096, elen = 0;
  char *entries = xmalloc(ecap);
  entries[0] = 0;
  int measured = 0;
  /* this run's line in the file */
  char date[32], cmd[1024], doc[1536];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  fmt_cmd(cmd, sizeof cmd, argc, argv);
  snprintf(doc, sizeof doc, "%s, %s (%s, %d SMs), `%s`", date, devname, arch, sms, cmd);
  int rc_write = 0, dead = 0;
  for (int i = 0; i < nk; i++) {
    tkern *k = &ks[i];
    time_t tk = time(NULL);
    if (k->d.format[0] && bc_format_get(tune, k->d.format, &k->ftune) != BC_OK) { tfail(tune, k->name); continue; }
    int m = measure(ctx, tune, k, base, &o);
    if (m < 0) {
      for (int c = 0; c < k->nc; c++)
        if (k->c[c].err[0]) fprintf(stderr, "blockcast tune: %s { %s }: %s\n", k->name, k->c[c].body, k->c[c].err);
      fprintf(stderr, "blockcast tune: %s: a candidate's kernel faulted and left the CUDA context unusable: stopping (the "
              "candidate is named above; %d kernels measured before it%s; the rest not measured)\n", k->name, measured,
              o.dry_run ? "" : " are in the file");
      dead = 1;
      break;
    }
    if (!m) continue;
    int nvalid = 0, best = -1;
    for (int c = 0; c < k->nc; c++) {
      if (!k->c[c].valid) {
        if (k->c[c].err[0]) fprintf(stderr, "blockcast tune: %s { %s }: %s\n", k->name, k->c[c].body, k->c[c].err);
        continue;
      }
      nvalid++;
      if (best < 0 || k->c[c].us < k->c[best].us) best = c;
    }
    if (best < 0 || !k->c[0].valid) {
      fprintf(stderr, "blockcast tune: %s: the incumbent %s; kernel left as it is\n", k->name,
              best < 0 ? "and every candidate failed" : "failed its checks");
      continue;
    }
    float inc = k->c[0].us;
    k->winner = k->c[best].us < inc * (1.0 - o.min_gain / 100.0) ? best : 0;
    const cand *w = &k->c[k->winner];
    double pct = 100.0 * (k->bytes / (w->us * 1e-6) / 1e9) / copy_gbs;
    printf("| %s | %d (%d) | %.1f | %.1f | %+.1f%% | %.1f%% | %s{ %s } |\n", k->name, k->nc, nvalid, inc, w->us,
           100.0 * (inc - w->us) / inc, pct, k->winner ? "" : "(kept) ", w->body);
    fflush(stdout);
    char line[1024];
    int ln = snprintf(line, sizeof line,
                      "  %s = { %s, measured = { us = %.1f, incumbent_us = %.1f, copy_pct = %.1f, shape = \"%lldx%lld %s\", "
                      "candidates = %d } },\n",
                      k->name, w->body, w->us, inc, pct, (long long)k->rows, (long long)k->cols, k->d.dtype, nvalid);
    if (elen + (size_t)ln + 1 > ecap) {
      ecap = 2 * (elen + (size_t)ln + 1);
      char *e2 = realloc(entries, ecap);
      if (!e2) { fprintf(stderr, "blockcast tune: out of memory\n"); exit(1); }
      entries = e2;
    }
    memcpy(entries + elen, line, (size_t)ln + 1);
    elen += (size_t)ln;
    measured++;
    fprintf(stderr, "blockcast tune: %s: %d candidates in %ld s\n", k->name, k->nc, (long)(time(NULL) - tk));
    /* the file after every kernel: a run cut short keeps what it measured */
    if (!o.dry_run && write_results(ctx, outp, base, entries, doc) != 0) {
      rc_write = 1;
      break;
    }
  }
  if (!dead) {  /* after a sticky error every driver call fails: the process ends right after (nothing to release) */
    bc_ctx_destroy(tune);
    inputs_free();
    staging_free();
  }
  fprintf(stderr, "blockcast tune: %d of %d kernels measured in %ld s\n", measured, nk, (long)(time(NULL) - t0));
  rc = measured == nk && !rc_write ? 0 : 1;
  if (!o.dry_run && measured > 0 && !rc_write)
    fprintf(stderr, "blockcast tune: wrote %d entries to %s%s\n", measured, outp,
            from_file ? "" : " (a new file: the base was the embedded one)");
  free(entries);
  for (int i = 0; i < nk; i++) free(ks[i].c);
  free(ks);
  free(base);
  return rc;
}
