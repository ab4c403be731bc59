/* 02-nvrtc: every generated kernel compiles with NVRTC for sm_90 and sm_100a through the
 * library's JIT path (no GPU needed), gives a cubin (ELF), and the embedded AOT set holds every
 * kernel for both archs. Also: a compile error returns BC_ERR_NVRTC with the log and excerpt. */
#include <stdlib.h>
#include <string.h>

#include "bc_internal.h"
#include "tap.h"

typedef struct list { char *v[512]; int n; } list;
static void add(const char *name, void *u) { list *l = u; if (l->n < 512) l->v[l->n++] = strdup(name); }

int main(void) {
  /* a fresh, empty disk cache: every kernel below is compiled by NVRTC */
  char cache[] = "/tmp/bc-nvrtc-cache-XXXXXX";
  if (!mkdtemp(cache)) { printf("Bail out! mkdtemp\n"); return 1; }
  setenv("BLOCKCAST_CACHE_DIR", cache, 1);
  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  const char *archs[] = { "sm_90", "sm_100a" };
  bci_aot_index(ctx);
  for (int a = 0; a < 2; a++) {
    list l = { 0 };
    bc_kernel_names(ctx, archs[a], NULL, add, &l);
    int compiled = 0, elf = 0, in_aot = 0, same_key = 0;
    char fp[1024];
    bci_nvrtc_fingerprint(ctx, fp, sizeof fp);
    for (int i = 0; i < l.n; i++) {
      void *bin;
      size_t n;
      bc_status s = bc_kernel_compile(ctx, l.v[i], archs[a], &bin, &n);
      if (s != BC_OK) { diag("%s %s: %s", l.v[i], archs[a], bc_last_error(ctx)); continue; }
      compiled++;
      elf += n > 4 && memcmp(bin, "\x7f" "ELF", 4) == 0;
      const bci_aot_entry *e = bci_aot_find(ctx, l.v[i], archs[a]);
      in_aot += e && e->size > 0;
      /* the AOT set is keyed like the disk cache: the same key for the same source and options */
      char *src;
      size_t sl;
      if (e && bc_kernel_source(ctx, l.v[i], archs[a], &src, &sl) == BC_OK) {
        char archopt[64], key[65];
        const char *opts[BCI_NVRTC_NOPTS];
        bci_nvrtc_options(archs[a], archopt, opts);
        bci_cache_key(src, sl, opts, BCI_NVRTC_NOPTS, fp, key);
        same_key += strcmp(key, e->key) == 0;
        free(src);
      }
      free(bin);
    }
    is_int(compiled, l.n, "all %d kernels compile for %s", l.n, archs[a]);
    is_int(elf, l.n, "%s: every output is a cubin (ELF)", archs[a]);
    is_int(in_aot, l.n, "%s: every kernel is in the embedded AOT set", archs[a]);
    is_int(same_key, l.n, "%s: every AOT entry carries the disk-cache key of its source and options", archs[a]);
    for (int i = 0; i < l.n; i++) free(l.v[i]);
  }
  bc_stats st;
  bc_get_stats(ctx, &st);
  ok(st.nvrtc_compiles >= 60, "NVRTC calls are counted (%llu)", (unsigned long long)st.nvrtc_compiles);

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
