/* bc_ctx.c: the context, error messages, formats registry and small helpers. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bc_internal.h"

const char *bc_status_string(bc_status s) {
  switch (s) {
  case BC_OK: return "BC_OK";
  case BC_ERR_ARG: return "BC_ERR_ARG";
  case BC_ERR_SPEC: return "BC_ERR_SPEC";
  case BC_ERR_UNSUPPORTED: return "BC_ERR_UNSUPPORTED";
  case BC_ERR_NOMEM: return "BC_ERR_NOMEM";
  case BC_ERR_CUDA: return "BC_ERR_CUDA";
  case BC_ERR_NVRTC: return "BC_ERR_NVRTC";
  case BC_ERR_NCCL: return "BC_ERR_NCCL";
  case BC_ERR_UNAVAILABLE: return "BC_ERR_UNAVAILABLE";
  case BC_ERR_INTERNAL: return "BC_ERR_INTERNAL";
  }
  return "BC_ERR_UNKNOWN";
}

const char *bc_dtype_name(bc_dtype t) {
  switch (t) {
  case BC_FP32: return "fp32";
  case BC_BF16: return "bf16";
  case BC_FP16: return "fp16";
  }
  return "unknown";
}

size_t bc_dtype_size(bc_dtype t) {
  switch (t) {
  case BC_FP32: return 4;
  case BC_BF16: return 2;
  case BC_FP16: return 2;
  }
  return 0;
}

bc_status bci_fail(bc_ctx *ctx, bc_status s, const char *fmt, ...) {
  if (ctx) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
  }
  return s;
}

void bci_clear_error(bc_ctx *ctx) {
  if (ctx) ctx->err[0] = 0;
}

const char *bc_last_error(const bc_ctx *ctx) {
  if (!ctx) return "ctx is NULL: create one with bc_ctx_create()";
  return ctx->err;
}

char *bci_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

int bci_mkdir_p(const char *path) {
  char p[1024];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return -1;
  for (char *s = p + 1; *s; s++) {
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
      *s = '/';
    }
  }
  return (mkdir(p, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

/* Write a then b to path through a unique temporary file in the same directory and a rename,
 * so a reader sees the old file or the whole new one, never a torn one; 0 or -1. */
int bci_write_atomic(const char *path, const void *a, size_t an, const void *b, size_t bn) {
  static unsigned counter; /* unique within a process; pid and thread id do the rest */
  char tmp[4200];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.%lu.%u.tmp", path, (long)getpid(), (unsigned long)pthread_self(),
               __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED)) >= (int)sizeof tmp)
    return -1;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  const void *part[2] = { a, b };
  size_t len[2] = { an, bn };
  int ok = 1;
  for (int i = 0; i < 2 && ok; i++) {
    size_t put = 0;
    while (ok && put < len[i]) {
      ssize_t w = write(fd, (const char *)part[i] + put, len[i] - put);
      if (w <= 0) ok = 0;
      else put += (size_t)w;
    }
  }
  ok &= close(fd) == 0;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

bc_status bci_read_file(bc_ctx *ctx, const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return bci_fail(ctx, BC_ERR_ARG, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return bci_fail(ctx, BC_ERR_ARG, "'%s' is not a regular file", path);
  }
  if (st.st_size > (64 << 20)) {
    fclose(f);
    return bci_fail(ctx, BC_ERR_ARG, "'%s' is %lld bytes; a spec file is at most 64 MiB", path, (long long)st.st_size);
  }
  char *buf = malloc((size_t)st.st_size + 1);
  if (!buf) {
    fclose(f);
    return bci_fail(ctx, BC_ERR_NOMEM, "out of memory reading '%s'", path);
  }
  size_t n = fread(buf, 1, (size_t)st.st_size, f);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return bci_fail(ctx, BC_ERR_ARG, "error reading '%s'", path);
  }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return BC_OK;
}

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
  bc_status s = bci_lua_open(ctx, errbuf, errbuf_size);
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
      if (s != BC_OK && errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "BLOCKCAST_SPEC_PATH entry '%s': %s", e, ctx->err);
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
  bci_kernels_free(ctx);
  bci_lua_close(ctx);
  for (size_t i = 0; i < ctx->nformats; i++) {
    free(ctx->formats[i]->description);
    free(ctx->formats[i]->spec_file);
    free(ctx->formats[i]);
  }
  free(ctx->formats);
  free(ctx->aot);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
}

bc_status bci_format_add(bc_ctx *ctx, bc_format *f) {
  if (ctx->nformats == ctx->cap_formats) {
    size_t cap = ctx->cap_formats ? 2 * ctx->cap_formats : 8;
    bc_format **p = realloc(ctx->formats, cap * sizeof *p);
    if (!p) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory adding format '%s'", f->name);
    ctx->formats = p;
    ctx->cap_formats = cap;
  }
  ctx->formats[ctx->nformats++] = f;
  return BC_OK;
}

bc_status bci_check_format(bc_ctx *ctx, const bc_format *fmt, const char *argname) {
  if (!fmt) return bci_fail(ctx, BC_ERR_ARG, "argument '%s' is NULL: get a format with bc_format_get() or bc_format_load()", argname);
  for (size_t i = 0; i < ctx->nformats; i++)
    if (ctx->formats[i] == fmt) return BC_OK;
  return bci_fail(ctx, BC_ERR_ARG, "argument '%s' is not a format of this context: formats belong to the context they came from", argname);
}

bc_status bc_format_get(bc_ctx *ctx, const char *name, const bc_format **out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!out) return bci_fail(ctx, BC_ERR_ARG, "bc_format_get: argument 'out' is NULL");
  *out = NULL;
  if (!name) return bci_fail(ctx, BC_ERR_ARG, "bc_format_get: argument 'name' is NULL; expected a format name such as \"fp8_e4m3_tensor\"");
  pthread_mutex_lock(&ctx->lock);
  for (size_t i = 0; i < ctx->nformats; i++) {
    if (strcmp(ctx->formats[i]->name, name) == 0) {
      *out = ctx->formats[i];
      pthread_mutex_unlock(&ctx->lock);
      return BC_OK;
    }
  }
  char known[1024] = "";
  for (size_t i = 0; i < ctx->nformats; i++) {
    size_t n = strlen(known);
    snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", ctx->formats[i]->name);
  }
  pthread_mutex_unlock(&ctx->lock);
  return bci_fail(ctx, BC_ERR_ARG, "bc_format_get: no format named '%s'; known formats: %s (or load a spec with bc_format_load)", name, known);
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

size_t bc_format_count(const bc_ctx *ctx) { return ctx ? ctx->nformats : 0; }

const bc_format *bc_format_at(const bc_ctx *ctx, size_t i) {
  if (!ctx || i >= ctx->nformats) return NULL;
  return ctx->formats[i];
}

bc_status bc_format_get_info(bc_ctx *ctx, const bc_format *fmt, bc_format_info *info) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  bc_status s = bci_check_format(ctx, fmt, "fmt");
  if (s != BC_OK) return s;
  if (!info) return bci_fail(ctx, BC_ERR_ARG, "bc_format_get_info: argument 'info' is NULL");
  memset(info, 0, sizeof *info);
  info->name = fmt->name;
  info->description = fmt->description;
  info->spec_file = fmt->spec_file;
  info->element = fmt->elem.name;
  info->element_bits = fmt->elem.bits;
  info->block = fmt->block;
  info->element_max = (float)fmt->elem.max_finite;
  info->has_rowwise = fmt->has_rowwise;
  info->has_columnwise = fmt->has_columnwise;
  info->columnwise_transposed = fmt->columnwise_transposed;
  info->block_rows = fmt->block_rows;
  info->block_cols = fmt->block_cols;
  info->scale_type = fmt->scale_type;
  static const char *const rules[] = { "amax", "rceil", "floor", "two_level" };
  info->scale_rule = rules[fmt->rule];
  info->scale_bytes = fmt->scale_bytes;
  info->two_level = fmt->rule == BCI_RULE_TWO_LEVEL;
  info->stochastic_rounding = fmt->sr_allowed;
  return BC_OK;
}

void bc_get_stats(const bc_ctx *ctx, bc_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (ctx) *out = ctx->stats;
}
