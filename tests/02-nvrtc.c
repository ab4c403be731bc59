/* 02-nvrtc: every generated kernel is in the embedded AOT set for sm_90 and sm_100a as a cubin
 * (ELF) under the disk-cache key of the source the generator makes now and its options (the
 * build compiled them with NVRTC through the library's own path, `blockcast aot`); a sample of
 * kernels (for sm_90 every kernel for bf16 or without a dtype, for sm_100a every 4th of those: the
 * same path with another arch option; all of them with BC_TEST_FULL=1; every k-th of that with
 * BC_TEST_SAMPLE=k, as the sanitizer tier runs it) compiles again through the JIT path (no GPU
 * needed) to the same bytes, on BC_TEST_JOBS threads (default: the CPUs, at most 8), each with a
 * context of its own. Also: a compile error returns BC_ERR_NVRTC with the log and excerpt. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/bc_jit.h"
#include "names.h"
#include "tap.h"

/* one worker: the sampled kernels k = w, w + W, ... of one arch, compiled by its own context */
typedef struct work {
  const char *arch;
  char **names;     /* the sample */
  int n, w, W;
  int *same;        /* [n]: -2 not tried, -1 compile failed, 0 other bytes, 1 the AOT entry's bytes */
  char **err;       /* [n]: the message of a failure */
  unsigned long long compiles, hits;
  char ctx_err[256];
} work;

static void *compile_part(void *arg) {
  work *j = arg;
  bc_ctx *c;
  if (bc_ctx_create(&c, j->ctx_err, sizeof j->ctx_err) != BC_OK) return NULL;
  bci_aot_index(c);
  for (int k = j->w; k < j->n; k += j->W) {
    const bci_aot_entry *e = bci_aot_find(c, j->names[k], j->arch);
    void *bin;
    size_t n;
    if (bc_kernel_compile(c, j->names[k], j->arch, &bin, &n) != BC_OK) {
      j->same[k] = -1;
      j->err[k] = strdup(bc_last_error(c));
      continue;
    }
    j->same[k] = e && n == e->size && memcmp(bin, e->data, n) == 0;
    free(bin);
  }
  bc_stats st;
  bc_get_stats(c, &st);
  j->compiles = st.nvrtc_compiles;
  j->hits = st.cache_hits;
  bc_ctx_destroy(c);
  return NULL;
}

static int env_int(const char *name, int dflt, int lo, int hi) {
  const char *v = getenv(name);
  int x = v && *v ? atoi(v) : dflt;
  return x < lo ? lo : x > hi ? hi : x;
}

int main(void) {
  /* a fresh, empty disk cache: every kernel below is compiled by NVRTC */
  char cache[] = "/tmp/bc-nvrtc-cache-XXXXXX";
  if (!mkdtemp(cache)) { printf("Bail out! mkdtemp\n"); return 1; }
  setenv("BLOCKCAST_CACHE_DIR", cache, 1);
  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  const char *archs[] = { "sm_90", "sm_100a" };
  const int full = getenv("BC_TEST_FULL") != NULL;
  bci_aot_index(ctx);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const int W = env_int("BC_TEST_JOBS", ncpu > 0 ? (int)ncpu : 1, 1, 8);
  const int every = full ? 1 : env_int("BC_TEST_SAMPLE", 1, 1, 1000);
  unsigned long long compiles = 0, hits = 0, sampled_all = 0;
  for (int a = 0; a < 2; a++) {
    names l = { 0 };
    bc_kernel_names(ctx, archs[a], NULL, names_add, &l);
    const int step = full ? 1 : every * (a ? 4 : 1);
    int elf = 0, in_aot = 0, same_key = 0, nsample = 0, bf16 = 0;
    char **sample = calloc((size_t)l.n + 1, sizeof *sample);
    char fp[1024];
    bci_nvrtc_fingerprint(ctx, fp, sizeof fp);
    for (int i = 0; i < l.n; i++) {
      const bci_aot_entry *e = bci_aot_find(ctx, l.v[i], archs[a]);
      in_aot += e && e->size > 0;
      if (!e) { diag("%s %s: not in the AOT set", l.v[i], archs[a]); continue; }
      elf += e->size > 4 && memcmp(e->data, "\x7f" "ELF", 4) == 0;
      /* the AOT set is keyed like the disk cache: the same key for the same source and options */
      char *src;
      size_t sl;
      if (bc_kernel_source(ctx, l.v[i], archs[a], &src, &sl) == BC_OK) {
        char archopt[64], key[65];
        const char *opts[BCI_NVRTC_NOPTS];
        int nopts = bci_nvrtc_options(archs[a], archopt, opts);
        bci_cache_key(src, sl, opts, nopts, fp, key);
        same_key += strcmp(key, e->key) == 0;
        free(src);
      }
      if (!full && (strstr(l.v[i], "__fp32") || strstr(l.v[i], "__fp16"))) continue;
      /* every step-th, the two archs starting apart so that together they take different kernels */
      if ((bf16++ + a * (step / 2)) % step == 0 && sample) sample[nsample++] = l.v[i];
    }
    ok(l.n > 0 && !l.lost && sample, "%s: %d kernels listed", archs[a], l.n);
    is_int(in_aot, l.n, "%s: all %d kernels are in the embedded AOT set", archs[a], l.n);
    is_int(elf, l.n, "%s: every AOT entry is a cubin (ELF)", archs[a]);
    is_int(same_key, l.n, "%s: every AOT entry carries the disk-cache key of its source and options", archs[a]);

    int *same = malloc(((size_t)nsample + 1) * sizeof *same);
    char **err = calloc((size_t)nsample + 1, sizeof *err);
    if (!same || !err) { printf("Bail out! out of memory\n"); return 1; }
    for (int k = 0; k < nsample; k++) same[k] = -2;
    work jobs[8];
    pthread_t th[8];
    int started[8] = { 0 };
    for (int w = 0; w < W; w++) {
      jobs[w] = (work){ archs[a], sample, nsample, w, W, same, err, 0, 0, "" };
      started[w] = pthread_create(&th[w], NULL, compile_part, &jobs[w]) == 0;
      if (!started[w]) compile_part(&jobs[w]);
    }
    int compiled = 0, same_bytes = 0, ctx_ok = 0;
    for (int w = 0; w < W; w++) {
      if (started[w]) pthread_join(th[w], NULL);
      if (jobs[w].ctx_err[0]) diag("worker %d: bc_ctx_create: %s", w, jobs[w].ctx_err);
      else ctx_ok++;
      compiles += jobs[w].compiles;
      hits += jobs[w].hits;
    }
    for (int k = 0; k < nsample; k++) {
      if (same[k] == -1) diag("%s %s: %s", sample[k], archs[a], err[k]);
      if (same[k] == -2) diag("%s %s: not compiled (its worker had no context)", sample[k], archs[a]);
      compiled += same[k] >= 0;
      same_bytes += same[k] == 1;
      if (same[k] == 0) diag("%s %s: compiled to other bytes than its AOT entry", sample[k], archs[a]);
      free(err[k]);
    }
    is_int(ctx_ok, W, "%s: %d compile workers", archs[a], W);
    char of[64] = "";
    if (step > 1) snprintf(of, sizeof of, " (every %d-th of %d)", step, bf16);
    is_int(compiled, nsample, "%s: %d kernels%s compile again through the JIT path", archs[a], nsample, of);
    is_int(same_bytes, nsample, "%s: to the same bytes as their AOT entries", archs[a]);
    sampled_all += (unsigned long long)nsample;
    free(same);
    free(err);
    free(sample);
    names_free(&l);
  }
  /* a fresh cache: each sampled kernel is an NVRTC compile (or a hit, where two kernels' sources
   * and options are the same) */
  ok(compiles > 0 && compiles + hits == sampled_all, "NVRTC compiles and cache hits are counted (%llu + %llu of %llu)", compiles,
     hits, sampled_all);

  /* a compile error: invalid CUDA through the same path */
  setenv("BLOCKCAST_DUMP_DIR", "build/tests/dump", 1);
  void *bin;
  size_t n;
  const char *bad = "// header\n#line 1 \"templates/broken.cu\"\nextern \"C\" __global__ void k(int *p) {\n  p[0] = undefined_thing;\n}\n";
  pthread_mutex_lock(&ctx->lock);
  bc_status s = bci_nvrtc_compile(ctx, "bc_broken", bad, "sm_90", &bin, &n);
  pthread_mutex_unlock(&ctx->lock);
  is_int(s, BC_ERR_NVRTC, "invalid CUDA gives BC_ERR_NVRTC");
  is_str_has(bc_last_error(ctx), "undefined_thing", "the log names the error");
  is_str_has(bc_last_error(ctx), "options: --gpu-architecture=sm_90", "the options are shown");
  is_str_has(bc_last_error(ctx), ">    2 |   p[0] = undefined_thing;", "the template line is shown, numbered");
  is_str_has(bc_last_error(ctx), "full source: build/tests/dump/bc_broken.sm_90.cu", "the dump path is given");
  bc_ctx_destroy(ctx);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
  if (system(cmd) != 0) diag("could not remove %s", cache);
  return done_testing();
}
