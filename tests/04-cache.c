/* 04-cache: the disk cache and the JIT path without a GPU. Miss then hit with identical bytes;
 * corrupt entries (truncated, flipped byte, another key's file) are misses that get recompiled
 * and replaced; 8 processes racing to compile the same 20 kernels into one empty cache end with
 * no errors, no torn or temporary files and identical bytes; threads of one process compile a
 * kernel once; the size cap evicts the least recently used entries; a tuning that makes the
 * template invalid gives BC_ERR_NVRTC with the template excerpt; specs from BLOCKCAST_SPEC_PATH;
 * PTX for a device newer than NVRTC. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/bc_jit.h"
#include "names.h"
#include "tap.h"

static char cache[64];


static size_t count_files(const char *suffix) {
  size_t n = 0;
  DIR *d = opendir(cache);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sub[400];
    snprintf(sub, sizeof sub, "%s/%s", cache, e->d_name);
    DIR *s = opendir(sub);
    struct dirent *f;
    while (s && (f = readdir(s))) {
      size_t l = strlen(f->d_name);
      if (l > strlen(suffix) && strcmp(f->d_name + l - strlen(suffix), suffix) == 0) n++;
    }
    if (s) closedir(s);
  }
  if (d) closedir(d);
  return n;
}

/* path of the cache file of a kernel (sm_90) */
static void entry_of(bc_ctx *ctx, const char *kernel, char *path, size_t n) {
  char fp[1024], archopt[64], key[65];
  const char *opts[BCI_NVRTC_NOPTS];
  bci_nvrtc_fingerprint(ctx, fp, sizeof fp);
  char *src;
  size_t sl;
  bc_kernel_source(ctx, kernel, "sm_90", &src, &sl);
  int nopts = bci_nvrtc_options("sm_90", archopt, opts);
  bci_cache_key(src, sl, opts, nopts, fp, key);
  free(src);
  snprintf(path, n, "%s/%.2s/%s.bck", cache, key, key);
}

static int compile(bc_ctx *ctx, const char *k, void **bin, size_t *n) {
  bc_status s = bc_kernel_compile(ctx, k, "sm_90", bin, n);
  if (s != BC_OK) diag("%s: %s", k, bc_last_error(ctx));
  return s == BC_OK;
}

static void *thread_compile(void *arg) {
  bc_ctx *ctx = arg;
  void *bin;
  size_t n;
  if (bc_kernel_compile(ctx, "bc_quantize_fp8_e5m2_tensor__fp16__col", "sm_90", &bin, &n) == BC_OK) free(bin);
  return NULL;
}

int main(void) {
  snprintf(cache, sizeof cache, "/tmp/bc-cache-test-XXXXXX");
  if (!mkdtemp(cache)) { printf("Bail out! mkdtemp\n"); return 1; }
  setenv("BLOCKCAST_CACHE_DIR", cache, 1);
  unsetenv("BLOCKCAST_TUNING");
  unsetenv("BLOCKCAST_CACHE_MAX_MB");
  bc_ctx *ctx;
  char err[2048];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  const char *K = "bc_quantize_fp8_e4m3_tensor__bf16__rowcol";

  /* ---- miss, then hit ---- */
  void *a = NULL, *b = NULL;
  size_t an = 0, bn = 0;
  bc_stats st;
  ok(compile(ctx, K, &a, &an), "first compile");
  bc_get_stats(ctx, &st);
  ok(st.cache_misses == 1 && st.nvrtc_compiles == 1 && st.cache_writes == 1, "a miss: compiled by NVRTC and written");
  bc_ctx *ctx2;
  bc_ctx_create(&ctx2, err, sizeof err);
  ok(compile(ctx2, K, &b, &bn), "second compile in a new context");
  bc_get_stats(ctx2, &st);
  ok(st.cache_hits == 1 && st.nvrtc_compiles == 0, "a hit: no NVRTC call");
  ok(an == bn && memcmp(a, b, an) == 0, "the cached bytes are the compiled bytes");
  free(b);

  /* ---- corruption: each is a miss, recompiled, replaced ---- */
  char path[512];
  entry_of(ctx, K, path, sizeof path);
  struct stat sb;
  ok(stat(path, &sb) == 0, "the entry is at <dir>/<key[0..1]>/<key>.bck");
  const char *kinds[] = { "truncated", "flipped byte", "another key's file" };
  char other[512];
  void *ob;
  size_t on;
  compile(ctx, "bc_scale_fp8_e4m3_tensor", &ob, &on);
  free(ob);
  entry_of(ctx, "bc_scale_fp8_e4m3_tensor", other, sizeof other);
  for (int kind = 0; kind < 3; kind++) {
    if (kind == 0) {
      if (truncate(path, sb.st_size / 2) != 0) diag("truncate failed");
    } else if (kind == 1) {
      int fd = open(path, O_RDWR);
      unsigned char c;
      if (pread(fd, &c, 1, sb.st_size - 7) != 1) diag("read failed");
      c ^= 0x10;
      if (pwrite(fd, &c, 1, sb.st_size - 7) != 1) diag("write failed");
      close(fd);
    } else {
      char cmd[1200];
      snprintf(cmd, sizeof cmd, "cp %s %s", other, path);
      if (system(cmd) != 0) diag("cp failed");
    }
    bc_ctx *c3;
    bc_ctx_create(&c3, err, sizeof err);
    ok(compile(c3, K, &b, &bn), "%s: compile succeeds", kinds[kind]);
    bc_get_stats(c3, &st);
    ok(st.cache_bad == 1 && st.nvrtc_compiles == 1 && st.cache_writes == 1, "%s: detected, recompiled, rewritten", kinds[kind]);
    ok(an == bn && memcmp(a, b, an) == 0, "%s: the result is correct", kinds[kind]);
    free(b);
    bc_ctx_destroy(c3);
    bc_ctx_create(&c3, err, sizeof err);
    compile(c3, K, &b, &bn);
    free(b);
    bc_get_stats(c3, &st);
    ok(st.cache_hits == 1 && st.nvrtc_compiles == 0, "%s: the replaced entry is a hit again", kinds[kind]);
    bc_ctx_destroy(c3);
  }
  free(a);

  /* ---- 8 processes racing for the same 20 kernels in an empty cache ---- */
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s/*", cache);
  if (system(cmd) != 0) diag("could not empty the cache");
  names l = { 0 };
  bc_kernel_names(ctx, "sm_90", NULL, names_add, &l);
  int nk = l.n < 20 ? l.n : 20;
  int fds[8][2];
  pid_t pids[8];
  for (int p = 0; p < 8; p++) {
    if (pipe(fds[p]) != 0) diag("pipe failed");
    pids[p] = fork();
    if (pids[p] == 0) {
      close(fds[p][0]);
      bc_ctx *c;
      if (bc_ctx_create(&c, NULL, 0) != BC_OK) _exit(2);
      for (int i = 0; i < nk; i++) {
        void *bin;
        size_t n;
        if (bc_kernel_compile(c, l.v[(i + p) % nk], "sm_90", &bin, &n) != BC_OK) _exit(3);
        char hex[65], line[128];
        bci_sha256_hex(bin, n, hex);
        int len = snprintf(line, sizeof line, "%d %s\n", (i + p) % nk, hex);
        if (write(fds[p][1], line, (size_t)len) != len) _exit(4);
        free(bin);
      }
      _exit(0);
    }
    close(fds[p][1]);
  }
  char hashes[8][20][65];
  int exits_ok = 0;
  for (int p = 0; p < 8; p++) {
    FILE *f = fdopen(fds[p][0], "r");
    int idx;
    char hex[65];
    while (f && fscanf(f, "%d %64s", &idx, hex) == 2)
      if (idx >= 0 && idx < 20) memcpy(hashes[p][idx], hex, 65);
    if (f) fclose(f);
    int status;
    waitpid(pids[p], &status, 0);
    exits_ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  is_int(exits_ok, 8, "8 racing processes finish without errors");
  int same = 0;
  for (int i = 0; i < nk; i++) {
    int s = 1;
    for (int p = 1; p < 8; p++) s &= strcmp(hashes[p][i], hashes[0][i]) == 0;
    same += s;
  }
  is_int(same, nk, "every process got identical bytes for each of the %d kernels", nk);
  is_int(count_files(".bck"), nk, "one entry per kernel");
  is_int(count_files(".tmp"), 0, "no temporary files left");
  int verified = 0;
  for (int i = 0; i < nk; i++) {
    bc_ctx *c;
    bc_ctx_create(&c, NULL, 0);
    void *bin;
    size_t n;
    bc_kernel_compile(c, l.v[i], "sm_90", &bin, &n);
    bc_get_stats(c, &st);
    char hex[65];
    bci_sha256_hex(bin, n, hex);
    verified += st.cache_hits == 1 && st.cache_bad == 0 && strcmp(hex, hashes[0][i]) == 0;
    free(bin);
    bc_ctx_destroy(c);
  }
  is_int(verified, nk, "every entry verifies (no torn file) and holds those bytes");

  /* ---- threads of one process: one compile ---- */
  snprintf(cmd, sizeof cmd, "rm -rf %s/*", cache);
  if (system(cmd) != 0) diag("could not empty the cache");
  bc_ctx *tc;
  bc_ctx_create(&tc, NULL, 0);
  pthread_t th[8];
  for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, thread_compile, tc);
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  bc_get_stats(tc, &st);
  ok(st.nvrtc_compiles == 1 && st.cache_hits == 7, "8 threads racing for one kernel: 1 NVRTC compile, 7 cache hits (%llu, %llu)",
     (unsigned long long)st.nvrtc_compiles, (unsigned long long)st.cache_hits);
  bc_ctx_destroy(tc);

  /* ---- size cap: least recently used first ---- */
  size_t files;
  uint64_t bytes;
  bci_cache_scan(cache, &files, &bytes, 0);
  ok(files == 1 && bytes > 1000, "one entry of %llu bytes", (unsigned long long)bytes);
  for (int i = 0; i < 4; i++) { /* four more entries, then age them: i = 0 oldest */
    void *bin;
    size_t n;
    compile(ctx, l.v[i], &bin, &n);
    free(bin);
  }
  char newest[512], oldest[512];
  entry_of(ctx, l.v[3], newest, sizeof newest);
  entry_of(ctx, l.v[0], oldest, sizeof oldest);
  struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };
  utimensat(AT_FDCWD, oldest, ts, 0);
  bci_cache_scan(cache, &files, &bytes, 0);
  uint64_t cap = bytes - 1; /* one byte too many: the oldest goes */
  size_t removed = bci_cache_scan(cache, &files, &bytes, cap);
  ok(removed >= 1 && bytes <= cap, "over the cap: %zu removed, %llu bytes left", removed, (unsigned long long)bytes);
  ok(stat(oldest, &sb) != 0 && stat(newest, &sb) == 0, "the least recently used entry went, the newest stayed");

  /* ---- the cap's variable: a whole number of MiB, else the default (and the CLI says so) ---- */
  {
    static const struct { const char *v; uint64_t mib; int bad; } caps[] = {
      { "64", 64, 0 }, { "1", 1, 0 }, { "2G", 1024, 1 }, { "abc", 1024, 1 }, { "0", 1024, 1 }, { "-1", 1024, 1 },
      { "1.5", 1024, 1 }, { "17592186044416", 1024, 1 }, { "", 1024, 0 },
    };
    int good = 0;
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
      setenv("BLOCKCAST_CACHE_MAX_MB", caps[i].v, 1);
      int bad = -1;
      uint64_t c = bci_cache_cap(&bad);
      if (c == caps[i].mib << 20 && bad == caps[i].bad) good++;
      else diag("BLOCKCAST_CACHE_MAX_MB='%s': %llu MiB, bad %d", caps[i].v, (unsigned long long)(c >> 20), bad);
    }
    unsetenv("BLOCKCAST_CACHE_MAX_MB");
    is_int(good, (int)(sizeof caps / sizeof caps[0]), "BLOCKCAST_CACHE_MAX_MB: whole MiB from 1 to 2^40 taken, the rest named bad");
  }
  /* ---- the cache's own names: entries in their key's folder, writers' temporary files ---- */
  {
    char key[65], path[1300], name[200];
    memset(key, 'a', 64);
    key[64] = 0;
    snprintf(name, sizeof name, "%s.bck", key);
    snprintf(path, sizeof path, "%s/aa/%s", cache, name);
    ok(bci_cache_entry_name(path, name), "an entry: <dir>/aa/<key>.bck");
    snprintf(path, sizeof path, "%s/zz/%s", cache, name);
    ok(!bci_cache_entry_name(path, name), "not an entry: the key in another folder");
    ok(!bci_cache_entry_name("x/aa/notes.bck", "notes.bck"), "not an entry: not a key");
    snprintf(name, sizeof name, "%s.bck.1234.140737.7.tmp", key);
    ok(bci_cache_tmp_name(name), "a writer's temporary file");
    ok(!bci_cache_tmp_name("user.tmp") && !bci_cache_tmp_name("x.bck.1.2.3.tmp"), "not a writer's: other .tmp files");
    /* a FIFO where an entry would be: a miss, at once (the open does not wait for a writer) */
    char sub[1100], fifo[1300];
    snprintf(sub, sizeof sub, "%s/%.2s", cache, key);
    mkdir(sub, 0755);
    snprintf(fifo, sizeof fifo, "%s/%s.bck", sub, key);
    ok(mkfifo(fifo, 0644) == 0, "a FIFO named like an entry");
    void *fb = NULL;
    size_t fl = 0;
    ok(bci_cache_read(NULL, key, &fb, &fl) == 0 && !bci_cache_verify_file(fifo, fifo + strlen(sub) + 1), "  is a miss, not a wait");
    unlink(fifo);
    /* a spec path that is a FIFO: refused, not waited on */
    snprintf(fifo, sizeof fifo, "%s/spec.lua", cache);
    mkfifo(fifo, 0644);
    const bc_format *ff;
    ERR_HAS(bc_format_load(ctx, fifo, &ff), BC_ERR_ARG, "is not a regular file", "a spec that is a FIFO");
    unlink(fifo);
  }

  /* ---- a tuning that makes the template invalid: BC_ERR_NVRTC with the excerpt ---- */
  char tpath[128];
  snprintf(tpath, sizeof tpath, "%s/bad-tuning.lua", cache);
  FILE *tf = fopen(tpath, "w");
  fputs("amax = { threads = 512 }\nquantize_row = { threads = 256 }\n"
        "quantize_tile = { threads = 256, tile_rows = 24, tile_cols = 64, col_vec = 8 }\ndequantize = { threads = 256 }\n"
        "quantize_block = { threads = 256 }\ndequantize_block = { threads = 256 }\n", tf);
  fclose(tf);
  setenv("BLOCKCAST_TUNING", tpath, 1);
  setenv("BLOCKCAST_DUMP_DIR", cache, 1);
  bc_ctx *bt;
  bc_ctx_create(&bt, NULL, 0);
  void *bin;
  size_t n;
  is_int(bc_kernel_compile(bt, "bc_quantize_fp8_e4m3_tensor__bf16__col", "sm_90", &bin, &n), BC_ERR_NVRTC,
         "invalid generated CUDA: BC_ERR_NVRTC");
  const char *m = bc_last_error(bt);
  is_str_has(m, "tile parameters do not divide evenly", "the compiler's message");
  is_str_has(m, "templates/quantize_tile.cu:", "the excerpt names the template file and line");
  is_str_has(m, ">   ", "the failing line is marked");
  is_str_has(m, "full source: ", "and the dump of the full source is named");
  bc_ctx_destroy(bt);
  /* a thread count that is not whole warps: refused by the generator, naming the field */
  tf = fopen(tpath, "w");
  fputs("amax = { threads = 512 }\nquantize_row = { threads = 256 }\n"
        "quantize_tile = { threads = 256, tile_rows = 128, tile_cols = 64, col_vec = 16 }\ndequantize = { threads = 256 }\n"
        "quantize_block = { threads = 48 }\ndequantize_block = { threads = 256 }\n", tf);
  fclose(tf);
  bc_ctx_create(&bt, NULL, 0);
  ok(bc_kernel_compile(bt, "bc_quantize_mxfp8_e4m3__bf16__row", "sm_90", &bin, &n) != BC_OK, "threads = 48: refused");
  is_str_has(bc_last_error(bt), "quantize_block.threads = 48; expected a multiple of 32", "the message names the field and the rule");
  bc_ctx_destroy(bt);
  unsetenv("BLOCKCAST_TUNING");

  /* ---- specs from BLOCKCAST_SPEC_PATH ---- */
  char sdir[128], spath[256];
  snprintf(sdir, sizeof sdir, "%s/specs", cache);
  mkdir(sdir, 0755);
  snprintf(spath, sizeof spath, "%s/fp8_e4m3_mine.lua", sdir);
  FILE *sf = fopen(spath, "w");
  fputs("name = \"fp8_e4m3_mine\"\ndescription = \"mine\"\nelement = \"e4m3\"\nblock = \"tensor\"\n"
        "scale = { type = \"fp32\", rule = \"amax\" }\nrowwise = { layout = \"rowmajor\" }\n", sf);
  fclose(sf);
  setenv("BLOCKCAST_SPEC_PATH", sdir, 1);
  bc_ctx *sp;
  ok(bc_ctx_create(&sp, err, sizeof err) == BC_OK, "a context with BLOCKCAST_SPEC_PATH=<dir>");
  const bc_format *mine = NULL;
  ok(sp && bc_format_get(sp, "fp8_e4m3_mine", &mine) == BC_OK, "the directory's spec is a format");
  ok(sp && bc_kernel_compile(sp, "bc_quantize_fp8_e4m3_mine__bf16__row", "sm_90", &bin, &n) == BC_OK,
     "and its kernels compile (no rebuild)");
  if (sp && n) free(bin);
  ok(sp && bc_kernel_compile(sp, "bc_quantize_fp8_e4m3_mine__bf16__col", "sm_90", &bin, &n) == BC_ERR_ARG,
     "a direction the spec lacks has no kernel");
  bc_ctx_destroy(sp);
  sf = fopen(spath, "w");
  fputs("name = \"fp8_e4m3_mine\"\nbogus = 1\n", sf);
  fclose(sf);
  bc_ctx *bad = NULL;
  is_int(bc_ctx_create(&bad, err, sizeof err), BC_ERR_SPEC, "a bad spec on BLOCKCAST_SPEC_PATH fails the context");
  is_str_has(err, "BLOCKCAST_SPEC_PATH entry", "naming the variable");
  is_str_has(err, "fp8_e4m3_mine.lua:2: unknown field 'bogus'", "and the spec's error");
  ok(bad == NULL, "and returns no context");
  unsetenv("BLOCKCAST_SPEC_PATH");
  is_int(bc_spec_path_add(ctx, "/nonexistent/dir"), BC_ERR_ARG, "bc_spec_path_add: a missing path");

  /* ---- a device newer than NVRTC: PTX for the newest arch NVRTC knows ---- */
  char target[24];
  is_int(bci_jit_target(ctx, "sm_990", target), BC_OK, "target for sm_990");
  ok(strncmp(target, "compute_", 8) == 0, "is PTX: %s", target);
  is_int(bci_jit_target(ctx, "sm_90", target), BC_OK, "target for sm_90");
  ok(strcmp(target, "sm_90") == 0, "is a cubin for sm_90 itself");
  ok(bc_kernel_compile(ctx, K, "compute_90", &bin, &n) == BC_OK && n > 100 && strstr((char *)bin, ".target sm_90"),
     "compute_90 gives PTX text");
  if (n) free(bin);

  names_free(&l);
  bc_ctx_destroy(ctx2);
  bc_ctx_destroy(ctx);
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
  if (system(cmd) != 0) diag("could not remove %s", cache);
  return done_testing();
}
