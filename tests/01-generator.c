/* 01-generator: generation is deterministic (two contexts give byte-identical sources for every
 * kernel and arch), headers name the spec, its hash and the generator version, there is no
 * timestamp, tuning families reach their kernels, a per-kernel tuning entry (what `blockcast
 * tune` writes) changes its kernel and no other, the tune section is rewritten as it should be,
 * and one kernel matches its golden file (BC_UPDATE_GOLDEN=1 rewrites it). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "jit/bc_jit.h"
#include "names.h"
#include "tap.h"

/* the #define lines and the code of a generated source (past its header comment) */
static const char *body_of(const char *src) {
  const char *p = strstr(src, "#define BC_ARCH");
  return p ? p : src;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strdup(buf);
}

static int write_text(const char *path, const char *a, const char *b) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fputs(a, f);
  fputs(b, f);
  return fclose(f) == 0;
}

/* kernel `name`'s source for sm_90 in a fresh context under tuning file `path` (NULL: none) */
static char *source_under(const char *path, const char *name, bc_status *st, char *err, size_t errn) {
  if (path) setenv("BLOCKCAST_TUNING", path, 1);
  else unsetenv("BLOCKCAST_TUNING");
  bc_ctx *c;
  char *src = NULL;
  size_t n;
  *st = bc_ctx_create(&c, err, errn);
  if (*st != BC_OK) return NULL;
  *st = bc_kernel_source(c, name, "sm_90", &src, &n);
  if (*st != BC_OK) snprintf(err, errn, "%s", bc_last_error(c));
  bc_ctx_destroy(c);
  unsetenv("BLOCKCAST_TUNING");
  return src;
}

/* the hand-set part of a tuning file's text (its tune section cut off), in place */
static void cut_tune_section(char *text) {
  char *m = strstr(text, "\n-- blockcast tune:");
  if (m) m[1] = 0;
}

static void tuning_entries(void) {
  char *file = slurp("gen/tuning/sm_90.lua"), err[1024], path[] = "/tmp/bc-01-tuning-XXXXXX", hand[] = "/tmp/bc-01-hand-XXXXXX";
  int fd = mkstemp(path), fd2 = mkstemp(hand);
  ok(file != NULL && fd >= 0 && fd2 >= 0, "gen/tuning/sm_90.lua read (run from the source tree)");
  if (!file || fd < 0 || fd2 < 0) return;
  close(fd);
  close(fd2);
  bc_status st;
  /* every entry of the file's tune section reaches its kernel */
  int entries = 0, reached = 0;
  for (const char *p = strstr(file, "\nkernels = {"); p && (p = strstr(p + 1, "\n  bc_")) != NULL;) {
    char name[128], want[160];
    int threads;
    if (sscanf(p + 3, "%127[a-z0-9_] = { threads = %d", name, &threads) != 2) continue;
    entries++;
    char *src = source_under(NULL, name, &st, err, sizeof err);
    snprintf(want, sizeof want, "(kernels.%s).", name);
    char tw[64];
    snprintf(tw, sizeof tw, "#define BC_THREADS                   %d\n", threads);
    reached += src && strstr(src, want) && strstr(src, tw);
    if (!(src && strstr(src, want))) diag("%s: not from its entry", name);
    free(src);
  }
  ok(entries > 0 && reached == entries, "every one of the %d entries of the file's tune section (written by blockcast tune) "
     "reaches its kernel (%d do)", entries, reached);
  char *base = strdup(file);
  cut_tune_section(base);
  write_text(hand, base, "");
  /* the file as it is, with its tune section (if any) replaced by one entry: what a tune
     candidate runs under */
  bc_ctx *c;
  bc_ctx_create(&c, err, sizeof err);
  char *cand = NULL;
  const char *args[] = { base, "bc_quantize_mxfp4__bf16__row", "threads = 256, tile_rows = 32, tile_cols = 128, min_blocks = 3" };
  pthread_mutex_lock(&c->lock);
  bc_status s = bci_lua_call_str(c, "tune_candidate_text", 3, args, &cand);
  pthread_mutex_unlock(&c->lock);
  is_int(s, BC_OK, "tune_candidate_text");
  if (s == BC_OK && write_text(path, cand, "")) {
    const char *names[] = { "bc_quantize_mxfp4__bf16__row", "bc_quantize_mxfp4__bf16__row__list", "bc_quantize_mxfp4__bf16__col",
                            "bc_dequantize_mxfp4__bf16__row" };
    for (int i = 0; i < 4; i++) {
      char *plain = source_under(hand, names[i], &st, err, sizeof err), *tuned = source_under(path, names[i], &st, err, sizeof err);
      if (!plain || !tuned) {
        ok(0, "%s generates under the entry: %s", names[i], err);
      } else if (i < 2) {
        ok(strstr(tuned, "#define BC_MIN_BLOCKS                3\n") && strstr(tuned, "#define BC_TILE_ROWS                 32\n") &&
           strstr(tuned, "(kernels.bc_quantize_mxfp4__bf16__row)") && strcmp(body_of(plain), body_of(tuned)) != 0,
           "%s: the entry kernels.bc_quantize_mxfp4__bf16__row sets its tile and min_blocks", names[i]);
      } else {
        ok(strcmp(body_of(plain), body_of(tuned)) == 0, "%s: unchanged by another kernel's entry", names[i]);
      }
      free(plain);
      free(tuned);
    }
  }
  free(cand);
  /* bad entries: the file and line, what was expected */
  const struct { const char *text, *want; } bad[] = {
    { "kernels = {\n  bc_quantize_mxfp4__bf16__row = { threads = 256, tiles = 2 },\n}\n", "unknown field 'kernels.bc_quantize_mxfp4__bf16__row.tiles'" },
    { "kernels = {\n  bc_quantize_mxfp4__bf16__row = { min_blocks = 2 },\n}\n", "missing field 'kernels.bc_quantize_mxfp4__bf16__row.threads'" },
    { "kernels = {\n  bc_quantize_mxfp4__bf16__row__list = { threads = 256 },\n}\n", "a list variant takes its kernel's entry" },
    { "kernels = {\n  [\"not a kernel\"] = { threads = 256 },\n}\n", "expected a kernel name (see `blockcast list`)" },
    { "kernels = {\n  bc_quantize_mxfp4__bf16__row = { threads = 100 },\n}\n", "threads = 100; expected a multiple of 32" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_text(path, base, bad[i].text);
    char *src = source_under(path, "bc_quantize_mxfp4__bf16__row", &st, err, sizeof err);
    ok(src == NULL && st == BC_ERR_ARG && strstr(err, path) && strstr(err, bad[i].want), "bad entry %zu refused: %s", i, bad[i].want);
    if (!strstr(err, bad[i].want)) diag("got: %s", err);
    free(src);
  }
  /* the tune section: written after the hand-set part, kept entries merged with new ones, one
     line per run; the result loads */
  const char *e1 = "  bc_quantize_mxfp4__bf16__row = { threads = 256, tile_rows = 32, tile_cols = 128, min_blocks = 3, "
                   "measured = { us = 10.0, incumbent_us = 11.0, copy_pct = 90.0, shape = \"16384x16384 bf16\", candidates = 16 } },\n";
  const char *e2 = "  bc_quantize_mxfp4__bf16__col = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 5, "
                   "measured = { us = 12.0, incumbent_us = 12.0, copy_pct = 80.0, shape = \"16384x16384 bf16\", candidates = 16 } },\n";
  const char *r1args[] = { "gen/tuning/sm_90.lua", base, e1, "2026-01-01, GPU A, `blockcast tune --x`" };
  char *r1 = NULL, *r2 = NULL;
  pthread_mutex_lock(&c->lock);
  s = bci_lua_call_str(c, "tune_render", 4, r1args, &r1);
  const char *r2args[] = { "gen/tuning/sm_90.lua", r1 ? r1 : "", e2, "2026-01-02, GPU B, `blockcast tune --y`" };
  if (s == BC_OK) s = bci_lua_call_str(c, "tune_render", 4, r2args, &r2);
  pthread_mutex_unlock(&c->lock);
  is_int(s, BC_OK, "tune_render twice: %s", s == BC_OK ? "" : bc_last_error(c));
  if (r2) {
    const char *mark = strstr(r2, "\n-- blockcast tune:");
    size_t pre = mark ? (size_t)(mark - r2) : 0;
    const char *bmark = strstr(base, "\n-- blockcast tune:");
    size_t bpre = bmark ? (size_t)(bmark - base) : strlen(base);
    while (bpre > 0 && base[bpre - 1] == '\n') bpre--; /* trailing blank lines are not kept */
    ok(mark && pre >= bpre && strncmp(r2, base, bpre) == 0, "the hand-set part is kept as it was");
    ok(strstr(r2, "-- run 1: 2026-01-01, GPU A, `blockcast tune --x`\n-- run 2: 2026-01-02, GPU B, `blockcast tune --y`\n") != NULL,
       "one line per run, numbered");
    ok(strstr(r2, "bc_quantize_mxfp4__bf16__col = { threads = 256, tile_rows = 64, tile_cols = 128, min_blocks = 5,\n"
                  "    measured = { us = 12.0, incumbent_us = 12.0, copy_pct = 80.0, shape = \"16384x16384 bf16\", candidates = 16, run = 2 } },") &&
       strstr(r2, "bc_quantize_mxfp4__bf16__row = { threads = 256, tile_rows = 32, tile_cols = 128, min_blocks = 3,\n"
                  "    measured = { us = 10.0, incumbent_us = 11.0, copy_pct = 90.0, shape = \"16384x16384 bf16\", candidates = 16, run = 1 } },"),
       "entries of both runs, each with its figures and run");
    write_text(path, r2, "");
    char *src = source_under(path, "bc_quantize_mxfp4__bf16__row", &st, err, sizeof err);
    ok(src && strstr(src, "#define BC_TILE_ROWS                 32\n"), "the rewritten file loads and reaches the kernel");
    free(src);
    /* a hand comment above an entry stays above it through a later run; above an entry that run
       measured again, with a line saying so */
    const char *at_row = strstr(r2, "  bc_quantize_mxfp4__bf16__row = "), *at_col = strstr(r2, "  bc_quantize_mxfp4__bf16__col = ");
    const char *c_row = "  -- kept by hand: see NOTES\n", *c_col = "-- col: a note\n";
    char *r3in = at_row && at_col ? malloc(strlen(r2) + strlen(c_row) + strlen(c_col) + 1) : NULL, *r3 = NULL;
    if (r3in) {
      const char *first = at_col < at_row ? at_col : at_row, *second = at_col < at_row ? at_row : at_col;
      const char *c1 = first == at_row ? c_row : c_col, *c2 = first == at_row ? c_col : c_row;
      sprintf(r3in, "%.*s%s%.*s%s%s", (int)(first - r2), r2, c1, (int)(second - first), first, c2, second);
      const char *r3args[] = { "gen/tuning/sm_90.lua", r3in, e2, "2026-01-03, GPU C, `blockcast tune --z`" };
      pthread_mutex_lock(&c->lock);
      s = bci_lua_call_str(c, "tune_render", 4, r3args, &r3);
      pthread_mutex_unlock(&c->lock);
    }
    is_int(s, BC_OK, "tune_render of a file with comments in its tune section: %s", s == BC_OK ? "" : bc_last_error(c));
    ok(r3 && strstr(r3, "  -- kept by hand: see NOTES\n  bc_quantize_mxfp4__bf16__row = {"),
       "a comment above an entry the run did not measure is kept above it");
    ok(r3 && strstr(r3, "  -- col: a note\n  -- (the comment above predates run 3, which measured this entry again)\n"
                        "  bc_quantize_mxfp4__bf16__col = {"),
       "a comment above an entry the run measured again is kept, with a line saying so");
    if (r3 && !strstr(r3, "kept by hand")) diag("got:\n%s", r3);
    /* measured once more: the line saying so names the latest run, not one line per run; a
       comment after the last entry stays at the table's end */
    const char *end = r3 ? strrchr(r3, '}') : NULL, *tail = "  -- trailing note\n";
    char *r4in = end ? malloc(strlen(r3) + strlen(tail) + 1) : NULL, *r4 = NULL;
    if (r4in) {
      sprintf(r4in, "%.*s%s%s", (int)(end - r3), r3, tail, end);
      const char *r4args[] = { "gen/tuning/sm_90.lua", r4in, e2, "2026-01-04, GPU D, `blockcast tune --w`" };
      pthread_mutex_lock(&c->lock);
      s = bci_lua_call_str(c, "tune_render", 4, r4args, &r4);
      pthread_mutex_unlock(&c->lock);
    }
    ok(r4 && strstr(r4, "  -- col: a note\n  -- (the comment above predates run 4, which measured this entry again)\n"
                        "  bc_quantize_mxfp4__bf16__col = {") && !strstr(r4, "predates run 3"),
       "measured again: one line naming the latest run");
    ok(r4 && strstr(r4, "  -- trailing note\n}"), "a comment after the last entry stays at the table's end");
    if (r4 && !strstr(r4, "trailing note\n}")) diag("got:\n%s", r4);
    free(r4in);
    free(r4);
    free(r3in);
    free(r3);
  }
  free(r1);
  free(r2);
  /* files the tuner refuses to rewrite: the reason and where to put things */
  const struct { const char *a, *b, *want; } refuse[] = {
    { "kernels = { bc_amax__bf16 = { threads = 512 } }\n", "", "`kernels = { ... }` stands in the hand-set part of the file" },
    { "", "-- blockcast tune: x\namax2 = 1\nkernels = {}\n", "unknown field 'amax2'" },
    { "", "-- blockcast tune: x\nkernels = {}\nquantize_block_2d = { threads = 256 }\n",
      "holds only `kernels = { ... }` (blockcast tune rewrites it); found 'quantize_block_2d': move it above that line" },
    { "", "-- blockcast tune: x\nkernels = { bc_quantize_nope__bf16__row = { threads = 256 } }\n",
      "kernels.bc_quantize_nope__bf16__row: no such kernel" },
  };
  char *deflt = slurp("gen/tuning/default.lua"); /* without the optional families */
  for (size_t i = 0; i < sizeof refuse / sizeof *refuse && deflt; i++) {
    const char *b = i == 2 ? deflt : base;
    size_t ln = strlen(b) + strlen(refuse[i].a) + strlen(refuse[i].b) + 1;
    char *text = malloc(ln), *r = NULL;
    snprintf(text, ln, "%s%s%s", refuse[i].a, b, refuse[i].b);
    const char *cargs[] = { "t.lua", text };
    pthread_mutex_lock(&c->lock);
    s = bci_lua_call_str(c, "tune_check", 2, cargs, &r);
    pthread_mutex_unlock(&c->lock);
    ok(s != BC_OK && strstr(bc_last_error(c), refuse[i].want), "tune_check refuses: %s", refuse[i].want);
    if (s == BC_OK || !strstr(bc_last_error(c), refuse[i].want)) diag("got: %s", s == BC_OK ? "accepted" : bc_last_error(c));
    free(r);
    free(text);
  }
  free(deflt);
  {
    const char *cargs[] = { "gen/tuning/sm_90.lua", file };
    char *r = NULL;
    pthread_mutex_lock(&c->lock);
    s = bci_lua_call_str(c, "tune_check", 2, cargs, &r);
    pthread_mutex_unlock(&c->lock);
    is_int(s, BC_OK, "gen/tuning/sm_90.lua is a file the tuner can rewrite %s", s == BC_OK ? "" : bc_last_error(c));
    free(r);
  }
  bc_ctx_destroy(c);
  unlink(path);
  unlink(hand);
  free(base);
  free(file);
}

static const char *ARCHS[] = { "sm_90", "sm_100a" };
#define GOLDEN_KERNEL "bc_quantize_fp8_e4m3_tensor__bf16__rowcol"
#define GOLDEN_PATH "tests/golden/" GOLDEN_KERNEL ".sm_90.cu"

int main(void) {
  bc_ctx *a, *b;
  char err[1024];
  if (bc_ctx_create(&a, err, sizeof err) != BC_OK || bc_ctx_create(&b, err, sizeof err) != BC_OK) {
    printf("Bail out! %s\n", err);
    return 1;
  }
  for (int ai = 0; ai < 2; ai++) {
    names l = { 0 };
    is_int(bc_kernel_names(a, ARCHS[ai], NULL, names_add, &l), BC_OK, "kernel names for %s", ARCHS[ai]);
    ok(l.n >= 30 && !l.lost, "%d kernels for %s", l.n, ARCHS[ai]);
    int same = 0, headers = 0, stamps = 0;
    for (int i = 0; i < l.n; i++) {
      char *s1, *s2;
      size_t n1, n2;
      if (bc_kernel_source(a, l.v[i], ARCHS[ai], &s1, &n1) != BC_OK || bc_kernel_source(b, l.v[i], ARCHS[ai], &s2, &n2) != BC_OK) {
        diag("%s: %s", l.v[i], bc_last_error(a));
        continue;
      }
      same += n1 == n2 && memcmp(s1, s2, n1) == 0;
      headers += strncmp(s1, "// Generated by blockcast gen 0.1.0 from ", 41) == 0 && strstr(s1, "-- do not edit.") != NULL;
      stamps += strstr(s1, "2026") != NULL || strstr(s1, "__DATE__") != NULL || strstr(s1, "__TIME__") != NULL;
      if (strstr(l.v[i], "fp8_e4m3_tensor"))
        headers -= !(strstr(s1, "specs/fp8_e4m3_tensor.lua (sha256 ") && strstr(s1, "#line 1 \"templates/"));
      free(s1);
      free(s2);
    }
    is_int(same, l.n, "%s: two generations byte-identical for every kernel", ARCHS[ai]);
    is_int(headers, l.n, "%s: every source has the generated-by header (spec, hash, version)", ARCHS[ai]);
    is_int(stamps, 0, "%s: no timestamps", ARCHS[ai]);
    names_free(&l);
  }

  /* tuning families reach the kernels (the hand-set part of gen/tuning/sm_90.lua): one-direction
     4-bit quantize from 16-bit inputs has its own min_blocks; fp32 inputs, both directions, 8-bit
     formats and archs without the entries keep quantize_block's */
  const struct { const char *kernel, *arch; int min_blocks; } tb[] = {
    { "bc_quantize_mxfp4__bf16__row", "sm_90", 6 },     { "bc_quantize_nvfp4__fp16__row__list", "sm_90", 6 },
    { "bc_quantize_nvfp4_2d__bf16__col", "sm_90", 5 },  { "bc_quantize_mxfp4__bf16__rowcol", "sm_90", 4 },
    { "bc_quantize_mxfp4__fp32__row", "sm_90", 4 },     { "bc_quantize_mxfp8_e4m3__bf16__row", "sm_90", 4 },
    { "bc_quantize_mxfp4__bf16__row", "sm_100a", 4 },   { "bc_quantize_fp8_block_128x128__bf16__row", "sm_90", 3 },
  };
  char *hand_text = slurp("gen/tuning/sm_90.lua"), hand[] = "/tmp/bc-01-fam-XXXXXX";
  int hfd = mkstemp(hand);
  if (hand_text && hfd >= 0) {
    close(hfd);
    cut_tune_section(hand_text);
    write_text(hand, hand_text, "");
  }
  free(hand_text);
  for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) {
    char *s, want[96];
    size_t sn;
    snprintf(want, sizeof want, "#define BC_MIN_BLOCKS                %d\n", tb[i].min_blocks);
    /* sm_90: under the file's hand-set part (its tune section's entries would override) */
    bc_ctx *c = a;
    char e2[256];
    if (strcmp(tb[i].arch, "sm_90") == 0) {
      setenv("BLOCKCAST_TUNING", hand, 1);
      bc_ctx_create(&c, e2, sizeof e2);
    }
    int got = bc_kernel_source(c, tb[i].kernel, tb[i].arch, &s, &sn) == BC_OK;
    if (c != a) bc_ctx_destroy(c);
    unsetenv("BLOCKCAST_TUNING");
    ok(got && strstr(s, want) != NULL, "%s on %s: min_blocks %d from its tuning family", tb[i].kernel, tb[i].arch,
       tb[i].min_blocks);
    if (got) free(s);
  }
  unlink(hand);

  tuning_entries();

  /* the rowwise run of quantize_block and whether it is always staged: 6-bit runs are 24 bytes,
     not whole 16-byte pieces (BC_ROW_STAGED; the host reads the launch's row_staged) */
  const struct { const char *kernel; int run, staged; } rs[] = {
    { "bc_quantize_mxfp6_e3m2__bf16__row", 32, 1 },    { "bc_quantize_mxfp6_e2m3__fp32__rowcol__list", 32, 1 },
    { "bc_quantize_mxfp6_e3m2__bf16__col", 32, 0 },    { "bc_quantize_mxfp4__bf16__row", 32, 0 },
    { "bc_quantize_mxfp8_e4m3__fp32__rowcol", 16, 0 }, { "bc_quantize_nvfp4__fp32__row", 32, 0 },
  };
  for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) {
    char *s, w1[96], w2[96];
    size_t sn;
    snprintf(w1, sizeof w1, "#define BC_RUN_R                     %d\n", rs[i].run);
    snprintf(w2, sizeof w2, "#define BC_ROW_STAGED                %d\n", rs[i].staged);
    int got = bc_kernel_source(a, rs[i].kernel, "sm_90", &s, &sn) == BC_OK;
    ok(got && strstr(s, w1) && strstr(s, w2), "%s: BC_RUN_R %d, BC_ROW_STAGED %d", rs[i].kernel, rs[i].run, rs[i].staged);
    if (got) free(s);
  }

  char *src;
  size_t n;
  is_int(bc_kernel_source(a, GOLDEN_KERNEL, "sm_90", &src, &n), BC_OK, "golden kernel generates");
  if (getenv("BC_UPDATE_GOLDEN")) {
    FILE *f = fopen(GOLDEN_PATH, "wb");
    fwrite(src, 1, n, f);
    fclose(f);
    diag("rewrote %s", GOLDEN_PATH);
  }
  FILE *f = fopen(GOLDEN_PATH, "rb");
  ok(f != NULL, "golden file %s exists", GOLDEN_PATH);
  if (f) {
    static char gold[1 << 20];
    size_t gn = fread(gold, 1, sizeof gold, f);
    fclose(f);
    int same = gn == n && memcmp(gold, src, n) == 0;
    ok(same, "generated source equals the golden file (after a deliberate template change: BC_UPDATE_GOLDEN=1)");
    if (!same) {
      size_t i = 0;
      while (i < gn && i < n && gold[i] == src[i]) i++;
      int line = 1;
      for (size_t k = 0; k < i; k++) line += src[k] == '\n';
      diag("first difference at byte %zu (line %d)", i, line);
    }
  }
  free(src);

  /* list variants: the block quantize modules carry the parameter entry X__list_p (templates/list.cu,
   * BC_LIST_PARAMS; runtime/jit/bc_kernel.c looks it up), the others only the table entry */
  {
    static const struct { const char *k; int has_p; } lv[] = {
      { "bc_quantize_mxfp8_e4m3__bf16__row__list", 1 }, { "bc_quantize_nvfp4__fp32__rowcol__list", 1 },
      { "bc_quantize_fp8_block_128x128__bf16__col__list", 1 }, { "bc_amax__bf16__list", 0 },
      { "bc_dequantize_mxfp8_e4m3__bf16__row__list", 0 }, { "bc_quantize_thin_mxfp8_e4m3__bf16__row__list", 0 },
    };
    for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++) {
      char entry[192], table[192];
      snprintf(table, sizeof table, "\n%s(const bc_list_item", lv[i].k);
      if (bc_kernel_source(a, lv[i].k, "sm_90", &src, &n) != BC_OK) {
        ok(0, "%s generates: %s", lv[i].k, bc_last_error(a));
        continue;
      }
      /* the entry's text is in every list module, compiled where BC_LIST_PARAMS is 1 */
      snprintf(entry, sizeof entry, "\n#define BC_LIST_PARAMS %d\n", lv[i].has_p);
      ok(strstr(src, table) != NULL, "%s: its table entry", lv[i].k);
      ok(strstr(src, entry) != NULL && strstr(src, "\n#if BC_LIST_PARAMS\n") != NULL,
         "%s: %s parameter entry", lv[i].k, lv[i].has_p ? "a" : "no");
      free(src);
    }
  }

  /* swizzled scale windows with an in-atom origin (common.cuh: BC_SL_WINDOW) are read by the block
   * quantize kernels' list variants only, where the sharded cast's regions arrive; the others keep
   * the plain swizzle (its two extra additions spilled MXFP8's columnwise dequantize) */
  {
    static const struct { const char *k; int win; } wv[] = {
      { "bc_quantize_mxfp8_e4m3__bf16__row__list", 1 },     { "bc_quantize_nvfp4__fp32__rowcol__list", 1 },
      { "bc_quantize_thin_mxfp8_e4m3__bf16__row__list", 1 }, { "bc_quantize_mxfp8_e4m3__bf16__row", 0 },
      { "bc_quantize_thin_nvfp4__bf16__col", 0 },            { "bc_dequantize_mxfp8_e4m3__bf16__col__list", 0 },
      { "bc_dequantize_mxfp8_e4m3__bf16__col", 0 },          { "bc_quantize_fp8_e4m3_tensor__bf16__row__list", 0 },
    };
    for (size_t i = 0; i < sizeof wv / sizeof wv[0]; i++) {
      if (bc_kernel_source(a, wv[i].k, "sm_90", &src, &n) != BC_OK) {
        ok(0, "%s generates: %s", wv[i].k, bc_last_error(a));
        continue;
      }
      const char *d = strstr(src, "\n#define BC_SL_WINDOW ");
      int v = -1;
      if (d) sscanf(d + strlen("\n#define BC_SL_WINDOW "), " %d", &v);
      ok(v == wv[i].win, "%s: BC_SL_WINDOW %d (scale windows %s)", wv[i].k, v, wv[i].win ? "read" : "not read");
      free(src);
    }
  }

  is_int(bc_kernel_source(a, "bc_nope", "sm_90", &src, &n), BC_ERR_ARG, "unknown kernel");
  is_str_has(bc_last_error(a), "unknown kernel 'bc_nope'", "unknown kernel: named");
  is_int(bc_kernel_source(a, GOLDEN_KERNEL, "sm90", &src, &n), BC_ERR_ARG, "bad arch");
  is_str_has(bc_last_error(a), "expected sm_XX or sm_XXa", "bad arch: what is expected");
  is_int(bc_kernel_source(a, GOLDEN_KERNEL, "sm_75", &src, &n), BC_ERR_ARG, "arch below the floor");
  is_str_has(bc_last_error(a), "sm_80 and newer", "arch below the floor: what is expected");
  is_int(bc_kernel_source(a, GOLDEN_KERNEL, "sm_12", &src, &n), BC_ERR_ARG, "arch sm_12");
  is_str_has(bc_last_error(a), "arch 'sm_12': blockcast generates kernels for sm_80 and newer", "arch sm_12: named");
  bc_ctx_destroy(a);
  bc_ctx_destroy(b);
  return done_testing();
}
