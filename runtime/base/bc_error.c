/* base/bc_error.c: status names, the context's last-error message, dtype facts, counters. */
#include <string.h>

#include "base/bc_base.h"

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

/* The last error's message, per thread and context (like errno): threads that share a context
 * (the ranks of a local communicator, a server's workers) each read their own. A thread keeps
 * the messages of its last BCI_ERR_SLOTS contexts; contexts are told apart by their id, unique
 * in the process, so a new context at a freed one's address starts clean. */
#define BCI_ERR_SLOTS 4
static __thread struct {
  uint64_t id;
  char msg[BCI_ERR_MAX];
} err_slot[BCI_ERR_SLOTS];
static __thread unsigned err_next;

static char *err_buf(const bc_ctx *ctx) {
  for (int i = 0; i < BCI_ERR_SLOTS; i++)
    if (err_slot[i].id == ctx->id) return err_slot[i].msg;
  unsigned i = err_next++ % BCI_ERR_SLOTS;
  err_slot[i].id = ctx->id;
  err_slot[i].msg[0] = 0;
  return err_slot[i].msg;
}

bc_status bci_fail(bc_ctx *ctx, bc_status s, const char *fmt, ...) {
  if (ctx) {
    char tmp[BCI_ERR_MAX]; /* the message may quote the previous one */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(err_buf(ctx), tmp, sizeof tmp);
  }
  return s;
}

bc_status bci_fail_entry(bc_ctx *ctx, bc_status s, const char *fn, const char *noun, int64_t i) {
  if (!ctx) return s;
  char msg[BCI_ERR_MAX];
  const char *err = err_buf(ctx);
  size_t skip = strlen(fn);
  const char *inner = strncmp(err, fn, skip) == 0 && err[skip] == ':' && err[skip + 1] == ' ' ? err + skip + 2 : err;
  snprintf(msg, sizeof msg, "%s", inner);
  return bci_fail(ctx, s, "%s: %s %lld: %s", fn, noun, (long long)i, msg);
}

void bci_clear_error(bc_ctx *ctx) {
  if (ctx) err_buf(ctx)[0] = 0;
}

const char *bc_last_error(const bc_ctx *ctx) {
  if (!ctx) return "ctx is NULL: create one with bc_ctx_create()";
  return err_buf(ctx);
}

void bc_get_stats(const bc_ctx *ctx, bc_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (ctx) *out = ctx->stats;
}

void bci_log(bc_ctx *ctx, bc_log_level level, unsigned once, const char *fmt, ...) {
  if (!ctx) return;
  pthread_mutex_lock(&ctx->lock);
  bc_log_fn fn = ctx->log;
  void *user = ctx->log_user;
  int skip = !fn || (once && (ctx->log_once & once));
  if (!skip) ctx->log_once |= once;
  pthread_mutex_unlock(&ctx->lock);
  if (skip) return;
  char msg[BCI_ERR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(user, level, msg);
}
