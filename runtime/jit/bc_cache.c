/* jit/bc_cache.c: the on-disk kernel cache.
 *
 * Key: sha256 over the generated source, the sorted NVRTC options, the NVRTC version, a compiler
 * fingerprint (the archs NVRTC supports) and the cache format version. Location:
 * $BLOCKCAST_CACHE_DIR, else $XDG_CACHE_HOME/blockcast, else ~/.cache/blockcast; one file per
 * key, <dir>/<key[0..1]>/<key>.bck:
 *   "BCCACHE1" | key (64 hex) | u64 payload size | sha256(payload) | payload
 * Files are written to a unique temp name in the same directory and renamed into place, so a
 * reader never sees a torn file; a reader verifies magic, key, size and checksum, and treats
 * anything else as a miss (the entry is then compiled again and replaced). A hit refreshes the
 * file's mtime; when the cache grows past its cap ($BLOCKCAST_CACHE_MAX_MB, default 1024) the
 * least recently used files are removed. Every failure of the cache is a miss, never an error:
 * the kernel is compiled and used anyway (a directory path too long, an entry that is not a
 * regular file, a FIFO among them, is a miss too). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/bc_jit.h"

#define MAGIC "BCCACHE1"
#define HEADER (8 + 64 + 8 + 32)

bc_status bci_cache_dir(bc_ctx *ctx, char *out, size_t n) {
  static const char *vars[3] = { "BLOCKCAST_CACHE_DIR", "XDG_CACHE_HOME", "HOME" };
  static const char *tails[3] = { "", "/blockcast", "/.cache/blockcast" };
  if (n > BCI_CACHE_DIR_MAX) n = BCI_CACHE_DIR_MAX; /* the same limit for every caller */
  for (int i = 0; i < 3; i++) {
    const char *d = getenv(vars[i]);
    if (!d || !*d) continue;
    int w = snprintf(out, n, "%s%s", d, tails[i]);
    if (w < 0 || (size_t)w >= n) {
      out[0] = 0;
      return bci_fail(ctx, BC_ERR_ARG, "the cache directory from $%s is %d bytes long; at most %zu fit (set BLOCKCAST_CACHE_DIR to "
                      "a shorter path)", vars[i], w, n - 1);
    }
    return BC_OK;
  }
  return bci_fail(ctx, BC_ERR_UNAVAILABLE, "no cache directory: set BLOCKCAST_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

static void entry_path(const char *dir, const char *key, char *out, size_t n, char *sub, size_t subn) {
  snprintf(sub, subn, "%s/%.2s", dir, key);
  snprintf(out, n, "%s/%.2s/%s.bck", dir, key, key);
}

void bci_cache_key(const char *src, size_t len, const char *const *opts, int nopts, const char *compiler, char out[65]) {
  /* options sorted (insertion sort on a copy of the pointers) */
  const char *o[16];
  int n = nopts < 16 ? nopts : 16;
  for (int i = 0; i < n; i++) {
    const char *x = opts[i];
    int j = i;
    while (j > 0 && strcmp(o[j - 1], x) > 0) {
      o[j] = o[j - 1];
      j--;
    }
    o[j] = x;
  }
  bci_sha256 s;
  unsigned char d[32];
  bci_sha256_init(&s);
  bci_sha256_update(&s, "blockcast-cache-v1\n", 19);
  bci_sha256_update(&s, compiler, strlen(compiler) + 1);
  for (int i = 0; i < n; i++) bci_sha256_update(&s, o[i], strlen(o[i]) + 1);
  bci_sha256_update(&s, src, len);
  bci_sha256_final(&s, d);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The entry at path for key: 1 whole and valid (*out malloc'ed, when out is not NULL), 0 not,
 * -1 absent */
static int read_entry(const char *path, const char *key, void **out, size_t *len) {
  /* O_NONBLOCK: a FIFO in the cache must not hang the open; only regular files are entries */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? -1 : 0;
  struct stat st;
  unsigned char hdr[HEADER];
  int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= HEADER && read(fd, hdr, HEADER) == HEADER &&
           memcmp(hdr, MAGIC, 8) == 0 && memcmp(hdr + 8, key, 64) == 0;
  uint64_t size = 0;
  if (ok) {
    memcpy(&size, hdr + 72, 8);
    ok = size == (uint64_t)st.st_size - HEADER && size > 0 && size < ((uint64_t)1 << 31);
  }
  unsigned char *buf = NULL;
  if (ok) {
    buf = malloc(size);
    ok = buf != NULL;
    size_t got = 0;
    while (ok && got < size) {
      ssize_t r = read(fd, buf + got, size - got);
      if (r <= 0) ok = 0;
      else got += (size_t)r;
    }
  }
  close(fd);
  if (ok) {
    unsigned char d[32];
    bci_sha256 s;
    bci_sha256_init(&s);
    bci_sha256_update(&s, buf, size);
    bci_sha256_final(&s, d);
    ok = memcmp(d, hdr + 80, 32) == 0;
  }
  if (!ok || !out) {
    free(buf);
    return ok;
  }
  *out = buf;
  *len = size;
  return 1;
}

/* 1 hit (*out malloc'ed), 0 miss */
int bci_cache_read(bc_ctx *ctx, const char *key, void **out, size_t *len) {
  char dir[BCI_CACHE_DIR_MAX], sub[1000], path[1100];
  if (bci_cache_dir(NULL, dir, sizeof dir) != BC_OK) return 0;
  entry_path(dir, key, path, sizeof path, sub, sizeof sub);
  int got = read_entry(path, key, out, len);
  if (got < 0) return 0; /* absent: a plain miss */
  if (got == 0) {
    if (ctx) ctx->stats.cache_bad++;
    return 0;
  }
  /* least recently used: a hit refreshes the mtime */
  utimensat(AT_FDCWD, path, NULL, 0);
  return 1;
}

static int is_hex64(const char *s) {
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

int bci_cache_entry_name(const char *path, const char *name) {
  size_t l = strlen(name), pl = strlen(path);
  /* <dir>/<key[0..1]>/<key>.bck: the file name, and the subdirectory's two digits before it */
  return l == 68 && strcmp(name + 64, ".bck") == 0 && is_hex64(name) && pl >= l + 4 && path[pl - l - 1] == '/' &&
         path[pl - l - 4] == '/' && path[pl - l - 3] == name[0] && path[pl - l - 2] == name[1];
}

int bci_cache_verify_file(const char *path, const char *name) {
  if (!bci_cache_entry_name(path, name)) return 0;
  char key[65];
  memcpy(key, name, 64);
  key[64] = 0;
  return read_entry(path, key, NULL, NULL) == 1;
}

int bci_cache_tmp_name(const char *name) {
  /* <64 hex>.bck.<pid>.<thread>.<n>.tmp */
  size_t l = strlen(name);
  if (l < 68 + 4 + 6 || !is_hex64(name) || strncmp(name + 64, ".bck.", 5) != 0 || strcmp(name + l - 4, ".tmp") != 0) return 0;
  int dots = 0;
  for (size_t i = 69; i < l - 4; i++) {
    if (name[i] == '.') dots++;
    else if (name[i] < '0' || name[i] > '9') return 0;
  }
  return dots == 2;
}

typedef struct cfile {
  char path[1300];
  time_t mtime;
  off_t size;
} cfile;

static int by_mtime(const void *a, const void *b) {
  const cfile *x = a, *y = b;
  return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Call fn(path, file name, user) for every file of the cache's subdirectories <dir>/<xx>/. */
void bci_cache_foreach(const char *dir, void (*fn)(const char *path, const char *name, void *user), void *user) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strlen(e->d_name) != 2 || e->d_name[0] == '.') continue;
    char sub[1000];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    DIR *s = opendir(sub);
    if (!s) continue;
    struct dirent *f;
    while ((f = readdir(s))) {
      if (f->d_name[0] == '.') continue;
      char path[1300];
      snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
      fn(path, f->d_name, user);
    }
    closedir(s);
  }
  closedir(d);
}

typedef struct scan {
  cfile *v;
  size_t n, cap;
  uint64_t total;
} scan;

static void scan_one(const char *path, const char *name, void *user) {
  scan *sc = user;
  if (bci_cache_tmp_name(name)) {
    /* a writer's temporary file: in flight, or left by a writer that was killed (an hour old) */
    struct stat st;
    if (stat(path, &st) == 0 && st.st_mtime < time(NULL) - 3600) unlink(path);
    return;
  }
  if (!bci_cache_entry_name(path, name)) return; /* only the cache's own entries count */
  if (sc->n == sc->cap) {
    size_t cap = sc->cap ? 2 * sc->cap : 256;
    cfile *nv = realloc(sc->v, cap * sizeof *nv);
    if (!nv) return;
    sc->v = nv;
    sc->cap = cap;
  }
  struct stat st;
  if (stat(path, &st) != 0) return;
  cfile *c = &sc->v[sc->n++];
  snprintf(c->path, sizeof c->path, "%s", path);
  c->mtime = st.st_mtime;
  c->size = st.st_size;
  sc->total += (uint64_t)st.st_size;
}

/* Scan the cache: count, bytes, and (when cap > 0 and bytes > cap) remove the least recently
 * used files until under 90% of the cap. Returns the number of files removed. */
size_t bci_cache_scan(const char *dir, size_t *files, uint64_t *bytes, uint64_t cap) {
  scan sc = { NULL, 0, 0, 0 };
  size_t removed = 0;
  bci_cache_foreach(dir, scan_one, &sc);
  if (cap && sc.total > cap) {
    qsort(sc.v, sc.n, sizeof *sc.v, by_mtime);
    for (size_t i = 0; i < sc.n && sc.total > cap / 10 * 9; i++) {
      if (unlink(sc.v[i].path) == 0) {
        sc.total -= (uint64_t)sc.v[i].size;
        removed++;
      }
    }
  }
  if (files) *files = sc.n - removed;
  if (bytes) *bytes = sc.total;
  free(sc.v);
  return removed;
}

uint64_t bci_cache_cap(int *bad) {
  const char *c = getenv("BLOCKCAST_CACHE_MAX_MB");
  if (bad) *bad = 0;
  if (!c || !*c) return (uint64_t)1024 << 20;
  char *end = NULL;
  errno = 0;
  unsigned long long mb = strtoull(c, &end, 10);
  if (errno || end == c || *end || c[0] == '-' || mb < 1 || mb > ((unsigned long long)1 << 40)) {
    if (bad) *bad = 1;
    return (uint64_t)1024 << 20;
  }
  return (uint64_t)mb << 20;
}

/* Best effort: a failure to write is not an error (the kernel is used anyway). */
void bci_cache_write(bc_ctx *ctx, const char *key, const void *data, size_t len) {
  char dir[BCI_CACHE_DIR_MAX], sub[1000], path[1100];
  if (bci_cache_dir(NULL, dir, sizeof dir) != BC_OK) return;
  entry_path(dir, key, path, sizeof path, sub, sizeof sub);
  if (bci_mkdir_p(sub) != 0) return;
  unsigned char hdr[HEADER];
  memcpy(hdr, MAGIC, 8);
  memcpy(hdr + 8, key, 64);
  uint64_t size = len;
  memcpy(hdr + 72, &size, 8);
  bci_sha256 s;
  bci_sha256_init(&s);
  bci_sha256_update(&s, data, len);
  bci_sha256_final(&s, hdr + 80);
  if (bci_write_atomic(path, hdr, HEADER, data, len) != 0) return;
  if (ctx) ctx->stats.cache_writes++;
  bci_cache_scan(dir, NULL, NULL, bci_cache_cap(NULL));
}
