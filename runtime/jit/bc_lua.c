/* jit/bc_lua.c: the embedded Lua generator. One Lua state per context, used under ctx->lock.
 *
 * The generator's sources (gen/), the templates and the built-in specs are embedded in the
 * library (build/gen/embed.c), so generation needs no files at run time. The state has the
 * base, string, table, math, utf8, coroutine and debug libraries, no io/os/package, no print;
 * its memory is capped. Specs run sandboxed inside it (gen/spec.lua). */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "jit/bc_jit.h"

#define LUA_MEM_LIMIT ((size_t)512 << 20)

static void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  bc_ctx *ctx = ud;
  if (ptr == NULL) osize = 0;
  if (nsize == 0) {
    free(ptr);
    ctx->lua_mem -= osize;
    return NULL;
  }
  if (nsize > osize && ctx->lua_mem + (nsize - osize) > ctx->lua_mem_limit) return NULL;
  void *p = realloc(ptr, nsize);
  if (p) ctx->lua_mem = ctx->lua_mem - osize + nsize;
  return p;
}

static const bci_embedded_file *find_embedded(const char *path) {
  for (size_t i = 0; i < bci_embedded_count; i++)
    if (strcmp(bci_embedded_files[i].path, path) == 0) return &bci_embedded_files[i];
  return NULL;
}

/* ---- bc_host functions ---- */

static int host_sha256(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  char hex[65];
  bci_sha256_hex(s, n, hex);
  lua_pushstring(L, hex);
  return 1;
}

static int host_embedded(lua_State *L) {
  const bci_embedded_file *f = find_embedded(luaL_checkstring(L, 1));
  if (!f) return 0;
  lua_pushlstring(L, f->text, f->len);
  return 1;
}

static int host_embedded_list(lua_State *L) {
  size_t pn;
  const char *prefix = luaL_checklstring(L, 1, &pn);
  lua_newtable(L);
  int n = 0;
  /* embedded files are stored sorted by path */
  for (size_t i = 0; i < bci_embedded_count; i++) {
    if (strncmp(bci_embedded_files[i].path, prefix, pn) == 0) {
      lua_pushstring(L, bci_embedded_files[i].path);
      lua_rawseti(L, -2, ++n);
    }
  }
  return 1;
}

/* The text of this context's tuning override (bci_set_tuning), else of the file named by
 * $BLOCKCAST_TUNING (a development override of gen/tuning/<arch>.lua for every arch; AOT kernels
 * are then bypassed), and its name; or nothing. */
static int host_tuning_override(lua_State *L) {
  void *ud = NULL;
  lua_getallocf(L, &ud);
  bc_ctx *ctx = ud;
  if (ctx && ctx->tuning_text) {
    lua_pushstring(L, ctx->tuning_text);
    lua_pushstring(L, ctx->tuning_path);
    return 2;
  }
  const char *p = getenv("BLOCKCAST_TUNING");
  if (!p || !*p) return 0;
  FILE *f = fopen(p, "rb");
  if (!f) return luaL_error(L, "BLOCKCAST_TUNING=%s: cannot open the file", p);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) luaL_addlstring(&b, buf, n);
  fclose(f);
  luaL_pushresult(&b);
  lua_pushstring(L, p);
  return 2;
}

/* require(name): the embedded module gen/<...>.lua, loaded once */
static int host_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "bc_loaded");
  lua_getfield(L, -1, name);
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  char path[256];
  size_t n = strlen(name);
  if (n + 5 >= sizeof path) return luaL_error(L, "module name too long: %s", name);
  for (size_t i = 0; i <= n; i++) path[i] = name[i] == '.' ? '/' : name[i];
  strcat(path, ".lua");
  const bci_embedded_file *f = find_embedded(path);
  if (!f) return luaL_error(L, "module '%s' not found (no embedded %s)", name, path);
  char chunk[300];
  snprintf(chunk, sizeof chunk, "@%s", path);
  if (luaL_loadbufferx(L, f->text, f->len, chunk, "t") != LUA_OK) return lua_error(L);
  lua_call(L, 0, 1);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, name);
  return 1;
}

/* message handler: spec errors (tables with .msg) become their message; others get a traceback */
static int msgh(lua_State *L) {
  if (lua_istable(L, 1)) {
    lua_getfield(L, 1, "spec_error");
    int is_spec = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (is_spec) return 1; /* keep the table: the caller tells kinds apart */
  }
  const char *m = lua_tostring(L, 1);
  if (!m) m = "(error object is not a string)";
  luaL_traceback(L, L, m, 1);
  return 1;
}

/* Call the generator function M[fn] with nargs arguments already pushed; leaves nres results.
 * spec_status: the status for spec errors (BC_ERR_SPEC for spec files, BC_ERR_ARG for arguments). */
static bc_status gen_call(bc_ctx *ctx, const char *fn, int nargs, int nres, bc_status spec_status) {
  lua_State *L = ctx->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, msgh);
  lua_getfield(L, LUA_REGISTRYINDEX, "bc_gen");
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  for (int i = 0; i < nargs; i++) lua_pushvalue(L, base + 1 + i);
  int r = lua_pcall(L, nargs, nres, base + nargs + 1);
  if (r == LUA_OK) {
    /* move results down over the handler and the original args */
    int top = lua_gettop(L);
    for (int i = 0; i < nres; i++) {
      lua_pushvalue(L, top - nres + 1 + i);
      lua_replace(L, base + 1 + i);
    }
    lua_settop(L, base + nres);
    return BC_OK;
  }
  bc_status s;
  if (r == LUA_ERRMEM) {
    s = bci_fail(ctx, BC_ERR_NOMEM, "the generator ran out of memory (limit %zu MiB)", ctx->lua_mem_limit >> 20);
  } else if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "msg");
    s = bci_fail(ctx, spec_status, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "spec error");
    lua_pop(L, 1);
  } else {
    s = bci_fail(ctx, BC_ERR_INTERNAL, "generator error in %s: %s", fn, lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  }
  lua_settop(L, base);
  return s;
}

/* ---- format records ---- */

static double get_num(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static const char *get_str(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  const char *v = lua_tostring(L, -1);
  lua_pop(L, 1);
  return v ? v : ""; /* anchored in the table */
}

static int get_bool(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static void get_codes(lua_State *L, int t, const char *k, uint8_t *mask) {
  lua_getfield(L, t, k);
  if (lua_istable(L, -1)) {
    lua_Integer n = luaL_len(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      lua_Integer c = lua_tointeger(L, -1);
      if (c >= 0 && c < 256) mask[c] = 1;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

/* The element record at the top of the stack into *el. */
static void element_from_lua(lua_State *L, bci_element *el) {
  int e = lua_gettop(L);
  snprintf(el->name, sizeof el->name, "%s", get_str(L, e, "name"));
  el->bits = (int)get_num(L, e, "bits");
  el->exponent_bits = (int)get_num(L, e, "exponent_bits");
  el->mantissa_bits = (int)get_num(L, e, "mantissa_bits");
  el->bias = (int)get_num(L, e, "bias");
  el->is_signed = get_bool(L, e, "signed");
  lua_getfield(L, e, "subnormals");
  el->subnormals = lua_isnil(L, -1) || lua_toboolean(L, -1);
  lua_pop(L, 1);
  el->max_finite = get_num(L, e, "max_finite");
  el->max_code = (int)get_num(L, e, "max_code");
  get_codes(L, e, "nan_codes", el->is_nan);
  get_codes(L, e, "inf_codes", el->is_inf);
  /* the code a NaN input becomes: a NaN code, or for elements without NaN a finite code (the
   * generator sets it to +max when the spec does not say) */
  lua_getfield(L, e, "nan_encode");
  el->nan_encode = lua_isnil(L, -1) ? -1 : (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  bci_element_prepare(el);
}

/* The scale_layout of direction table `d` (top of stack) into *ds. */
static void dir_from_lua(lua_State *L, bci_dir_spec *ds) {
  int d = lua_gettop(L);
  ds->transposed = strcmp(get_str(L, d, "layout"), "transposed") == 0;
  lua_getfield(L, d, "scale_layout");
  if (lua_istable(L, -1)) {
    int t = lua_gettop(L);
    ds->scale_order = strcmp(get_str(L, t, "order"), "transposed") == 0;
    ds->scale_per_row = strcmp(get_str(L, t, "index"), "row") == 0;
    ds->pad_rows = (int)get_num(L, t, "pad_rows");
    ds->pad_cols = (int)get_num(L, t, "pad_cols");
  }
  lua_pop(L, 1);
}

/* Build (or find) the bc_format of the Lua format record at the top of the stack. */
static bc_status format_from_lua(bc_ctx *ctx, const bc_format **out) {
  lua_State *L = ctx->L;
  int t = lua_gettop(L);
  const char *name = get_str(L, t, "name");
  const char *hash = get_str(L, t, "hash");
  for (size_t i = 0; i < ctx->nformats; i++) {
    if (strcmp(ctx->formats[i]->name, name) == 0 && strcmp(ctx->formats[i]->hash, hash) == 0) {
      *out = ctx->formats[i];
      return BC_OK;
    }
  }
  bc_format *f = calloc(1, sizeof *f);
  if (!f) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  snprintf(f->name, sizeof f->name, "%s", name);
  snprintf(f->hash, sizeof f->hash, "%s", hash);
  f->description = bci_strdup(get_str(L, t, "description"));
  f->spec_file = bci_strdup(get_str(L, t, "file"));
  f->block = BC_BLOCK_TENSOR;
  lua_getfield(L, t, "rowwise");
  f->has_rowwise = lua_istable(L, -1);
  if (f->has_rowwise) dir_from_lua(L, &f->dir[0]);
  lua_pop(L, 1);
  lua_getfield(L, t, "columnwise");
  f->has_columnwise = lua_istable(L, -1);
  if (f->has_columnwise) {
    dir_from_lua(L, &f->dir[1]);
    f->columnwise_transposed = f->dir[1].transposed;
  }
  lua_pop(L, 1);
  lua_getfield(L, t, "scale");
  int sc = lua_gettop(L);
  f->eps = get_num(L, sc, "eps");
  f->pow2 = get_bool(L, sc, "pow2");
  f->inf_dtype_max = strcmp(get_str(L, sc, "inf_value"), "dtype_max") == 0;
  snprintf(f->scale_type, sizeof f->scale_type, "%s", get_str(L, sc, "type"));
  const char *rule = get_str(L, sc, "rule");
  f->rule = strcmp(rule, "rceil") == 0 ? BCI_RULE_RCEIL : strcmp(rule, "floor") == 0 ? BCI_RULE_FLOOR
          : strcmp(rule, "two_level") == 0 ? BCI_RULE_TWO_LEVEL : BCI_RULE_AMAX;
  lua_pop(L, 1);
  f->scale_bytes = strcmp(f->scale_type, "fp32") == 0 ? 4 : 1;
  lua_getfield(L, t, "block");
  if (lua_istable(L, -1)) {
    f->block_rows = (int)get_num(L, lua_gettop(L), "rows");
    f->block_cols = (int)get_num(L, lua_gettop(L), "cols");
    f->block = f->block_rows > 1 ? BC_BLOCK_2D : BC_BLOCK_1D;
  }
  lua_pop(L, 1);
  lua_getfield(L, t, "packing");
  f->pack_high_first = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "high_first") == 0;
  lua_pop(L, 1);
  lua_getfield(L, t, "pack_group_elems");
  f->pack_group_elems = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 1;
  lua_pop(L, 1);
  lua_getfield(L, t, "pack_group_bytes");
  f->pack_group_bytes = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 1;
  lua_pop(L, 1);
  lua_getfield(L, t, "nan_policy");
  f->nan_scale = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "scale_nan") == 0;
  lua_pop(L, 1);
  f->sr_allowed = get_bool(L, t, "stochastic_rounding");
  lua_getfield(L, t, "selem");
  if (lua_istable(L, -1)) element_from_lua(L, &f->selem);
  lua_pop(L, 1);
  lua_getfield(L, t, "elem");
  element_from_lua(L, &f->elem);
  lua_pop(L, 1);
  if (!f->description || !f->spec_file) {
    free(f->description);
    free(f->spec_file);
    free(f);
    return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  }
  bc_status s = bci_format_add(ctx, f);
  if (s != BC_OK) {
    free(f->description);
    free(f->spec_file);
    free(f);
    return s;
  }
  *out = f;
  return BC_OK;
}

/* ---- open / close ---- */

bc_status bci_lua_open(bc_ctx *ctx, char *err, size_t errsz) {
  ctx->lua_mem_limit = LUA_MEM_LIMIT;
  lua_State *L = lua_newstate(lua_alloc, ctx);
  if (!L) {
    if (err && errsz) snprintf(err, errsz, "cannot create the Lua state: out of memory");
    return BC_ERR_NOMEM;
  }
  ctx->L = L;
  static const luaL_Reg libs[] = {
    { LUA_GNAME, luaopen_base }, { LUA_STRLIBNAME, luaopen_string }, { LUA_TABLIBNAME, luaopen_table },
    { LUA_MATHLIBNAME, luaopen_math }, { LUA_UTF8LIBNAME, luaopen_utf8 }, { LUA_COLIBNAME, luaopen_coroutine },
    { LUA_DBLIBNAME, luaopen_debug }, { NULL, NULL },
  };
  for (const luaL_Reg *l = libs; l->func; l++) {
    luaL_requiref(L, l->name, l->func, 1);
    lua_pop(L, 1);
  }
  /* nothing in the library writes to stdout or reads files behind our back */
  const char *drop[] = { "print", "dofile", "loadfile" };
  for (size_t i = 0; i < 3; i++) {
    lua_pushnil(L);
    lua_setglobal(L, drop[i]);
  }
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "bc_loaded");
  lua_pushcfunction(L, host_require);
  lua_setglobal(L, "require");
  lua_newtable(L);
  lua_pushcfunction(L, host_sha256);
  lua_setfield(L, -2, "sha256");
  lua_pushcfunction(L, host_embedded);
  lua_setfield(L, -2, "embedded");
  lua_pushcfunction(L, host_embedded_list);
  lua_setfield(L, -2, "embedded_list");
  lua_pushcfunction(L, host_tuning_override);
  lua_setfield(L, -2, "tuning_override");
  lua_setglobal(L, "bc_host");

  lua_pushcfunction(L, msgh);
  lua_pushcfunction(L, host_require);
  lua_pushstring(L, "gen.blockcast");
  if (lua_pcall(L, 1, 1, -3) != LUA_OK) {
    if (err && errsz) snprintf(err, errsz, "cannot load the embedded generator: %s", lua_tostring(L, -1));
    return BC_ERR_INTERNAL;
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "bc_gen");
  lua_pop(L, 1);

  bc_status s = gen_call(ctx, "load_builtin", 0, 1, BC_ERR_SPEC);
  if (s != BC_OK) {
    if (err && errsz) snprintf(err, errsz, "built-in specs: %s", bc_last_error(ctx));
    return s;
  }
  /* names in load order */
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    lua_getfield(L, LUA_REGISTRYINDEX, "bc_gen");
    lua_getfield(L, -1, "format");
    lua_pushvalue(L, -3);
    lua_call(L, 1, 1);
    const bc_format *f;
    s = format_from_lua(ctx, &f);
    lua_pop(L, 3);
    if (s != BC_OK) {
      if (err && errsz) snprintf(err, errsz, "%s", bc_last_error(ctx));
      return s;
    }
  }
  lua_pop(L, 1);
  return BC_OK;
}

void bci_lua_close(bc_ctx *ctx) {
  if (ctx->L) lua_close(ctx->L);
  ctx->L = NULL;
}

/* ---- generator calls (ctx->lock held) ---- */

bc_status bci_lua_load_spec(bc_ctx *ctx, const char *path, const char *text, size_t len, const bc_format **out) {
  lua_State *L = ctx->L;
  lua_pushstring(L, path);
  lua_pushlstring(L, text, len);
  bc_status s = gen_call(ctx, "load_format", 2, 1, BC_ERR_SPEC);
  if (s != BC_OK) return s;
  s = format_from_lua(ctx, out);
  lua_pop(L, 1);
  return s;
}

bc_status bci_lua_kernel_names(bc_ctx *ctx, const char *arch, const char *format, void (*fn)(const char *, void *),
                               void *user) {
  lua_State *L = ctx->L;
  if (arch) lua_pushstring(L, arch); else lua_pushnil(L);
  if (format) lua_pushstring(L, format); else lua_pushnil(L);
  bc_status s = gen_call(ctx, "kernel_names", 2, 1, BC_ERR_ARG);
  if (s != BC_OK) return s;
  lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    fn(lua_tostring(L, -1), user);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return BC_OK;
}

bc_status bci_lua_generate(bc_ctx *ctx, const char *kernel, const char *arch, char **out, size_t *len) {
  lua_State *L = ctx->L;
  lua_pushstring(L, kernel);
  lua_pushstring(L, arch);
  bc_status s = gen_call(ctx, "generate", 2, 1, BC_ERR_ARG);
  if (s != BC_OK) return s;
  size_t n;
  const char *src = lua_tolstring(L, -1, &n);
  char *p = malloc(n + 1);
  if (!p) {
    lua_pop(L, 1);
    return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  }
  memcpy(p, src, n + 1);
  lua_pop(L, 1);
  *out = p;
  if (len) *len = n;
  return BC_OK;
}

bc_status bci_lua_launch(bc_ctx *ctx, const char *kernel, const char *arch, bci_launch *out) {
  lua_State *L = ctx->L;
  lua_pushstring(L, kernel);
  lua_pushstring(L, arch);
  bc_status s = gen_call(ctx, "launch", 2, 1, BC_ERR_ARG);
  if (s != BC_OK) return s;
  int t = lua_gettop(L);
  out->threads = (int)get_num(L, t, "threads");
  out->unroll = (int)get_num(L, t, "unroll");
  out->blocks_per_sm = (int)get_num(L, t, "blocks_per_sm");
  out->tile_rows = (int)get_num(L, t, "tile_rows");
  out->tile_cols = (int)get_num(L, t, "tile_cols");
  out->col_vec = (int)get_num(L, t, "col_vec");
  out->vec = (int)get_num(L, t, "vec");
  out->min_blocks = (int)get_num(L, t, "min_blocks");
  out->smem = (int)get_num(L, t, "smem");
  out->row_staged = (int)get_num(L, t, "row_staged");
  out->row_smem = (int)get_num(L, t, "row_smem");
  lua_pop(L, 1);
  return BC_OK;
}

bc_status bci_lua_call_str(bc_ctx *ctx, const char *fn, int argc, const char *const *argv, char **out) {
  lua_State *L = ctx->L;
  *out = NULL;
  for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]);
  bc_status s = gen_call(ctx, fn, argc, 1, BC_ERR_ARG);
  if (s != BC_OK) return s;
  size_t n = 0;
  const char *r = "";
  if (lua_type(L, -1) == LUA_TSTRING) r = lua_tolstring(L, -1, &n);
  else if (lua_type(L, -1) == LUA_TBOOLEAN && lua_toboolean(L, -1)) r = "1", n = 1;
  char *p = malloc(n + 1);
  if (p) memcpy(p, r, n + 1);
  lua_pop(L, 1);
  if (!p) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  *out = p;
  return BC_OK;
}

bc_status bci_lua_kernel_desc(bc_ctx *ctx, const char *kernel, bci_kernel_desc *out) {
  lua_State *L = ctx->L;
  lua_pushstring(L, kernel);
  bc_status s = gen_call(ctx, "kernel_desc", 1, 1, BC_ERR_ARG);
  if (s != BC_OK) return s;
  int t = lua_gettop(L);
  snprintf(out->family, sizeof out->family, "%s", get_str(L, t, "family"));
  snprintf(out->dtype, sizeof out->dtype, "%s", get_str(L, t, "dtype"));
  snprintf(out->dir, sizeof out->dir, "%s", get_str(L, t, "dir"));
  snprintf(out->format, sizeof out->format, "%s", get_str(L, t, "format"));
  snprintf(out->template_, sizeof out->template_, "%s", get_str(L, t, "template"));
  out->flat = (int)get_num(L, t, "flat");
  out->list = (int)get_num(L, t, "list");
  lua_pop(L, 1);
  return BC_OK;
}

/* The spec hash of a kernel's format ("" for format-independent kernels). */
bc_status bci_lua_spec_hash(bc_ctx *ctx, const char *kernel, char hash[65]) {
  lua_State *L = ctx->L;
  lua_pushstring(L, kernel);
  bc_status s = gen_call(ctx, "kernel_desc", 1, 1, BC_ERR_ARG);
  if (s != BC_OK) return s;
  const char *fname = get_str(L, lua_gettop(L), "format");
  hash[0] = 0;
  for (size_t i = 0; i < ctx->nformats; i++)
    if (strcmp(ctx->formats[i]->name, fname) == 0) snprintf(hash, 65, "%s", ctx->formats[i]->hash);
  lua_pop(L, 1);
  return BC_OK;
}
