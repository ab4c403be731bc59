/* tests/tap.h: a small TAP producer for blockcast's tests (header-only).
 *   plan(n) / done_testing(); ok(cond, fmt...); is_int(got, want, name); is_str_has(hay, needle, name);
 *   is_bytes(got, want, n, name) prints the first mismatches; skip_all(reason); diag(fmt...).
 * Every failure prints file:line. */
#ifndef BC_TAP_H
#define BC_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed, tap_planned;

static inline void diag(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[16384];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) printf("# %s\n", line);
  fflush(stdout);
}

static inline void plan(int n) {
  tap_planned = n;
  printf("1..%d\n", n);
}

static inline void skip_all(const char *reason) {
  printf("1..0 # SKIP %s\n", reason);
  exit(0);
}

static inline int tap_ok_at(int cond, const char *file, int line, const char *fmt, ...) {
  char name[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  tap_n++;
  printf("%sok %d - %s\n", cond ? "" : "not ", tap_n, name);
  if (!cond) {
    tap_failed++;
    printf("#   Failed test at %s line %d.\n", file, line);
  }
  fflush(stdout);
  return cond;
}
#define ok(cond, ...) tap_ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                                   \
  do {                                                                                           \
    long long g_ = (long long)(got), w_ = (long long)(want);                                     \
    if (!tap_ok_at(g_ == w_, __FILE__, __LINE__, __VA_ARGS__)) diag("got %lld, expected %lld", g_, w_); \
  } while (0)

#define is_str_has(hay, needle, ...)                                                             \
  do {                                                                                           \
    const char *h_ = (hay), *n_ = (needle);                                                      \
    if (!tap_ok_at(h_ && strstr(h_, n_) != NULL, __FILE__, __LINE__, __VA_ARGS__))               \
      diag("expected to find \"%s\" in:\n%s", n_, h_ ? h_ : "(null)");                           \
  } while (0)

/* a blockcast call's status is `want` and the context's last error (a `ctx` in scope) contains
 * `needle`: two test points named `name` */
#define ERR_HAS(s, want, needle, name)                           \
  do {                                                           \
    bc_status s_ = (s);                                          \
    is_int(s_, want, "%s: status", name);                        \
    is_str_has(bc_last_error(ctx), needle, "%s: message", name); \
  } while (0)

/* compare n bytes; on mismatch report the count and the first 8 (index, got, expected) */
static inline int tap_bytes_at(const void *got, const void *want, size_t n, const char *file, int line, const char *name) {
  const unsigned char *g = got, *w = want;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += g[i] != w[i];
  int r = tap_ok_at(bad == 0, file, line, "%s", name);
  if (!r) {
    diag("%zu of %zu bytes differ; first mismatches:", bad, n);
    int shown = 0;
    for (size_t i = 0; i < n && shown < 8; i++)
      if (g[i] != w[i]) { diag("  byte %zu: got 0x%02X, expected 0x%02X", i, g[i], w[i]); shown++; }
  }
  return r;
}
#define is_bytes(got, want, n, name) tap_bytes_at((got), (want), (n), __FILE__, __LINE__, (name))

static inline int done_testing(void) {
  if (!tap_planned) printf("1..%d\n", tap_n);
  else if (tap_planned != tap_n) printf("# planned %d tests but ran %d\n", tap_planned, tap_n);
  return tap_failed || (tap_planned && tap_planned != tap_n) ? 1 : 0;
}
#endif
