/* 18-list-ref: the list and grouped calls without a GPU: the grouped layout (offsets by hand for
 * a per-tensor, a 1D, a 2D, a 4-bit and the 6-bit formats, compact and swizzled; groups that do
 * not fill whole packing groups refused naming the group; each direction alone), the
 * CPU reference of grouped quantize against bc_ref_quantize of each group at those offsets
 * (0-row and 1-row groups, every format), and the argument errors of every list call, which
 * are checked before anything touches a GPU (messages name the entry). Also the host pieces of
 * a list entry: the output-overlap check (runtime/multi/bc_spans.c) against a brute-force
 * check and a stable sort on random ranges, and kernel-name formatting (bci_kernel_name)
 * against snprintf. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockcast.h"
#include "multi/bc_multi.h"
#include "tap.h"
#include "testdata.h"

static bc_ctx *ctx;

static size_t scale_bytes(const bc_format *f, int64_t r, int64_t c, bc_direction d, int swz) {
  bc_qlayout L;
  if (bc_qtensor_layout(ctx, f, r, c, d, swz, &L) != BC_OK) return (size_t)-1;
  return L.scale_bytes;
}

/* elements per packing group and its bytes, as the element's width says (8-bit 1 / 1, 4-bit
 * 2 / 1, 6-bit 4 / 3): a data row holds whole groups */
static int pack_of(int bits) { return bits == 4 ? 2 : bits == 6 ? 4 : 1; }
static int pack_bytes_of(int bits) { return bits == 6 ? 3 : 1; }

/* groups of 3, 0, 1, 130 and 64 rows; with whole_groups, each a multiple of the packing group
 * (4, 0, 4, 132, 64) so that the columnwise (transposed) data of sub-byte formats holds them */
static void layout_by_hand(const char *name, int swz, int whole_groups) {
  const bc_format *f;
  bc_format_get(ctx, name, &f);
  bc_format_info fi;
  bc_format_get_info(ctx, f, &fi);
  const int pk = pack_of(fi.element_bits), pb = pack_bytes_of(fi.element_bits);
  if (!ok(fi.element_pack == pk && fi.element_pack_bytes == pb, "%s: %d-bit elements, %d a packing group in %d byte(s) (got %d, %d)",
          name, fi.element_bits, pk, pb, fi.element_pack, fi.element_pack_bytes))
    return;
  const int64_t gr0[] = { 3, 0, 1, 130, 64 }, grw[] = { 4, 0, 4, 132, 64 };
  const int64_t *gr = whole_groups ? grw : gr0;
  const int64_t G = 5, K = 96;
  bc_group_offsets off[6];
  int dirs = BC_ROWWISE | (fi.has_columnwise ? BC_COLUMNWISE : 0);
  bc_status st = bc_grouped_layout(ctx, f, G, gr, K, dirs, swz, off);
  if (pk > 1 && fi.has_columnwise && fi.columnwise_transposed && !whole_groups) {
    char why[64];
    snprintf(why, sizeof why, "rows is 3; expected a multiple of %d", pk);
    ok(st == BC_ERR_ARG && strstr(bc_last_error(ctx), "group 0") && strstr(bc_last_error(ctx), why) &&
       strstr(bc_last_error(ctx), "columnwise data rows must hold whole groups"),
       "%s: a group of 3 rows for %d-bit columnwise data (groups of %d) names the group: %s", name, fi.element_bits, pk,
       bc_last_error(ctx));
    dirs = BC_ROWWISE;
    st = bc_grouped_layout(ctx, f, G, gr, K, dirs, swz, off);
  }
  if (st != BC_OK) {
    ok(0, "%s: bc_grouped_layout: %s", name, bc_last_error(ctx));
    return;
  }
  size_t rd = 0, rs = 0, cd = 0, cs = 0;
  int good = 1;
  for (int64_t g = 0; g < G; g++) {
    good &= off[g].rowwise_data == rd && off[g].rowwise_scale_inv == rs && off[g].columnwise_data == cd &&
            off[g].columnwise_scale_inv == cs;
    rd += (size_t)(gr[g] * K / pk * pb); /* K is a multiple of every packing group */
    if (fi.block == BC_BLOCK_TENSOR) rs += 4;
    else if (gr[g]) rs += scale_bytes(f, gr[g], K, BC_ROWWISE, swz);
    if (dirs & BC_COLUMNWISE) {
      cd += (size_t)(gr[g] * K / pk * pb);
      if (fi.block == BC_BLOCK_TENSOR) cs += 4;
      else if (gr[g]) cs += scale_bytes(f, gr[g], K, BC_COLUMNWISE, swz);
    }
  }
  good &= off[G].rowwise_data == rd && off[G].rowwise_scale_inv == rs && off[G].columnwise_data == cd &&
          off[G].columnwise_scale_inv == cs;
  ok(good, "%s%s%s: grouped offsets = the sums of each group's own layout (rowwise data %zu = the whole tensor's, scales %zu%s)", name,
     swz ? " swizzled" : "", whole_groups ? " [4, 0, 4, 132, 64]" : "", rd, rs, dirs & BC_COLUMNWISE ? "; columnwise too" : "");
}

/* grouped reference == bc_ref_quantize of each group at its offsets */
static void grouped_ref(const bc_format *f, int swz) {
  bc_format_info fi;
  bc_format_get_info(ctx, f, &fi);
  /* rows and cols hold whole packing groups (1, 2 or 4 elements): groups of 2, 0, 1, 34, 0, 66 rows
   * and 67 cols for 8-bit, 2, 0, 2, 34, 0, 66 and 70 for 4-bit, 4, 0, 4, 36, 0, 68 and 68 for 6-bit */
  const int pk = fi.element_pack;
  if (pk != pack_of(fi.element_bits)) {
    ok(0, "%s: element_pack %d for %d-bit elements", fi.name, pk, fi.element_bits);
    return;
  }
  const int64_t gr[] = { pk == 4 ? 4 : 2, 0, pk, pk == 4 ? 36 : 34, 0, pk == 4 ? 68 : 66 };
  const int64_t G = 6, K = pk == 1 ? 67 : pk == 2 ? 70 : 68;
  int64_t R = 0;
  for (int g = 0; g < G; g++) R += gr[g];
  int dirs = BC_ROWWISE | (fi.has_columnwise ? BC_COLUMNWISE : 0);
  bc_group_offsets off[7];
  if (bc_grouped_layout(ctx, f, G, gr, K, dirs, swz, off) != BC_OK) {
    ok(0, "%s: layout: %s", fi.name, bc_last_error(ctx));
    return;
  }
  const bc_group_offsets *t = &off[G];
  size_t all = t->rowwise_data + t->rowwise_scale_inv + t->columnwise_data + t->columnwise_scale_inv + 8 * G + 64;
  unsigned char *a = malloc(all), *b = malloc(all);
  memset(a, 0xA5, all);
  memset(b, 0xA5, all);
  uint16_t *x = malloc((size_t)(R * K) * 2);
  fill(x, BC_BF16, (size_t)(R * K), 0);
  bc_tensor xt = { x, BC_BF16, R, K, 0 };
  bc_qtensor q[2];
  unsigned char *base[2] = { a, b };
  for (int k = 0; k < 2; k++) {
    memset(&q[k], 0, sizeof q[k]);
    size_t p = 0;
    q[k].format = f;
    q[k].rows = R;
    q[k].cols = K;
    q[k].scale_swizzled = swz;
    q[k].rowwise_data = base[k] + p, p += t->rowwise_data;
    q[k].rowwise_scale_inv = base[k] + (p = (p + 3) / 4 * 4), p += t->rowwise_scale_inv;
    if (dirs & BC_COLUMNWISE) {
      q[k].columnwise_data = base[k] + p, p += t->columnwise_data;
      q[k].columnwise_scale_inv = base[k] + (p = (p + 3) / 4 * 4), p += t->columnwise_scale_inv;
    }
    p = (p + 3) / 4 * 4;
    q[k].amax = (float *)(base[k] + p), p += 4 * (size_t)G;
    q[k].scale = (float *)(base[k] + p);
  }
  for (int g = 0; g < G; g++) q[0].scale[g] = q[1].scale[g] = 1.0f; /* read by nothing here: written by current scaling */
  bc_status st = bc_ref_quantize_grouped(ctx, &xt, G, gr, &q[0]);
  int64_t r0 = 0;
  bc_status st2 = BC_OK;
  for (int g = 0; g < G && st2 == BC_OK; g++) {
    if (gr[g]) {
      bc_tensor xg = { x + r0 * K, BC_BF16, gr[g], K, 0 };
      bc_qtensor qg = q[1];
      qg.rows = gr[g];
      qg.rowwise_data = (char *)q[1].rowwise_data + off[g].rowwise_data;
      qg.rowwise_scale_inv = (char *)q[1].rowwise_scale_inv + off[g].rowwise_scale_inv;
      if (dirs & BC_COLUMNWISE) {
        qg.columnwise_data = (char *)q[1].columnwise_data + off[g].columnwise_data;
        qg.columnwise_scale_inv = (char *)q[1].columnwise_scale_inv + off[g].columnwise_scale_inv;
      }
      qg.amax = q[1].amax + g;
      qg.scale = q[1].scale + g;
      qg.sr_offset = (uint64_t)g;
      st2 = bc_ref_quantize(ctx, &xg, &qg);
    }
    r0 += gr[g];
  }
  ok(st == BC_OK && st2 == BC_OK && memcmp(a, b, all) == 0, "%s%s: bc_ref_quantize_grouped (%lld groups, 0 and %d rows among them, %lld cols) == "
     "each group alone at its offsets%s%s", fi.name, swz ? " swizzled" : "", (long long)G, pk, (long long)K, st ? ": " : "",
     st ? bc_last_error(ctx) : (st2 ? bc_last_error(ctx) : ""));
  free(a);
  free(b);
  free(x);
}


/* ---- the overlap check of a list's output ranges ---- */

/* random ranges: n up to 400 (the insertion and the radix paths), starts clustered (few
 * distinct bits), spread over 2^40 bytes, repeated, or already in order; lengths 1 to 4096 or
 * tiny (no overlap likely) */
static void spans_case(int trial) {
  size_t n = trial % 7 == 0 ? (size_t)(next() % 33) : (size_t)(next() % 400);
  bci_span *s = calloc(n + 1, sizeof *s), *t = calloc(n + 1, sizeof *t), *ref = calloc(n + 1, sizeof *ref);
  int kind = trial % 4, tiny = trial % 3 == 0;
  uintptr_t base = (uintptr_t)0x7f0000000000ull, at = base;
  for (size_t i = 0; i < n; i++) {
    uintptr_t lo;
    switch (kind) {
    case 0: lo = base + (next() % 4096) * 16; break;             /* clustered */
    case 1: lo = base + (next() % (1ull << 40)); break;           /* spread */
    case 2: lo = base + (next() % 8) * 64; break;                 /* repeated starts */
    default: lo = at; at += 64 + next() % 64; break;              /* in order */
    }
    uintptr_t len = tiny ? 1 + next() % 4 : 1 + next() % 4096;
    s[i] = (bci_span){ lo, lo + len, (int64_t)i, "x" };
  }
  memcpy(ref, s, n * sizeof *s);
  /* brute force verdict, and the stable order by start (insertion sort) */
  int overlap = 0;
  for (size_t i = 0; i < n && !overlap; i++)
    for (size_t j = i + 1; j < n; j++)
      if (ref[i].lo < ref[j].hi && ref[j].lo < ref[i].hi) {
        overlap = 1;
        break;
      }
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && ref[j - 1].lo > ref[j].lo; j--) {
      bci_span v = ref[j];
      ref[j] = ref[j - 1];
      ref[j - 1] = v;
    }
  size_t a = 0, b = 0;
  int got = bci_spans_overlap(s, n, t, &a, &b);
  int same_order = 1;
  for (size_t i = 0; i < n; i++) same_order &= s[i].lo == ref[i].lo && s[i].item == ref[i].item;
  int pair_ok = !got || (a < b && b < n && s[b].lo < s[a].hi && s[a].lo < s[b].hi);
  ok(got == overlap && same_order && pair_ok, "overlap check, %zu ranges (%s%s): %s, sorted stably by start%s", n,
     (const char *[]){ "clustered", "spread", "repeated starts", "in order" }[kind], tiny ? ", short" : "",
     overlap ? "finds the overlap" : "no overlap", got ? ", the pair it names overlaps" : "");
  if (got != overlap) diag("bci_spans_overlap said %d, brute force %d", got, overlap);
  free(s);
  free(t);
  free(ref);
}

/* ---- kernel names ---- */

static int kname(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = bci_kernel_name(out, cap, fmt, ap);
  va_end(ap);
  return n;
}

static void kernel_names(void) {
  char a[128], b[128];
  static const char *const fm[] = { "bc_amax__%s", "bc_quantize_%s__%s__%s", "bc_dequantize_%s__%s__%s%s", "%s", "plain", "a%%b%s" };
  int all = 1;
  for (int i = 0; i < 6; i++) {
    snprintf(a, sizeof a, fm[i], "mxfp8_e4m3", "bf16", "col", "_flat");
    int n = kname(b, sizeof b, fm[i], "mxfp8_e4m3", "bf16", "col", "_flat");
    if (n != (int)strlen(a) || strcmp(a, b)) {
      all = 0;
      diag("format '%s': got '%s' (%d), snprintf '%s'", fm[i], b, n, a);
    }
  }
  ok(all, "bci_kernel_name == snprintf on the runtime's kernel-name formats, %% and plain text");
  is_int(kname(b, sizeof b, "bc_%d", 3), -1, "bci_kernel_name: a conversion other than %%s is refused");
  int n = kname(b, 12, "bc_quantize_%s", "mxfp8_e4m3");
  ok(n == -2 && strcmp(b, "bc_quantize") == 0, "bci_kernel_name: a name longer than the buffer: -2 and its first cap - 1 bytes ('%s')", b);
  is_int(kname(b, 12, "bc_quantiz%s", "e"), 11, "bci_kernel_name: a name that just fits");

}

int main(void) {
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) { printf("Bail out! no context\n"); return 1; }
  layout_by_hand("fp8_e4m3_tensor", 0, 0);
  layout_by_hand("mxfp8_e4m3", 0, 0);
  layout_by_hand("mxfp8_e4m3", 1, 0);
  layout_by_hand("fp8_block_128x128", 0, 0);
  layout_by_hand("nvfp4", 1, 0);
  layout_by_hand("nvfp4", 0, 1);
  layout_by_hand("mxfp4", 0, 0);
  layout_by_hand("mxfp6_e3m2", 0, 0);
  layout_by_hand("mxfp6_e3m2", 1, 1);
  layout_by_hand("mxfp6_e2m3", 1, 0);
  layout_by_hand("mxfp6_e2m3", 0, 1);
  /* every format the context knows; the 6-bit ones by name too, so that they cannot be skipped */
  static const char *const must[] = { "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "nvfp4" };
  int seen[4] = { 0 };
  for (size_t i = 0; i < bc_format_count(ctx); i++) {
    const bc_format *f = bc_format_at(ctx, i);
    bc_format_info fi;
    bc_format_get_info(ctx, f, &fi);
    for (int k = 0; k < 4; k++) seen[k] |= !strcmp(fi.name, must[k]);
    grouped_ref(f, 0);
    if (fi.block != BC_BLOCK_TENSOR) grouped_ref(f, 1);
  }
  ok(seen[0] && seen[1] && seen[2] && seen[3], "the grouped reference ran for mxfp6_e3m2, mxfp6_e2m3, mxfp4 and nvfp4");
  /* a group whose columnwise data rows are not whole 6-bit groups: even is not enough */
  {
    const bc_format *f6;
    bc_format_get(ctx, "mxfp6_e2m3", &f6);
    int64_t g6[3] = { 4, 6, 8 };
    is_int(bc_grouped_layout(ctx, f6, 3, g6, 32, BC_COLUMNWISE, 0, (bc_group_offsets[4]){ 0 }), BC_ERR_ARG,
           "grouped_layout mxfp6_e2m3 columnwise: a group of 6 rows");
    is_str_has(bc_last_error(ctx),
               "group 1: format 'mxfp6_e2m3' packs 4 6-bit elements in 3 byte(s), so its columnwise data rows must hold whole groups: "
               "rows is 6; expected a multiple of 4",
               "  names group 1, the packing and the multiple");
    is_int(bc_grouped_layout(ctx, f6, 3, g6, 32, BC_ROWWISE, 0, (bc_group_offsets[4]){ 0 }), BC_OK,
           "  rowwise only: fine (the rows are 32 elements)");
    is_int(bc_grouped_layout(ctx, f6, 3, g6, 30, BC_ROWWISE, 0, (bc_group_offsets[4]){ 0 }), BC_ERR_ARG,
           "grouped_layout mxfp6_e2m3 rowwise with 30 cols");
    is_str_has(bc_last_error(ctx), "rowwise data rows must hold whole groups: cols is 30; expected a multiple of 4", "  names cols");
  }

  /* argument errors, all before any GPU work */
  const bc_format *f;
  bc_format_get(ctx, "mxfp8_e4m3", &f);
  bc_tensor x[2] = { { (void *)16, BC_BF16, 4, 32, 0 }, { (void *)16, BC_BF16, 4, 32, 0 } };
  bc_qtensor q[2];
  memset(q, 0, sizeof q);
  float amax[2];
  is_int(bc_quantize_list(ctx, -1, x, q, NULL), BC_ERR_ARG, "quantize_list: n < 0");
  is_str_has(bc_last_error(ctx), "n is -1", "  the message names n");
  is_int(bc_quantize_list(ctx, 2, NULL, q, NULL), BC_ERR_ARG, "quantize_list: x NULL");
  is_str_has(bc_last_error(ctx), "'x' is NULL", "  named");
  is_int(bc_quantize_list(ctx, 2, x, NULL, NULL), BC_ERR_ARG, "quantize_list: q NULL");
  is_int(bc_quantize_list(ctx, 0, NULL, NULL, NULL), BC_OK, "quantize_list: n = 0 does nothing");
  is_int(bc_quantize_cast_list(ctx, 2, x, q, NULL), BC_ERR_ARG, "quantize_cast_list: an entry without a format");
  is_str_has(bc_last_error(ctx), "tensor 0", "  names the entry");
  is_int(bc_amax_list(ctx, 2, x, NULL, NULL), BC_ERR_ARG, "amax_list: amax NULL");
  is_int(bc_amax_list(ctx, 2, NULL, amax, NULL), BC_ERR_ARG, "amax_list: x NULL");
  /* amax over ranges: the range and the arrays checked before any GPU work */
  is_int(bc_amax_range(ctx, &x[0], 100, 40, (float *)16, NULL), BC_ERR_ARG, "amax_range: a range past the end");
  is_str_has(bc_last_error(ctx), "the range [100, 100 + 40) is not inside x's 128 elements", "  says which and why");
  is_int(bc_amax_range(ctx, &x[0], -1, 2, (float *)16, NULL), BC_ERR_ARG, "amax_range: a negative start");
  is_int(bc_amax_range(ctx, &x[0], 0, 2, NULL, NULL), BC_ERR_ARG, "amax_range: amax NULL");
  int64_t st[2] = { 120, 0 }, ln[2] = { 9, 4 };
  is_int(bc_amax_range_list(ctx, 2, x, NULL, ln, (float *)16, NULL), BC_ERR_ARG, "amax_range_list: start NULL");
  is_int(bc_amax_range_list(ctx, 2, x, st, ln, (float *)16, NULL), BC_ERR_ARG, "amax_range_list: entry 0's range past the end");
  is_str_has(bc_last_error(ctx), "bc_amax_range_list: tensor 0: bc_amax_range: the range [120, 120 + 9)", "  names the entry");
  is_int(bc_compute_scale_list(ctx, f, 2, amax, NULL, NULL, NULL), BC_ERR_ARG, "compute_scale_list: scale NULL");
  is_int(bc_dequantize_list(ctx, 2, q, BC_ROWWISE, NULL, NULL), BC_ERR_ARG, "dequantize_list: out NULL");
  is_int(bc_scale_swizzle_list(ctx, 3, NULL, 0, NULL), BC_ERR_ARG, "scale_swizzle_list: jobs NULL");
  /* entry 0 is empty (skipped), entry 1 is checked and refused before any GPU work */
  bc_swizzle_job jobs[2] = { { f, 0, 32, BC_ROWWISE, NULL, NULL }, { f, 4, 32, (bc_direction)7, (void *)64, (void *)256 } };
  is_int(bc_scale_swizzle_list(ctx, 2, jobs, 0, NULL), BC_ERR_ARG, "scale_swizzle_list: a bad direction");
  is_str_has(bc_last_error(ctx), "tensor 1", "  names the entry");
  /* grouped */
  int64_t gr[3] = { 2, 0, 1 };
  bc_qtensor g = { 0 };
  g.format = f;
  g.rows = 4;
  g.cols = 32;
  bc_tensor gx = { (void *)16, BC_BF16, 4, 32, 0 };
  is_int(bc_quantize_grouped(ctx, &gx, 3, gr, &g, NULL), BC_ERR_ARG, "quantize_grouped: rows that do not add up");
  is_str_has(bc_last_error(ctx), "add up to 3 rows but the tensor has 4", "  says both");
  gr[1] = -1;
  is_int(bc_grouped_layout(ctx, f, 3, gr, 32, BC_ROWWISE, 0, (bc_group_offsets[4]){ 0 }), BC_ERR_ARG, "grouped_layout: a negative group");
  is_str_has(bc_last_error(ctx), "group_rows[1] is -1", "  names it");
  gr[1] = 0;
  is_int(bc_grouped_layout(ctx, f, 0, gr, 32, BC_ROWWISE, 0, (bc_group_offsets[4]){ 0 }), BC_ERR_ARG, "grouped_layout: 0 groups");
  is_int(bc_grouped_layout(ctx, f, 3, gr, 32, 0, 0, (bc_group_offsets[4]){ 0 }), BC_ERR_ARG, "grouped_layout: no direction");
  is_int(bc_grouped_layout(ctx, f, 3, gr, 32, BC_ROWWISE, 0, NULL), BC_ERR_ARG, "grouped_layout: offsets NULL");
  is_int(bc_quantize_grouped(ctx, &gx, 3, NULL, &g, NULL), BC_ERR_ARG, "quantize_grouped: group_rows NULL");

  rng = 0x2545F4914F6CDD1Dull; /* testdata.h's generator, from a seed of its own */
  for (int trial = 0; trial < 40; trial++) spans_case(trial);
  kernel_names();
  bc_ctx_destroy(ctx);
  done_testing();
  return tap_failed ? 1 : 0;
}
