/* cli.c: the blockcast command-line tool.
 *   blockcast list [--arch sm_XX]
 *   blockcast gen --out DIR [--spec FILE] [--arch sm_XX]...
 *   blockcast aot --out FILE --objdir DIR --arch sm_XX... [-j N]   (used by build.sh)
 *   blockcast comm-id
 *   blockcast tune [options]   (tune.c)
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"
#include "jit/bc_jit.h"
#include "tune.h"

static const char *usage =
  "usage: blockcast <command> [options]\n"
  "  list [--arch sm_XX]                          formats and their kernels\n"
  "  gen --out DIR [--spec FILE] [--arch sm_XX]   write generated .cu files to DIR/<arch>/\n"
  "  compile (--format NAME | --spec FILE | --all) [--arch sm_XX]...\n"
  "                                               fill the disk cache (no GPU needed)\n"
  "  cache ls | verify | clear                    the disk cache ($BLOCKCAST_CACHE_DIR,\n"
  "                                               $XDG_CACHE_HOME/blockcast, ~/.cache/blockcast)\n"
  "  aot --out FILE --objdir DIR --arch sm_XX [--arch ...] [-j N]\n"
  "                                               compile every kernel ahead of time (build.sh)\n"
  "  comm-id                                      print a fresh NCCL communicator id (hex), for\n"
  "                                               export BLOCKCAST_COMM_ID=$(blockcast comm-id) and\n"
  "                                               bc_comm_bootstrap(ctx, \"env:BLOCKCAST_COMM_ID\", ...)\n"
  "  tune [options]                               measure kernels' launch parameters on this GPU and\n"
  "                                               write the winners to gen/tuning/<arch>.lua (GPU;\n"
  "                                               blockcast tune --help)\n";


static int die(bc_ctx *ctx, bc_status s, const char *what) {
  fprintf(stderr, "blockcast: %s: %s: %s\n", what, bc_status_string(s), ctx ? bc_last_error(ctx) : "");
  return 1;
}

/* write only when the contents differ (atomically). 1 written, 0 unchanged, -1 error */
static int write_if_changed(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "rb");
  if (f) {
    int same = 1;
    size_t i = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
      if (i >= n || (unsigned char)c != ((const unsigned char *)data)[i]) { same = 0; break; }
      i++;
    }
    if (i != n) same = 0;
    fclose(f);
    if (same) return 0;
  }
  return bci_write_atomic(path, data, n, NULL, 0) == 0 ? 1 : -1;
}

/* ---- list ---- */

static const char *aot_archs(bc_ctx *ctx, const char *name, char *buf, size_t n) {
  buf[0] = 0;
  for (size_t i = 0; i < bci_aot_count(ctx); i++) {
    const bci_aot_entry *e = bci_aot_at(ctx, i);
    if (strcmp(e->name, name) == 0) {
      size_t l = strlen(buf);
      snprintf(buf + l, n - l, "%s%s", l ? " " : "", e->arch);
    }
  }
  return buf;
}

/* An argument a command did not take: --help (usage, exit 0), an option that needs a value
 * without one, one given too often (--arch: at most 16), or an unknown argument (exit 2). */
static int arg_error(const char *cmd, char **argv, int i, int argc) {
  static const char *valued[] = { "--arch", "--out", "--spec", "--format", "--objdir", "-j" };
  const char *a = argv[i];
  if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
    if (strcmp(a, valued[k]) == 0) {
      if (i + 1 >= argc) fprintf(stderr, "blockcast %s: option %s needs a value\n", cmd, a);
      else fprintf(stderr, "blockcast %s: %s given too often (at most 16)\n", cmd, a);
      return 2;
    }
  fprintf(stderr, "blockcast %s: unknown argument '%s'\n%s", cmd, a, usage);
  return 2;
}

static int cmd_list(bc_ctx *ctx, int argc, char **argv) {
  const char *arch = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) arch = argv[++i];
    else return arg_error("list", argv, i, argc);
  }
  bc_status s = bci_aot_index(ctx);
  if (s != BC_OK) return die(ctx, s, "list");
  for (size_t f = 0; f <= bc_format_count(ctx); f++) {
    names ns = { 0 };
    const char *fname = "";
    if (f < bc_format_count(ctx)) {
      bc_format_info info;
      bc_format_get_info(ctx, bc_format_at(ctx, f), &info);
      fname = info.name;
      printf("format %s: %s\n  element %s (%d bits, max %g), %s scaling, directions:%s%s\n  spec %s\n", info.name,
             info.description, info.element, info.element_bits, (double)info.element_max,
             info.block == BC_BLOCK_TENSOR ? "per-tensor" : "block", info.has_rowwise ? " rowwise" : "",
             info.has_columnwise ? (info.columnwise_transposed ? " columnwise(transposed)" : " columnwise") : "",
             info.spec_file);
    } else {
      printf("format-independent kernels\n");
    }
    s = bc_kernel_names(ctx, arch, fname, collect, &ns);
    if (s != BC_OK) return die(ctx, s, "list");
    for (size_t i = 0; i < ns.n; i++) {
      char buf[128];
      aot_archs(ctx, ns.v[i], buf, sizeof buf);
      printf("  %-52s aot: %s\n", ns.v[i], buf[0] ? buf : "-");
    }
    printf("  (%zu kernels)\n", ns.n);
    names_free(&ns);
  }
  return 0;
}

/* ---- gen ---- */

static int cmd_gen(bc_ctx *ctx, int argc, char **argv) {
  const char *out = NULL, *spec = NULL;
  const char *archs[16];
  int narch = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
    else if (strcmp(argv[i], "--spec") == 0 && i + 1 < argc) spec = argv[++i];
    else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc && narch < 16) archs[narch++] = argv[++i];
    else return arg_error("gen", argv, i, argc);
  }
  if (!out) { fprintf(stderr, "blockcast gen: --out DIR is required\n%s", usage); return 2; }
  if (narch == 0) { archs[0] = "sm_90"; archs[1] = "sm_100a"; narch = 2; }
  const char *only = NULL;
  if (spec) {
    const bc_format *f;
    bc_status s = bc_format_load(ctx, spec, &f);
    if (s != BC_OK) return die(ctx, s, spec);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    only = info.name;
  }
  size_t written = 0, total = 0;
  for (int a = 0; a < narch; a++) {
    names ns = { 0 };
    bc_status s = bc_kernel_names(ctx, archs[a], only, collect, &ns);
    if (s != BC_OK) return die(ctx, s, "gen");
    char dir[1024];
    if (snprintf(dir, sizeof dir, "%s/%s", out, archs[a]) >= (int)sizeof dir) {
      fprintf(stderr, "blockcast gen: --out is %zu bytes long; at most %zu fit\n", strlen(out), sizeof dir - 2 - strlen(archs[a]));
      return 2;
    }
    if (bci_mkdir_p(dir) != 0) { fprintf(stderr, "blockcast gen: cannot create %s: %s\n", dir, strerror(errno)); return 1; }
    for (size_t i = 0; i < ns.n; i++) {
      char *src;
      size_t len;
      s = bc_kernel_source(ctx, ns.v[i], archs[a], &src, &len);
      if (s != BC_OK) return die(ctx, s, ns.v[i]);
      char path[1200]; /* dir (< 1024) + '/' + a kernel name (< 128) + ".cu" */
      snprintf(path, sizeof path, "%s/%s.cu", dir, ns.v[i]);
      int w = write_if_changed(path, src, len);
      free(src);
      if (w < 0) { fprintf(stderr, "blockcast gen: cannot write %s: %s\n", path, strerror(errno)); return 1; }
      written += (size_t)w;
      total++;
    }
    names_free(&ns);
  }
  fprintf(stderr, "generated %zu kernel sources (%zu changed) in %s\n", total, written, out);
  return 0;
}

/* ---- compile / cache ---- */

static int cmd_compile(bc_ctx *ctx, int argc, char **argv) {
  const char *fmt = NULL, *spec = NULL;
  const char *archs[16];
  int narch = 0, all = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) fmt = argv[++i];
    else if (strcmp(argv[i], "--spec") == 0 && i + 1 < argc) spec = argv[++i];
    else if (strcmp(argv[i], "--all") == 0) all = 1;
    else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc && narch < 16) archs[narch++] = argv[++i];
    else return arg_error("compile", argv, i, argc);
  }
  if (!!fmt + !!spec + all != 1) { fprintf(stderr, "blockcast compile: give one of --format NAME, --spec FILE, --all\n%s", usage); return 2; }
  if (narch == 0) { archs[0] = "sm_90"; archs[1] = "sm_100a"; narch = 2; }
  const bc_format *f = NULL;
  bc_status s = BC_OK;
  if (spec) s = bc_format_load(ctx, spec, &f);
  else if (fmt) s = bc_format_get(ctx, fmt, &f);
  if (s != BC_OK) return die(ctx, s, spec ? spec : fmt);
  bc_format_info info;
  if (f) bc_format_get_info(ctx, f, &info);
  size_t total = 0;
  for (int a = 0; a < narch; a++) {
    names ns = { 0 };
    s = bc_kernel_names(ctx, archs[a], f ? info.name : NULL, collect, &ns);
    if (s != BC_OK) return die(ctx, s, "compile");
    for (size_t i = 0; i < ns.n; i++) {
      void *bin;
      size_t n;
      s = bc_kernel_compile(ctx, ns.v[i], archs[a], &bin, &n);
      if (s != BC_OK) return die(ctx, s, ns.v[i]);
      free(bin);
      total++;
    }
    names_free(&ns);
  }
  bc_stats st;
  bc_get_stats(ctx, &st);
  char dir[BCI_CACHE_DIR_MAX] = "";
  if (bci_cache_dir(ctx, dir, sizeof dir) != BC_OK) return die(ctx, BC_ERR_ARG, "compile");
  if (st.cache_writes < st.cache_misses) {
    fprintf(stderr, "blockcast compile: %llu kernels compiled but %llu written to the cache %s; is it writable, with room?\n",
            (unsigned long long)st.cache_misses, (unsigned long long)st.cache_writes, dir);
    return 1;
  }
  fprintf(stderr, "%zu kernels in the cache %s: %llu compiled, %llu already there\n", total, dir,
          (unsigned long long)st.cache_misses, (unsigned long long)st.cache_hits);
  return 0;
}

typedef struct cache_walk {
  int clear;
  size_t good, bad, removed;
} cache_walk;

/* only the cache's own files: entries <xx>/<key>.bck and writers' temporary files (anything else
 * in the directory is left alone) */
static void cache_one(const char *path, const char *name, void *user) {
  cache_walk *w = user;
  int is_entry = bci_cache_entry_name(path, name), is_tmp = bci_cache_tmp_name(name);
  if (!is_entry && !is_tmp) return;
  if (w->clear) {
    w->removed += unlink(path) == 0;
    return;
  }
  if (is_tmp) return; /* a writer's file in flight */
  /* read without refreshing its mtime (the least recently used order stays); a bad entry is
   * read once more before it goes (a writer may have just replaced it) */
  if (bci_cache_verify_file(path, name)) {
    w->good++;
  } else if (bci_cache_verify_file(path, name)) {
    w->good++;
  } else {
    w->bad++;
    printf("bad: %s (removed; it is compiled again when next used)\n", path);
    unlink(path);
  }
}

static int cmd_cache(bc_ctx *ctx, int argc, char **argv) {
  char dir[BCI_CACHE_DIR_MAX];
  bc_status s = bci_cache_dir(ctx, dir, sizeof dir);
  if (s != BC_OK) return die(ctx, s, "cache");
  if (argc != 1) { fprintf(stderr, "blockcast cache: expected one of ls, verify, clear\n%s", usage); return 2; }
  if (strcmp(argv[0], "ls") == 0) {
    size_t files = 0;
    uint64_t bytes = 0;
    bci_cache_scan(dir, &files, &bytes, 0);
    int bad = 0;
    uint64_t cap = bci_cache_cap(&bad);
    if (bad)
      fprintf(stderr, "blockcast cache: BLOCKCAST_CACHE_MAX_MB is '%s'; expected a whole number of MiB from 1 to 2^40; the cap is "
              "the default, 1024\n", getenv("BLOCKCAST_CACHE_MAX_MB"));
    printf("cache %s: %zu kernels, %.1f MiB (cap %llu MiB, $BLOCKCAST_CACHE_MAX_MB)\n", dir, files, (double)bytes / 1048576.0,
           (unsigned long long)(cap >> 20));
    return 0;
  }
  if (strcmp(argv[0], "verify") != 0 && strcmp(argv[0], "clear") != 0) {
    fprintf(stderr, "blockcast cache: unknown subcommand '%s'; expected ls, verify or clear\n", argv[0]);
    return 2;
  }
  cache_walk w = { strcmp(argv[0], "clear") == 0, 0, 0, 0 };
  bci_cache_foreach(dir, cache_one, &w);
  if (w.clear) printf("cache %s: removed %zu files\n", dir, w.removed);
  else printf("cache %s: %zu good, %zu bad\n", dir, w.good, w.bad);
  return w.bad ? 1 : 0;
}

/* ---- aot ---- */

typedef struct job {
  char *name;
  const char *arch;
  char *src;
  size_t len;
  char key[65];
  bci_launch launch;
  char spec_hash[65];
} job;

static int cmd_aot(bc_ctx *ctx, int argc, char **argv) {
  const char *out = NULL, *objdir = NULL;
  const char *archs[16];
  int narch = 0, jobs = 1;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
    else if (strcmp(argv[i], "--objdir") == 0 && i + 1 < argc) objdir = argv[++i];
    else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc && narch < 16) archs[narch++] = argv[++i];
    else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc) {
      long long j;
      if (!whole_number(argv[++i], &j) || j < 1 || j > 4096) {
        fprintf(stderr, "blockcast aot: -j %s: expected a whole number of jobs, 1 .. 4096\n", argv[i]);
        return 2;
      }
      jobs = (int)j;
    }
    else return arg_error("aot", argv, i, argc);
  }
  if (!out || !objdir || narch == 0) { fprintf(stderr, "blockcast aot: --out, --objdir and --arch are required\n%s", usage); return 2; }
  if (jobs < 1) jobs = 1;
  if (bci_mkdir_p(objdir) != 0) { fprintf(stderr, "blockcast aot: cannot create %s\n", objdir); return 1; }
  char fp[1024];
  bc_status s = bci_nvrtc_fingerprint(ctx, fp, sizeof fp);
  if (s != BC_OK) return die(ctx, s, "aot");

  /* generate every source; key = sha256(source, arch, NVRTC version) */
  job *js = NULL;
  size_t nj = 0;
  for (int a = 0; a < narch; a++) {
    names ns = { 0 };
    s = bc_kernel_names(ctx, archs[a], NULL, collect, &ns);
    if (s != BC_OK) return die(ctx, s, "aot");
    js = realloc(js, (nj + ns.n) * sizeof *js);
    if (!js) { fprintf(stderr, "blockcast: out of memory\n"); return 1; }
    for (size_t i = 0; i < ns.n; i++) {
      job *j = &js[nj++];
      memset(j, 0, sizeof *j);
      j->name = ns.v[i];
      j->arch = archs[a];
      s = bc_kernel_source(ctx, j->name, j->arch, &j->src, &j->len);
      if (s != BC_OK) return die(ctx, s, j->name);
      pthread_mutex_lock(&ctx->lock);
      s = bci_lua_launch(ctx, j->name, j->arch, &j->launch);
      if (s == BC_OK) s = bci_lua_spec_hash(ctx, j->name, j->spec_hash);
      pthread_mutex_unlock(&ctx->lock);
      if (s != BC_OK) return die(ctx, s, j->name);
      /* the same key as the disk cache: source, sorted options, compiler fingerprint */
      char archopt[64];
      const char *opts[BCI_NVRTC_NOPTS];
      int nopts = bci_nvrtc_options(j->arch, archopt, opts);
      bci_cache_key(j->src, j->len, opts, nopts, fp, j->key);
    }
    free(ns.v); /* names now owned by jobs */
  }
  fprintf(stderr, "generated %zu kernel sources for %d arch(s)\n", nj, narch);

  /* compile what objdir does not have yet, in `jobs` processes */
  size_t todo = 0;
  size_t *todo_idx = malloc((nj ? nj : 1) * sizeof *todo_idx);
  if (!todo_idx) return 1;
  for (size_t i = 0; i < nj; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s.cubin", objdir, js[i].key);
    if (access(p, R_OK) != 0) todo_idx[todo++] = i;
  }
  if (todo) {
    fflush(stderr);
    pid_t pids[64];
    int nw = jobs > 64 ? 64 : jobs;
    for (int w = 0; w < nw; w++) {
      pid_t pid = fork();
      if (pid < 0) { fprintf(stderr, "blockcast aot: fork failed\n"); return 1; }
      if (pid == 0) {
        size_t done = 0;
        for (size_t t = (size_t)w; t < todo; t += (size_t)nw) {
          size_t i = todo_idx[t];
          char p[1200];
          snprintf(p, sizeof p, "%s/%s.cubin", objdir, js[i].key);
          void *bin;
          size_t n;
          s = bci_nvrtc_compile(ctx, js[i].name, js[i].src, js[i].arch, &bin, &n);
          if (s != BC_OK) { fprintf(stderr, "blockcast aot: %s: %s\n", bc_status_string(s), bc_last_error(ctx)); _exit(1); }
          if (write_if_changed(p, bin, n) < 0) { fprintf(stderr, "blockcast aot: cannot write %s\n", p); _exit(1); }
          free(bin);
          done++;
          if (w == 0 && (done % 8 == 0)) fprintf(stderr, "compiled %zu/%zu kernels\n", done * (size_t)nw, todo);
        }
        _exit(0);
      }
      pids[w] = pid;
    }
    int bad = 0;
    for (int w = 0; w < nw; w++) {
      int st;
      waitpid(pids[w], &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
    }
    if (bad) return 1;
  }
  free(todo_idx);
  fprintf(stderr, "compiled %zu/%zu kernels (%zu reused from %s)\n", todo, nj, nj - todo, objdir);

  /* assemble the archive */
  size_t cap = 1 << 20, n = 0;
  unsigned char *buf = malloc(cap);
  if (!buf) return 1;
#define PUT(ptr, len)                                                          \
  do {                                                                         \
    size_t l_ = (len);                                                         \
    while (n + l_ > cap) { cap *= 2; buf = realloc(buf, cap); if (!buf) return 1; } \
    memcpy(buf + n, (ptr), l_);                                                \
    n += l_;                                                                   \
  } while (0)
  PUT("BCAOT006", 8);
  uint32_t cnt = (uint32_t)nj;
  PUT(&cnt, 4);
  for (size_t i = 0; i < nj; i++) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s.cubin", objdir, js[i].key);
    char *bin;
    size_t bl;
    s = bci_read_file(ctx, p, &bin, &bl);
    if (s != BC_OK) return die(ctx, s, "aot");
    uint16_t nl = (uint16_t)(strlen(js[i].name) + 1), al = (uint16_t)(strlen(js[i].arch) + 1);
    PUT(&nl, 2);
    PUT(js[i].name, nl);
    PUT(&al, 2);
    PUT(js[i].arch, al);
    PUT(js[i].spec_hash, 65);
    PUT(js[i].key, 65);
    int32_t l[11] = { js[i].launch.threads, js[i].launch.unroll,   js[i].launch.blocks_per_sm, js[i].launch.tile_rows,
                      js[i].launch.tile_cols, js[i].launch.col_vec, js[i].launch.vec,           js[i].launch.min_blocks,
                      js[i].launch.smem,      js[i].launch.row_staged, js[i].launch.row_smem };
    PUT(l, sizeof l);
    uint64_t size = bl;
    PUT(&size, 8);
    unsigned char d[32];
    bci_sha256 sh;
    bci_sha256_init(&sh);
    bci_sha256_update(&sh, bin, bl);
    bci_sha256_final(&sh, d);
    PUT(d, 32);
    PUT(bin, bl);
    free(bin);
  }
#undef PUT
  if (bci_write_atomic(out, buf, n, NULL, 0) != 0) {
    fprintf(stderr, "blockcast aot: cannot write %s: %s\n", out, strerror(errno));
    free(buf);
    return 1;
  }
  free(buf);
  fprintf(stderr, "wrote %s: %zu kernels, %zu bytes\n", out, nj, n);
  for (size_t i = 0; i < nj; i++) { free(js[i].name); free(js[i].src); }
  free(js);
  return 0;
}

/* ---- comm-id ---- */

static int cmd_comm_id(bc_ctx *ctx, int argc, char **argv) {
  if (argc != 0) { fprintf(stderr, "blockcast comm-id: unknown argument '%s'\n%s", argv[0], usage); return 2; }
  bc_comm_id id;
  bc_status s = bc_comm_id_create(ctx, &id);
  if (s != BC_OK) return die(ctx, s, "comm-id");
  char hex[2 * BC_COMM_ID_BYTES + 1];
  s = bc_comm_id_to_string(ctx, &id, hex);
  if (s != BC_OK) return die(ctx, s, "comm-id");
  printf("%s\n", hex);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  /* the commands that take no format run whatever $BLOCKCAST_SPEC_PATH holds (a bad entry there
   * must not keep `cache clear` or `comm-id` from working) */
  if (strcmp(argv[1], "cache") == 0 || strcmp(argv[1], "comm-id") == 0) unsetenv("BLOCKCAST_SPEC_PATH");
  bc_ctx *ctx;
  char err[4096];
  bc_status s = bc_ctx_create(&ctx, err, sizeof err);
  if (s != BC_OK) {
    fprintf(stderr, "blockcast: %s: %s\n", bc_status_string(s), err);
    return 1;
  }
  int rc;
  if (strcmp(argv[1], "list") == 0) rc = cmd_list(ctx, argc - 2, argv + 2);
  else if (strcmp(argv[1], "gen") == 0) rc = cmd_gen(ctx, argc - 2, argv + 2);
  else if (strcmp(argv[1], "aot") == 0) rc = cmd_aot(ctx, argc - 2, argv + 2);
  else if (strcmp(argv[1], "compile") == 0) rc = cmd_compile(ctx, argc - 2, argv + 2);
  else if (strcmp(argv[1], "cache") == 0) rc = cmd_cache(ctx, argc - 2, argv + 2);
  else if (strcmp(argv[1], "comm-id") == 0) rc = cmd_comm_id(ctx, argc - 2, argv + 2);
  else if (strcmp(argv[1], "tune") == 0) rc = bc_cli_tune(ctx, argc - 2, argv + 2);
  else {
    fprintf(stderr, "blockcast: unknown command '%s'\n%s", argv[1], usage);
    rc = 2;
  }
  bc_ctx_destroy(ctx);
  return rc;
}
