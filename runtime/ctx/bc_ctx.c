/* ctx/bc_ctx.c: the top floor: create and destroy a context (which reach every layer below),
 * and load formats from spec files and directories. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "multi/bc_multi.h"

bc_status bc_ctx_create(bc_ctx **out, char *errbuf, size_t errbuf_size) {
  if (errbuf && errbuf_size) errbuf[0] = 0;
  if (!out) {
    if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "bc_ctx_create: argument 'out' is NULL; pass the address of a bc_ctx *");
    return BC_ERR_ARG;
  }
  *out = NULL;
  bc_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "bc_ctx_create: out of memory");
    return BC_ERR_NOMEM;
  }
  pthread_mutex_init(&ctx->lock, NULL);
  static uint64_t next_id;
  ctx->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
  bc_status s = bci_list_init(ctx);
  if (s == BC_OK) s = bci_lua_open(ctx, errbuf, errbuf_size);
  else if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "%s", bc_last_error(ctx));
  if (s != BC_OK) {
    bc_ctx_destroy(ctx);
    return s;
  }
  /* specs added at run time by the environment */
  const char *sp = getenv("BLOCKCAST_SPEC_PATH");
  if (sp && *sp) {
    char *copy = bci_strdup(sp), *save = NULL;
    for (char *e = copy ? strtok_r(copy, ":", &save) : NULL; e && s == BC_OK; e = strtok_r(NULL, ":", &save)) {
      s = bc_spec_path_add(ctx, e);
      if (s != BC_OK && errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "BLOCKCAST_SPEC_PATH entry '%s': %s", e, bc_last_error(ctx));
    }
    if (!copy) s = BC_ERR_NOMEM;
    free(copy);
    if (s != BC_OK) {
      bc_ctx_destroy(ctx);
      return s;
    }
  }
  *out = ctx;
  return BC_OK;
}

void bc_set_log(bc_ctx *ctx, bc_log_fn fn, void *user) {
  if (!ctx) return;
  pthread_mutex_lock(&ctx->lock);
  ctx->log = fn;
  ctx->log_user = user;
  pthread_mutex_unlock(&ctx->lock);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bc_status bc_spec_path_add(bc_ctx *ctx, const char *path) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!path || !*path) return bci_fail(ctx, BC_ERR_ARG, "bc_spec_path_add: argument 'path' is empty; expected a spec file or a directory of specs");
  struct stat st;
  if (stat(path, &st) != 0) return bci_fail(ctx, BC_ERR_ARG, "spec path '%s': %s", path, strerror(errno));
  const bc_format *f;
  if (!S_ISDIR(st.st_mode)) return bc_format_load(ctx, path, &f);
  DIR *d = opendir(path);
  if (!d) return bci_fail(ctx, BC_ERR_ARG, "spec path '%s': %s", path, strerror(errno));
  char **names = NULL;
  size_t n = 0, cap = 0;
  bc_status s = BC_OK;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 5 || e->d_name[0] == '.' || strcmp(e->d_name + l - 4, ".lua") != 0) continue;
    if (strcmp(e->d_name, "elements.lua") == 0) continue; /* element encodings are built in */
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **nn = realloc(names, cap * sizeof *names);
      if (!nn) { s = bci_fail(ctx, BC_ERR_NOMEM, "out of memory"); break; }
      names = nn;
    }
    if (!(names[n] = bci_strdup(e->d_name))) { s = bci_fail(ctx, BC_ERR_NOMEM, "out of memory"); break; }
    n++;
  }
  closedir(d);
  if (s == BC_OK) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n && s == BC_OK; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, names[i]);
    s = bc_format_load(ctx, p, &f);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return s;
}

void bc_ctx_destroy(bc_ctx *ctx) {
  if (!ctx) return;
  bci_list_free(ctx);
  bci_kernels_free(ctx);
  bci_lua_close(ctx);
  bci_formats_free(ctx);
  bci_aot_free(ctx);
  free(ctx->tuning_text);
  free(ctx->tuning_path);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
}

bc_status bc_format_load(bc_ctx *ctx, const char *spec_path, const bc_format **out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_format_load: argument 'out' is NULL");
  *out = NULL;
  if (!spec_path) return bci_fail(ctx, BC_ERR_ARG, "bc_format_load: argument 'spec_path' is NULL; expected the path of a spec file");
  char *text;
  size_t len;
  bc_status s = bci_read_file(ctx, spec_path, &text, &len);
  if (s != BC_OK) return s;
  pthread_mutex_lock(&ctx->lock);
  s = bci_lua_load_spec(ctx, spec_path, text, len, out);
  pthread_mutex_unlock(&ctx->lock);
  free(text);
  return s;
}
