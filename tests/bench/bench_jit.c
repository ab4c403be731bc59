/* bench_jit: the costs of getting a kernel, on the machine it runs on.
 *   cold compile   generate + NVRTC + cache write, per kernel, all kernels of two formats
 *   cache hit      generate (for the key) + read + verify + cuLibraryLoadData, per kernel
 *   AOT lookup     finding a kernel in the embedded AOT set; and a first get from it incl. load
 *   map lookup     a kernel already loaded in the context
 * and the NVRTC calls of a run that only uses AOT kernels (must be 0).
 *   bench_jit [--passes N] [--out FILE]   (uses a fresh cache directory under /tmp; 3 passes) */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/bc_jit.h"
#include "host_timing.h"
#include "gpu.h"

typedef struct list { char *v[512]; int n; } list;
static void add(const char *name, void *u) { list *l = u; if (l->n < 512) l->v[l->n++] = strdup(name); }

static void stats(double *v, int n, double *med, double *lo, double *hi) {
  qsort(v, (size_t)n, sizeof *v, cmpd);
  *med = v[n / 2];
  *lo = v[0];
  *hi = v[n - 1];
}

static const char *SPEC =
  "name = \"%s\"\ndescription = \"bench copy\"\nelement = \"%s\"\nblock = \"tensor\"\n"
  "scale = { type = \"fp32\", rule = \"amax\" }\nrowwise = { layout = \"rowmajor\" }\ncolumnwise = { layout = \"transposed\" }\n";

static void write_spec(const char *dir, const char *name, const char *elem, char *path, size_t n) {
  snprintf(path, n, "%s/%s.lua", dir, name);
  FILE *f = fopen(path, "w");
  fprintf(f, SPEC, name, elem);
  fclose(f);
}

int main(int argc, char **argv) {
  const char *out = NULL;
  int passes = 3;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--passes") && i + 1 < argc && atoi(argv[i + 1]) > 0) passes = atoi(argv[++i]);
    else { fprintf(stderr, "usage: bench_jit [--passes N] [--out FILE]\n"); return 2; }
  }
  char dir[] = "/tmp/bc-bench-jit-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("BLOCKCAST_CACHE_DIR", dir, 1);
  int gpu = gpu_available();
  FILE *o = out ? fopen(out, "w") : NULL;
  char line[1024];
#define EMIT(...) do { snprintf(line, sizeof line, __VA_ARGS__); fputs(line, stdout); if (o) fputs(line, o); } while (0)
  time_t t = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
  EMIT("# bench_jit: %s, %s\n\n", gpu ? gpu_name() : "no GPU (compile and cache-read costs only)", date);

  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("%s\n", err); return 1; }
  char arch[16] = "sm_90", target[24];
  if (gpu) bci_cuda_device(ctx, arch, NULL);
  bci_jit_target(ctx, arch, target);
  char fp[512];
  bci_nvrtc_fingerprint(ctx, fp, sizeof fp);
  char archopt[64], optstr[256];
  const char *opts[BCI_NVRTC_NOPTS];
  bci_join_options(opts, bci_nvrtc_options(target, archopt, opts), optstr, sizeof optstr);
  EMIT("arch %s, NVRTC target %s, %s; options: %s%s%s\n\n", arch, target, fp, optstr,
       getenv("BLOCKCAST_TUNING") ? "; tuning override " : "", getenv("BLOCKCAST_TUNING") ? getenv("BLOCKCAST_TUNING") : "");

  /* ---- cold compile: every kernel of two formats, `passes` times (no cache in between); per
   * kernel the median over the passes, so that the host's noise (it differs from run to run)
   * moves the numbers less. NVRTC's floor on this host: a one-line kernel through the same
   * options, three times per pass. ---- */
  list l = { 0 };
  bc_kernel_names(ctx, target, "fp8_e4m3_tensor", add, &l);
  bc_kernel_names(ctx, target, "fp8_e5m2_tensor", add, &l);
  double *cold = malloc(sizeof(double) * (size_t)l.n * (size_t)passes), *gen = malloc(sizeof(double) * (size_t)l.n);
  double *flo = malloc(sizeof(double) * 3 * (size_t)passes);
  int nflo = 0;
  for (int p = 0; p < passes; p++) {
    /* each pass into an empty cache of its own: every compile is a miss */
    char pdir[64];
    snprintf(pdir, sizeof pdir, "%s/pass%d", dir, p);
    mkdir(pdir, 0700);
    setenv("BLOCKCAST_CACHE_DIR", pdir, 1);
    for (int i = 0; i <= l.n; i++) {
      if (i == 0 || i == l.n / 2 || i == l.n) { /* the floor: at the start, middle and end of the pass */
        static const char triv[] = "extern \"C\" __global__ void bc_trivial(float *p) { p[threadIdx.x] = 1.0f; }\n";
        void *bin;
        size_t n;
        double t0 = now_ms();
        pthread_mutex_lock(&ctx->lock);
        bc_status s = bci_nvrtc_compile(ctx, "bc_trivial", triv, target, &bin, &n);
        pthread_mutex_unlock(&ctx->lock);
        flo[nflo++] = now_ms() - t0;
        if (s != BC_OK) { printf("%s\n", bc_last_error(ctx)); return 1; }
        free(bin);
      }
      if (i == l.n) break;
      char *src;
      double t0 = now_ms();
      bc_kernel_source(ctx, l.v[i], target, &src, NULL);
      if (p == 0) gen[i] = now_ms() - t0;
      free(src);
      void *bin;
      size_t n;
      t0 = now_ms();
      if (bc_kernel_compile(ctx, l.v[i], target, &bin, &n) != BC_OK) { printf("%s\n", bc_last_error(ctx)); return 1; }
      cold[(size_t)i * passes + p] = now_ms() - t0;
      free(bin);
    }
  }
  setenv("BLOCKCAST_CACHE_DIR", dir, 1);
  double *km = malloc(sizeof(double) * (size_t)l.n), *va = malloc(sizeof(double) * (size_t)l.n);
  int na = 0;
  double med, lo, hi;
  for (int i = 0; i < l.n; i++) {
    double *v = &cold[(size_t)i * passes];
    if (getenv("BC_BENCH_PER_KERNEL")) {
      char ps[256] = "";
      for (int p = 0; p < passes; p++) {
        size_t m = strlen(ps);
        snprintf(ps + m, sizeof ps - m, " %6.1f", v[p]);
      }
      EMIT("#   %-52s passes%s ms\n", l.v[i], ps);
    }
    stats(v, passes, &med, &lo, &hi);
    km[i] = med;
    /* the kernels an aligned launch needs (the element-wise companions, __elems / __row_elems,
     * are compiled only for ragged or misaligned launches) */
    if (!strstr(l.v[i], "elems")) va[na++] = med;
  }
  EMIT("\n%d passes; per kernel the median of its passes\n\n", passes);
  stats(km, l.n, &med, &lo, &hi);
  EMIT("| measure | median | min | max | n | target |\n|---|---|---|---|---|---|\n");
  EMIT("| cold compile per kernel (generate + NVRTC + cache write), ms | %.1f | %.1f | %.1f | %d | <= 50 ms |\n", med, lo, hi, l.n);
  double cold_med = med;
  stats(va, na, &med, &lo, &hi);
  EMIT("| of those: the kernels of aligned launches (no element-wise companions), ms | %.1f | %.1f | %.1f | %d | |\n", med, lo, hi, na);
  stats(gen, l.n, &med, &lo, &hi);
  EMIT("| of which: generate the source (Lua), ms | %.2f | %.2f | %.2f | %d | |\n", med, lo, hi, l.n);
  stats(flo, nflo, &med, &lo, &hi);
  EMIT("| NVRTC floor: a one-line kernel, same options, ms | %.1f | %.1f | %.1f | %d | |\n", med, lo, hi, nflo);
  EMIT("| cold compile median / NVRTC floor | %.2f | | | | |\n", cold_med / med);
  free(km);
  free(va);
  free(flo);

  if (gpu) {
    /* ---- disk-cache hit including load: run-time copies of the formats (not in the AOT set) ---- */
    char p1[256], p2[256];
    write_spec(dir, "fp8_e4m3_benchjit", "e4m3", p1, sizeof p1);
    write_spec(dir, "fp8_e5m2_benchjit", "e5m2", p2, sizeof p2);
    list j = { 0 };
    for (int pass = 0; pass < 2; pass++) {
      bc_ctx *c;
      bc_ctx_create(&c, NULL, 0);
      const bc_format *f;
      bc_format_load(c, p1, &f);
      bc_format_load(c, p2, &f);
      if (pass == 0) {
        bc_kernel_names(c, target, "fp8_e4m3_benchjit", add, &j);
        bc_kernel_names(c, target, "fp8_e5m2_benchjit", add, &j);
      }
      double *hit = malloc(sizeof(double) * (size_t)j.n);
      for (int i = 0; i < j.n; i++) {
        const bci_kernel *k;
        double t0 = now_ms();
        if (bci_kernel_get(c, j.v[i], &k) != BC_OK) { printf("%s\n", bc_last_error(c)); return 1; }
        hit[i] = now_ms() - t0;
      }
      bc_stats st;
      bc_get_stats(c, &st);
      if (pass == 1) {
        stats(hit, j.n, &med, &lo, &hi);
        EMIT("| disk-cache hit incl. load (generate + read + verify + cuLibraryLoadData), ms | %.3f | %.3f | %.3f | %d | <= 1 ms |\n",
             med, lo, hi, j.n);
        EMIT("| (that pass: %llu cache hits, %llu NVRTC compiles) | | | | | |\n", (unsigned long long)st.cache_hits,
             (unsigned long long)st.nvrtc_compiles);
      }
      free(hit);
      bc_ctx_destroy(c);
    }

    /* ---- AOT: a fresh context that uses only built-in kernels ---- */
    bc_ctx *c;
    bc_ctx_create(&c, NULL, 0);
    bci_aot_index(c);
    double *look = malloc(sizeof(double) * (size_t)l.n), *first = malloc(sizeof(double) * (size_t)l.n),
           *again = malloc(sizeof(double) * (size_t)l.n);
    for (int i = 0; i < l.n; i++) {
      const int reps = 1000;
      double t0 = now_ms();
      const bci_aot_entry *e = NULL;
      for (int r = 0; r < reps; r++) e = bci_aot_find(c, l.v[i], arch);
      look[i] = (now_ms() - t0) * 1e3 / reps;
      if (!e) { printf("%s is not in the AOT set for %s\n", l.v[i], arch); return 1; }
      const bci_kernel *k;
      t0 = now_ms();
      bci_kernel_get(c, l.v[i], &k);
      first[i] = now_ms() - t0;
      t0 = now_ms();
      for (int r = 0; r < reps; r++) bci_kernel_get(c, l.v[i], &k);
      again[i] = (now_ms() - t0) * 1e3 / reps;
    }
    stats(look, l.n, &med, &lo, &hi);
    EMIT("| AOT lookup (find the entry in the embedded set), us | %.2f | %.2f | %.2f | %d | <= 10 us |\n", med, lo, hi, l.n);
    stats(first, l.n, &med, &lo, &hi);
    EMIT("| first get of an AOT kernel (lookup + checksum + cuLibraryLoadData), ms | %.3f | %.3f | %.3f | %d | |\n", med, lo, hi, l.n);
    stats(again, l.n, &med, &lo, &hi);
    EMIT("| get of a kernel already loaded in the context, us | %.2f | %.2f | %.2f | %d | |\n", med, lo, hi, l.n);
    /* and real work through the public API, still AOT only */
    int64_t M = 1024, K = 1024;
    void *x = dmalloc((size_t)(M * K * 2)), *row = dmalloc((size_t)(M * K)), *col = dmalloc((size_t)(M * K));
    float *fl = dmalloc(16);
    CK(cudaMemset(x, 0x3c, (size_t)(M * K * 2)));
    const bc_format *f;
    bc_format_get(c, "fp8_e4m3_tensor", &f);
    bc_tensor in = { x, BC_BF16, M, K, 0 };
    bc_qtensor q = { f, M, K, row, fl, col, fl + 1, fl + 2, fl + 3, 0, 0, 0, 0 };
    bc_quantize(c, &in, &q, NULL);
    CK(cudaDeviceSynchronize());
    bc_stats st;
    bc_get_stats(c, &st);
    EMIT("\nAOT-only run: %llu kernels loaded, %llu from the AOT set, %llu NVRTC compiles, %llu cache reads\n",
         (unsigned long long)st.kernels_loaded, (unsigned long long)st.aot_hits, (unsigned long long)st.nvrtc_compiles,
         (unsigned long long)(st.cache_hits + st.cache_misses));
    bc_ctx_destroy(c);
  }
  if (o) fclose(o);
  bc_ctx_destroy(ctx);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : 1;
}
