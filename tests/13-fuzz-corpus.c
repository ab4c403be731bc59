/* 13-fuzz-corpus: every input in tests/fuzz/corpus/<target>/ (seeds and the inputs that once
 * crashed a target, kept as regressions) replayed through its fuzz target: no crash, no
 * sanitizer report (in the sanitizer tier), a message for every failure. */
#include <dirent.h>
#include <stdio.h>

#include "fuzz/targets.h"
#include "tap.h"

static int replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t)) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    static uint8_t buf[1 << 22];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fn(buf, len);
    n++;
  }
  closedir(d);
  return n;
}

static int replay(const char *target, int (*fn)(const uint8_t *, size_t)) {
  char dir[256];
  snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
  return replay_dir(dir, fn);
}

int main(void) {
  int n;
  n = replay("spec", fuzz_spec_one);
  int m = replay_dir("specs", fuzz_spec_one); /* the real specs are seeds too */
  ok(n > 0 && m > 0, "spec target: %d corpus inputs and %d specs replayed", n, m);
  n = replay("args", fuzz_args_one);
  ok(n > 0, "args target: %d corpus inputs replayed", n);
  n = replay("aot", fuzz_aot_one);
  ok(n > 0, "aot target: %d corpus inputs replayed", n);
  n = replay("cache", fuzz_cache_one);
  ok(n > 0, "cache target: %d corpus inputs replayed", n);
  /* the seeds reach the whole reader: the valid one is a hit, its flipped copy a miss */
  const char *kinds[2] = { "valid", "flipped" };
  for (int i = 0; i < 2; i++) {
    char path[128];
    snprintf(path, sizeof path, "tests/fuzz/corpus/cache/%s", kinds[i]);
    FILE *f = fopen(path, "rb");
    static uint8_t b[1 << 16];
    size_t len = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    fuzz_cache_one(b, len);
    void *out = NULL;
    size_t ol = 0;
    int hit = bci_cache_read(NULL, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", &out, &ol);
    free(out);
    ok(hit == (i == 0), "cache seed '%s' is a %s", kinds[i], i == 0 ? "hit" : "miss");
  }
  return done_testing();
}
