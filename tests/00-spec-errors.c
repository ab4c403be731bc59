/* 00-spec-errors: every kind of malformed spec returns BC_ERR_SPEC with a message naming the
 * file, the line where the text shows it, the field, what was expected and what was found. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "tap.h"

static const char *GOOD =
  "name = \"t_fmt\"\n"
  "description = \"test\"\n"
  "element = \"e4m3\"\n"
  "block = \"tensor\"\n"
  "scale = { type = \"fp32\", rule = \"amax\" }\n"
  "rowwise = { layout = \"rowmajor\" }\n"
  "columnwise = { layout = \"transposed\" }\n";

static char path[256];

static bc_status load(bc_ctx *ctx, const char *text) {
  FILE *f = fopen(path, "wb");
  fputs(text, f);
  fclose(f);
  const bc_format *fmt;
  return bc_format_load(ctx, path, &fmt);
}

/* GOOD with line `line` (1-based) replaced */
static bc_status load_with(bc_ctx *ctx, int line, const char *repl) {
  char buf[4096] = "";
  const char *p = GOOD;
  for (int l = 1; *p; l++) {
    const char *e = strchr(p, '\n');
    if (l == line) strcat(buf, repl), strcat(buf, "\n");
    else strncat(buf, p, (size_t)(e - p + 1));
    p = e + 1;
  }
  return load(ctx, buf);
}

#define CASE(status_expr, want_status, ...)                                              \
  do {                                                                                   \
    bc_status s_ = (status_expr);                                                        \
    is_int(s_, want_status, __VA_ARGS__);                                                \
  } while (0)

static void longest(const char *name, void *user) {
  if (strlen(name) > strlen((char *)user) && strlen(name) < 256) strcpy((char *)user, name);
}

int main(void) {
  snprintf(path, sizeof path, "%s/bc-spec-%ld.lua", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
  bc_ctx *ctx;
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) {
    printf("Bail out! bc_ctx_create: %s\n", err);
    return 1;
  }
  char want[512];

  CASE(load(ctx, GOOD), BC_OK, "a good spec loads");
  const bc_format *f;
  is_int(bc_format_get(ctx, "t_fmt", &f), BC_OK, "and is found by name");

  CASE(load(ctx, "name = \"x\"\nscale = { type = \"fp32\",, }\n"), BC_ERR_SPEC, "syntax error");
  snprintf(want, sizeof want, "%s:2:", path);
  is_str_has(bc_last_error(ctx), want, "syntax error: file and line");
  is_str_has(bc_last_error(ctx), "Lua syntax error", "syntax error: says so");

  CASE(load_with(ctx, 4, "block = \"tensor\"\nblok = 3"), BC_ERR_SPEC, "unknown field");
  snprintf(want, sizeof want, "%s:5: unknown field 'blok'", path);
  is_str_has(bc_last_error(ctx), want, "unknown field: file:line and name");
  is_str_has(bc_last_error(ctx), "expected one of block, columnwise", "unknown field: lists the known ones");

  CASE(load_with(ctx, 5, "scale = { type = \"fp32\", rule = \"amax\", pow2 = \"yes\" }"), BC_ERR_SPEC, "wrong type");
  snprintf(want, sizeof want, "%s:5: field 'scale.pow2': expected a boolean, found \"yes\"", path);
  is_str_has(bc_last_error(ctx), want, "wrong type: field, expected, found");

  CASE(load_with(ctx, 5, "scale = { type = \"fp32\", rule = \"amx\" }"), BC_ERR_SPEC, "bad enum value");
  is_str_has(bc_last_error(ctx), "field 'scale.rule': expected one of \"amax\", \"rceil\", \"floor\", \"two_level\", found \"amx\"", "bad enum: lists choices");

  CASE(load_with(ctx, 3, "element = 2^3"), BC_ERR_SPEC, "number where a string is needed");
  is_str_has(bc_last_error(ctx), "field 'element': expected a string, found the float 8", "found a float");

  CASE(load_with(ctx, 4, "block = {\n  rows = 1,\n  cols = 12.5,\n}"), BC_ERR_SPEC, "non-integer");
  snprintf(want, sizeof want, "%s:6: field 'block.cols': expected an integer in [1, 1024], found the float 12.5 (not an integer)", path);
  is_str_has(bc_last_error(ctx), want, "non-integer: nested field, its line, expected, found");
  CASE(load_with(ctx, 2, ""), BC_ERR_SPEC, "missing field");
  snprintf(want, sizeof want, "%s: missing field 'description': expected a string", path);
  is_str_has(bc_last_error(ctx), want, "missing field: names it");

  CASE(load_with(ctx, 3, "element = \"e9m9\""), BC_ERR_SPEC, "unknown element");
  is_str_has(bc_last_error(ctx), "an element of specs/elements.lua (e2m1, e2m3, e3m2, e4m3, e5m2, e8m0, ue4m3)", "unknown element: lists the known ones");

  /* block formats: the checks that span fields */
  static const char BLOCK[] =
    "name = \"t_blk\"\ndescription = \"t\"\nelement = \"e2m1\"\nblock = { rows = 1, cols = 32 }\n"
    "scale = { type = \"e8m0\", rule = \"rceil\" }\npacking = \"low_first\"\n"
    "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n";
  CASE(load(ctx, BLOCK), BC_OK, "a block-scaled spec loads");
  char bad[2048];
#define BLOCK_CASE(from, to, what, msg)                                          \
  do {                                                                           \
    const char *at_ = strstr(BLOCK, from);                                       \
    snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at_ - BLOCK), BLOCK, to, at_ + strlen(from)); \
    CASE(load(ctx, bad), BC_ERR_SPEC, what);                                     \
    is_str_has(bc_last_error(ctx), msg, what ": the message");                  \
  } while (0)
  BLOCK_CASE("rows = 1, cols = 32", "rows = 2, cols = 32", "a 2x32 block", "2x32 blocks are not supported by this version");
  BLOCK_CASE("rows = 1, cols = 32", "rows = 1, cols = 24", "a block of 24", "field 'block.cols': expected a power of two from 16 to 128");
  BLOCK_CASE("rule = \"rceil\"", "rule = \"two_level\"", "rule for the scale type",
             "field 'scale.rule': expected \"rceil\" or \"floor\" for scale type e8m0");
  BLOCK_CASE("type = \"e8m0\"", "type = \"e4m3\"", "a signed scale element", "expected an unsigned element");
  BLOCK_CASE("packing = \"low_first\"\n", "", "no packing for 4-bit elements", "field 'packing' is needed for 4-bit elements");
  BLOCK_CASE(", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 }", "", "no scale layout",
             "field 'rowwise.scale_layout' is needed by a block-scaled format");
  BLOCK_CASE("pad_cols = 4 }", "pad_cols = 4, index = \"row\" }", "per-row scales of a 1D block",
             "field 'rowwise.scale_layout.index': expected \"block\"");
  BLOCK_CASE("element = \"e2m1\"", "element = \"e4m3\"", "packing for an 8-bit element",
             "field 'packing': expected nothing for 8-bit elements");
  BLOCK_CASE("element = \"e2m1\"\nblock = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"rceil\" }\npacking = \"low_first\"\n",
             "element = \"e2m3\"\nblock = { rows = 1, cols = 32 }\nscale = { type = \"e8m0\", rule = \"rceil\" }\n",
             "no packing for 6-bit elements", "field 'packing' is needed for 6-bit elements: \"low_first\" (element k of each group of 4 elements in 3 byte(s)");
  BLOCK_CASE("element = \"e2m1\"", "element = \"ue4m3\"", "a 7-bit element",
             "7-bit elements (ue4m3) are not supported by the block kernels; expected an element of 8, 6 or 4 bits");
  BLOCK_CASE("packing = \"low_first\"\n", "packing = \"low_first\"\nnan_policy = \"ignore\"\n", "an unknown NaN policy",
             "field 'nan_policy': expected one of \"satfinite\", \"scale_nan\"");

  CASE(load_with(ctx, 4, "block = string.rep('x', 3)"), BC_ERR_SPEC, "reading a global");
  is_str_has(bc_last_error(ctx), "'string' is not available in a spec", "globals are not readable");

  CASE(load_with(ctx, 4, "block = (\"\"):rep(1 << 62)"), BC_ERR_SPEC, "a string method (C code the instruction budget cannot stop)");
  snprintf(want, sizeof want, "%s:4: string methods (:rep) are not available in a spec", path);
  is_str_has(bc_last_error(ctx), want, "string methods: refused, with the line");

  CASE(load_with(ctx, 4, "local s = \"x\"\nfor i = 1, 40 do s = s .. s end\nblock = s"), BC_ERR_SPEC, "a spec allocating without bound");
  snprintf(want, sizeof want, "%s: not enough memory: the spec exceeded the generator's memory limit", path);
  is_str_has(bc_last_error(ctx), want, "memory: capped and reported");
  is_int(bc_format_get(ctx, "fp8_e4m3_tensor", &f), BC_OK, "and the context still works after it");

  CASE(load_with(ctx, 4, "block = \"tensor\"\nwhile true do end"), BC_ERR_SPEC, "endless loop");
  is_str_has(bc_last_error(ctx), "instructions", "endless loop: instruction budget");

  CASE(load_with(ctx, 4, "block = \"tensor\"\nblock = \"tensor\""), BC_ERR_SPEC, "field assigned twice");
  is_str_has(bc_last_error(ctx), "assigned twice (first at line 4)", "assigned twice: both lines");

  CASE(load(ctx, "return { name = 'x' }\n"), BC_ERR_SPEC, "a spec that returns a table");
  is_str_has(bc_last_error(ctx), "returns nothing", "return: says how a spec is written");

  CASE(load_with(ctx, 1, "name = \"Bad Name\""), BC_ERR_SPEC, "bad name");
  is_str_has(bc_last_error(ctx), "field 'name': expected a name of lower-case letters", "bad name: what a name is");

  {
    /* names the runtime's records and kernel names hold: 63 characters, not one more */
    char nm[128], line[160];
    memset(nm, 'a', 64);
    nm[64] = 0;
    snprintf(line, sizeof line, "name = \"%s\"", nm);
    CASE(load_with(ctx, 1, line), BC_ERR_SPEC, "a 64-character name");
    is_str_has(bc_last_error(ctx), "field 'name': expected a name of lower-case letters, digits and _ starting with a letter of at most 63 "
               "characters, found 64 characters", "long name: the limit and the length");
    nm[63] = 0;
    snprintf(line, sizeof line, "name = \"%s\"", nm);
    CASE(load_with(ctx, 1, line), BC_OK, "a 63-character name loads");
    /* its longest kernel name is generated under that name */
    char kn[256] = "", *src = NULL;
    size_t len = 0;
    bc_kernel_names(ctx, "sm_90", nm, longest, kn);
    bc_status ks = bc_kernel_source(ctx, kn, "sm_90", &src, &len);
    ok(strlen(kn) > 63 + 20 && ks == BC_OK && src && strstr(src, kn), "  and its longest kernel name, %zu characters, is generated (%.24s...%s)",
       strlen(kn), kn, kn + (strlen(kn) > 20 ? strlen(kn) - 20 : 0));
    if (ks != BC_OK) diag("%s", bc_last_error(ctx));
    free(src);
  }

  CASE(load_with(ctx, 1, "name = \"fp8_e4m3_tensor\""), BC_ERR_SPEC, "a name taken by another spec");
  is_str_has(bc_last_error(ctx), "already defined by specs/fp8_e4m3_tensor.lua", "name clash: names the other file");

  /* a name whose kernels would take another format's names: thin_X's quantize kernels are named
   * as X's thin-tensor kernels (bc_quantize_thin_X__...) and would replace them */
  CASE(load_with(ctx, 1, "name = \"thin_mxfp8_e4m3\""), BC_ERR_SPEC, "a name whose kernels another format has");
  is_str_has(bc_last_error(ctx), "format 'thin_mxfp8_e4m3' would have a kernel named bc_quantize_thin_mxfp8_e4m3__",
             "kernel name clash: names the kernel");
  is_str_has(bc_last_error(ctx), "which format 'mxfp8_e4m3' (specs/mxfp8_e4m3.lua) already has; give this spec another name",
             "kernel name clash: names the other format and what to do");
  const bc_format *tf;
  ok(bc_format_get(ctx, "thin_mxfp8_e4m3", &tf) != BC_OK, "  and the refused format is not registered");
  char *tsrc = NULL;
  size_t tlen = 0;
  ok(bc_kernel_source(ctx, "bc_quantize_thin_mxfp8_e4m3__bf16__row", "sm_90", &tsrc, &tlen) == BC_OK && tsrc &&
     strstr(tsrc, "specs/mxfp8_e4m3.lua"), "  and mxfp8_e4m3's thin kernel is still its own");
  free(tsrc);
  CASE(load_with(ctx, 2, "description = \"x\\n#error injected\""), BC_ERR_SPEC, "a description of two lines");
  is_str_has(bc_last_error(ctx), "field 'description': expected one line of text without control characters", "description: one line");

  CASE(load(ctx, "\x1bLua"), BC_ERR_SPEC, "precompiled chunk");
  is_str_has(bc_last_error(ctx), "precompiled Lua is not accepted", "precompiled: refused");

  CASE(load_with(ctx, 5, "scale = { type = \"fp32\", rule = \"amax\", eps = 0/0 }"), BC_ERR_SPEC, "NaN number");
  is_str_has(bc_last_error(ctx), "field 'scale.eps': expected a finite number, found the float nan", "NaN: refused");

  const bc_format *g;
  is_int(bc_format_load(ctx, "/nonexistent/spec.lua", &g), BC_ERR_ARG, "missing file");
  is_str_has(bc_last_error(ctx), "cannot open '/nonexistent/spec.lua'", "missing file: path and reason");

  unlink(path);
  bc_ctx_destroy(ctx);
  return done_testing();
}
