/* bench_host: the host-side pieces of a list entry that run without a GPU, each against the
 * code it replaced, timed in the same run (CPU only; the whole list call is timed by bench_list
 * on the GPU machine):
 *   name     a kernel name from its format ("bc_quantize_%s__%s__%s"): bci_kernel_name against
 *            vsnprintf (what bci_kernel_getf used), 4 names a tensor as a current-scaling
 *            quantize asks for (amax, zero, scale, cast);
 *   overlap  the output-overlap check of a list of 1,000 tensors with 6 output ranges each
 *            (a per-tensor format in both directions: 2 data, 2 scale_inv, amax, scale):
 *            bci_spans_overlap against libc qsort with the comparator it replaced plus the same
 *            scan, for ranges carved out of arenas in order (bench_list's layout: data and
 *            scales of a tensor together, amax and scale in their own arrays) and in random
 *            order (a caching allocator's);
 *   layout   the sizes of one direction: bc_qtensor_layout (public: clears the error, checks
 *            the format and shape) against bci_geom_get (what the list uses now).
 * Each is checked first (same names, same overlap verdicts, same sizes), then timed: the
 * median of 21 samples, each a loop long enough to take ~1 ms.
 *   bench_host [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockcast.h"
#include "multi/bc_multi.h"
#include "host_timing.h"
#include "testdata.h"

#define NT 1000
#define SPANS 6

static int fails;
#define CHECK(c, ...)                      \
  do {                                     \
    if (!(c)) {                            \
      fprintf(stderr, "check failed: ");   \
      fprintf(stderr, __VA_ARGS__);        \
      fprintf(stderr, "\n");               \
      fails++;                             \
    }                                      \
  } while (0)

typedef void (*work_fn)(void *u);

/* median over 21 samples of the time of one call of fn, in ns */
static double time_ns(work_fn fn, void *u, int inner) {
  double t[21];
  for (int r = 0; r < 21; r++) {
    double t0 = now_ms();
    for (int i = 0; i < inner; i++) fn(u);
    t[r] = (now_ms() - t0) * 1e6 / inner;
  }
  qsort(t, 21, sizeof(double), cmpd);
  return t[10];
}

/* ---- names ---- */

static const char *fmts[4] = { "bc_amax__%s", "bc_zero%s", "bc_scale_%s", "bc_quantize_%s__%s__%s" };
static volatile size_t sink;

static int name_new(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = bci_kernel_name(out, cap, fmt, ap);
  va_end(ap);
  return n;
}

static void names_old(void *u) {
  const char *f = u;
  char b[128];
  sink += (size_t)snprintf(b, sizeof b, fmts[0], "bf16");
  sink += (size_t)snprintf(b, sizeof b, fmts[1], "");
  sink += (size_t)snprintf(b, sizeof b, fmts[2], f);
  sink += (size_t)snprintf(b, sizeof b, fmts[3], f, "bf16", "rowcol");
}

static void names_new(void *u) {
  const char *f = u;
  char b[128];
  sink += (size_t)name_new(b, sizeof b, fmts[0], "bf16");
  sink += (size_t)name_new(b, sizeof b, fmts[1], "");
  sink += (size_t)name_new(b, sizeof b, fmts[2], f);
  sink += (size_t)name_new(b, sizeof b, fmts[3], f, "bf16", "rowcol");
}

/* ---- overlap ---- */

typedef struct spans_job {
  bci_span in[NT * SPANS], work[NT * SPANS], tmp[NT * SPANS];
  int verdict;
} spans_job;

static int span_cmp(const void *a, const void *b) {
  const bci_span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : (x->item < y->item ? -1 : x->item > y->item);
}

static void overlap_old(void *u) {
  spans_job *j = u;
  size_t n = NT * SPANS;
  memcpy(j->work, j->in, sizeof j->in);
  qsort(j->work, n, sizeof *j->work, span_cmp);
  size_t far = 0;
  j->verdict = 0;
  for (size_t i = 1; i < n; i++) {
    if (j->work[i].lo < j->work[far].hi) {
      j->verdict = 1;
      break;
    }
    if (j->work[i].hi > j->work[far].hi) far = i;
  }
}

static void overlap_new(void *u) {
  spans_job *j = u;
  size_t a, b;
  memcpy(j->work, j->in, sizeof j->in);
  j->verdict = bci_spans_overlap(j->work, NT * SPANS, j->tmp, &a, &b);
}

static void copy_only(void *u) {
  spans_job *j = u;
  memcpy(j->work, j->in, sizeof j->in);
}

/* 1,000 tensors' ranges: arena order (bench_list's: data + scales of each tensor one after the
 * other, amax and scale in fp32 arrays of their own: three ascending runs interleaved), all in
 * one ascending run, or each range at a random 512-byte-aligned place in 64 GiB */
enum { ARENA, IN_ORDER, RANDOM };
static const char *const kind_name[] = { "arena ranges (qsort -> radix)", "ranges in order (qsort -> one pass)",
                                         "random ranges (qsort -> radix)" };
static void spans_fill(spans_job *j, int kind) {
  uintptr_t arena = 0x7f0000000000ull, small = 0x7f8000000000ull;
  for (int t = 0; t < NT; t++) {
    size_t sz[SPANS] = { 4096 * 64, 64 * 4, 4096 * 64, 64 * 4, 4, 4 };
    for (int k = 0; k < SPANS; k++) {
      uintptr_t lo;
      if (kind == RANDOM) lo = 0x7f0000000000ull + (next() % (1ull << 27)) * 512;
      else if (k < 4 || kind == IN_ORDER) {
        lo = arena;
        arena += (sz[k] + 255) / 256 * 256;
      } else {
        lo = small + (uintptr_t)(k - 4) * NT * 4 + (uintptr_t)t * 4;
      }
      j->in[t * SPANS + k] = (bci_span){ lo, lo + sz[k], t, "x" };
    }
  }
}

/* ---- layout ---- */

typedef struct layout_job {
  bc_ctx *ctx;
  const bc_format *f;
} layout_job;

static void layout_old(void *u) {
  layout_job *j = u;
  bc_qlayout lay;
  bc_qtensor_layout(j->ctx, j->f, 4096, 4096, BC_COLUMNWISE, 0, &lay);
  sink += lay.data_bytes + lay.scale_bytes;
}

static void layout_new(void *u) {
  layout_job *j = u;
  bci_geom g;
  bci_geom_get(j->ctx, "bench", j->f, 4096, 4096, BC_COLUMNWISE, 0, &g);
  sink += g.data_bytes + g.scale_bytes;
}

static void row(const char *what, const char *per, double old_ns, double new_ns) {
  printf("| %s | %s | %.1f | %.1f | %.2fx |\n", what, per, old_ns, new_ns, old_ns / new_ns);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  bc_ctx *ctx;
  char err[512];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) {
    fprintf(stderr, "bc_ctx_create: %s\n", err);
    return 1;
  }

  /* names: same text */
  const char *fname = "fp8_e4m3_tensor";
  {
    char a[128], b[128];
    snprintf(a, sizeof a, fmts[3], fname, "bf16", "rowcol");
    int n = name_new(b, sizeof b, fmts[3], fname, "bf16", "rowcol");
    CHECK(n == (int)strlen(a) && strcmp(a, b) == 0, "bci_kernel_name gave '%s', vsnprintf '%s'", b, a);
    CHECK(name_new(b, sizeof b, "bc_%d", 1) == -1, "a %%d conversion was accepted");
    CHECK(name_new(b, 8, fmts[3], fname, "bf16", "rowcol") == -2 && strcmp(b, "bc_quan") == 0, "a long name was not cut: '%s'", b);
  }

  /* overlap: same verdicts, without and with an overlap */
  spans_job *sj = malloc(sizeof *sj);
  for (int kind = 0; kind < 3; kind++) {
    spans_fill(sj, kind);
    overlap_old(sj);
    int o = sj->verdict;
    overlap_new(sj);
    CHECK(o == sj->verdict, "%s: qsort found %d, bci_spans_overlap %d", kind_name[kind], o, sj->verdict);
    for (size_t i = 1; i < NT * SPANS; i++)
      CHECK(sj->work[i - 1].lo <= sj->work[i].lo, "not sorted at %zu", i);
    bci_span keep = sj->in[5 * SPANS + 2];
    sj->in[5 * SPANS + 2].lo = sj->in[700 * SPANS + 1].lo + 1; /* inside another tensor's range */
    sj->in[5 * SPANS + 2].hi = sj->in[5 * SPANS + 2].lo + 8;
    overlap_old(sj);
    o = sj->verdict;
    overlap_new(sj);
    CHECK(o == 1 && sj->verdict == 1, "an overlap: qsort found %d, bci_spans_overlap %d", o, sj->verdict);
    sj->in[5 * SPANS + 2] = keep;
  }

  layout_job lj = { ctx, NULL };
  if (bc_format_get(ctx, "mxfp8_e4m3", &lj.f) != BC_OK) {
    fprintf(stderr, "bc_format_get: %s\n", bc_last_error(ctx));
    return 1;
  }
  {
    bc_qlayout lay;
    bci_geom g;
    bc_status a = bc_qtensor_layout(ctx, lj.f, 4096, 4096, BC_COLUMNWISE, 0, &lay);
    bc_status b = bci_geom_get(ctx, "bench", lj.f, 4096, 4096, BC_COLUMNWISE, 0, &g);
    CHECK(a == BC_OK && b == BC_OK && lay.data_bytes == g.data_bytes && lay.scale_bytes == g.scale_bytes, "layout sizes differ");
  }
  if (fails) {
    fprintf(stderr, "%d checks failed: not timing\n", fails);
    return 1;
  }

  printf("# bench_host: host work of a list entry that needs no GPU; median of 21 samples, ns\n\n");
  printf("| piece | per | before (ns) | now (ns) | before / now |\n|---|---|---|---|---|\n");
  row("kernel names (vsnprintf -> bci_kernel_name)", "tensor (4 names)", time_ns(names_old, (void *)fname, 2000),
      time_ns(names_new, (void *)fname, 2000));
  for (int kind = 0; kind < 3; kind++) {
    spans_fill(sj, kind);
    double c = time_ns(copy_only, sj, 20);
    double o = time_ns(overlap_old, sj, 3) - c, n = time_ns(overlap_new, sj, 3) - c;
    char what[96];
    snprintf(what, sizeof what, "overlap check, %s", kind_name[kind]);
    row(what, "tensor (6 ranges)", o / NT, n / NT);
  }
  row("layout of one direction (bc_qtensor_layout -> bci_geom_get)", "direction", time_ns(layout_old, &lj, 20000),
      time_ns(layout_new, &lj, 20000));
  free(sj);
  bc_ctx_destroy(ctx);
  return 0;
}
