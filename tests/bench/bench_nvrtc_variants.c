/* bench_nvrtc_variants: NVRTC compile time of variants of generated sources, on the machine it runs
 * on (no GPU needed). Every round compiles each variant once, round-robin, so that the host's drift
 * touches them all alike; prints the min and the median over the rounds.
 *   bench_nvrtc_variants [--arch sm_90] ROUNDS FILE[,OPT[;OPT...]] ...
 * FILE: a CUDA source (e.g. from `blockcast gen --out DIR`, edited to the variant), compiled with the
 * library's NVRTC options plus OPT; an OPT "---X" drops the library's option "--X" (e.g. ---minimal),
 * an OPT --Ofast-compile=... replaces the library's. Used for the cold-compile notes
 * (tests/bench/NOTES.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit/bc_jit.h"
#include "host_timing.h"

#define MAXV 64
#define MAXO 16

int main(int argc, char **argv) {
  const char *arch = "sm_90";
  int a = 1;
  if (a + 1 < argc && !strcmp(argv[a], "--arch")) { arch = argv[a + 1]; a += 2; }
  if (argc - a < 2 || atoi(argv[a]) < 1 || argc - a - 1 > MAXV) {
    fprintf(stderr, "usage: bench_nvrtc_variants [--arch sm_XX] ROUNDS FILE[,OPT[;OPT...]] ... (at most %d)\n", MAXV);
    return 2;
  }
  int rounds = atoi(argv[a++]), nv = argc - a;
  bc_ctx *ctx;
  char err[512];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK || bci_nvrtc_load(ctx) != BC_OK) {
    fprintf(stderr, "bench_nvrtc_variants: %s\n", ctx ? bc_last_error(ctx) : err);
    return 1;
  }
  char *src[MAXV], archopt[64];
  const char *opts[MAXV][MAXO];
  int nopts[MAXV];
  double *t = malloc(sizeof(double) * (size_t)nv * (size_t)rounds);
  for (int v = 0; v < nv; v++) {
    char *spec = strdup(argv[a + v]), *extra = strchr(spec, ',');
    if (extra) *extra++ = 0;
    size_t len;
    if (bci_read_file(ctx, spec, &src[v], &len) != BC_OK) {
      fprintf(stderr, "bench_nvrtc_variants: %s\n", bc_last_error(ctx));
      return 1;
    }
    const char *base[BCI_NVRTC_NOPTS];
    int nb = bci_nvrtc_options(arch, archopt, base), n = 0;
    for (int i = 0; i < nb; i++) opts[v][n++] = base[i];
    for (char *o = extra ? strtok(extra, ";") : NULL; o && n < MAXO; o = strtok(NULL, ";")) {
      int found = -1;
      for (int i = 0; i < n; i++)
        if (!strcmp(opts[v][i], o[0] == '-' && o[1] == '-' && o[2] == '-' ? o + 1 : o) ||
            (!strncmp(o, "--Ofast-compile", 15) && !strncmp(opts[v][i], "--Ofast-compile", 15)))
          found = i;
      if (o[0] == '-' && o[1] == '-' && o[2] == '-') { /* "---minimal": drop --minimal */
        if (found >= 0) opts[v][found] = opts[v][--n];
      } else if (found >= 0) {
        opts[v][found] = o;
      } else {
        opts[v][n++] = o;
      }
    }
    nopts[v] = n;
  }
  for (int r = 0; r < rounds; r++)
    for (int v = 0; v < nv; v++) {
      nvrtcProgram p;
      double t0 = now_ms();
      bci_nvrtc.CreateProgram(&p, src[v], "variant.cu", 0, NULL, NULL);
      nvrtcResult rc = bci_nvrtc.CompileProgram(p, nopts[v], opts[v]);
      t[(size_t)v * rounds + r] = now_ms() - t0;
      if (rc != NVRTC_SUCCESS) {
        size_t ln = 0;
        bci_nvrtc.GetProgramLogSize(p, &ln);
        char *log = malloc(ln + 1);
        if (log) { log[0] = 0; bci_nvrtc.GetProgramLog(p, log); }
        fprintf(stderr, "%s: %s\n%s\n", argv[a + v], bci_nvrtc.GetErrorString(rc), log ? log : "");
        free(log);
        return 1;
      }
      bci_nvrtc.DestroyProgram(&p);
    }
  printf("%d rounds, arch %s\n| variant | min (ms) | median (ms) |\n|---|---|---|\n", rounds, arch);
  for (int v = 0; v < nv; v++) {
    double *x = &t[(size_t)v * rounds];
    qsort(x, (size_t)rounds, sizeof *x, cmpd);
    printf("| %s | %.1f | %.1f |\n", argv[a + v], x[0], x[rounds / 2]);
  }
  bc_ctx_destroy(ctx);
  return 0;
}
