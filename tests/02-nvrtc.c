/* 02-nvrtc: every generated kernel is in the embedded AOT set for sm_90 and sm_100a as a cubin
 * (ELF) under the disk-cache key of the source the generator makes now and its options (the
 * build compiled them with NVRTC through the library's own path, `blockcast aot`); a sample of
 * kernels (every kernel for bf16 or without a dtype; all of them with BC_TEST_FULL=1) compiles
 * again through the JIT path (no GPU needed) to the same bytes. Also: a compile error returns
 * BC_ERR_NVRTC with the log and excerpt. */
#include <stdlib.h>
#include <string.h>

#include "jit/bc_jit.h"
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
  const int full = getenv("BC_TEST_FULL") != NULL;
  bci_aot_index(ctx);
  for (int a = 0; a < 2; a++) {
    list l = { 0 };
    bc_kernel_names(ctx, archs[a], NULL, add, &l);
    int sampled = 0, compiled = 0, same_bytes = 0, elf = 0, in_aot = 0, same_key = 0;
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
      sampled++;
      void *bin;
      size_t n;
      bc_status s = bc_kernel_compile(ctx, l.v[i], archs[a], &bin, &n);
      if (s != BC_OK) { diag("%s %s: %s", l.v[i], archs[a], bc_last_error(ctx)); continue; }
      compiled++;
      same_bytes += n == e->size && memcmp(bin, e->data, n) == 0;
      free(bin);
    }
    is_int(in_aot, l.n, "%s: all %d kernels are in the embedded AOT set", archs[a], l.n);
    is_int(elf, l.n, "%s: every AOT entry is a cubin (ELF)", archs[a]);
    is_int(same_key, l.n, "%s: every AOT entry carries the disk-cache key of its source and options", archs[a]);
    is_int(compiled, sampled, "%s: %d kernels compile again through the JIT path", archs[a], sampled);
    is_int(same_bytes, sampled, "%s: to the same bytes as their AOT entries", archs[a]);
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
