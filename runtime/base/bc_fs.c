/* base/bc_fs.c: files and strings: mkdir -p, atomic writes (temp + rename), whole-file reads. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bc_base.h"

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
  /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused below) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    int e = errno;
    if (fd >= 0) close(fd);
    return bci_fail(ctx, BC_ERR_ARG, "cannot open '%s': %s", path, strerror(e));
  }
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
