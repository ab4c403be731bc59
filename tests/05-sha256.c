/* 05-sha256: SHA-256 (runtime/base/bc_sha256.c) against FIPS 180-4 / NIST example vectors, on the
 * portable code and, where the CPU has them, the SHA extensions; then both paths on inputs of
 * every length 0..300 and in uneven update pieces must give the same digest. */
#include <stdlib.h>
#include <string.h>

#include "base/bc_base.h"
#include "tap.h"

#define is_str(got, want, ...)                                                                   \
  do {                                                                                           \
    if (!ok(strcmp((got), (want)) == 0, __VA_ARGS__)) diag("got %s, expected %s", (got), (want)); \
  } while (0)

static void digest_hex(const void *p, size_t n, char out[65]) { bci_sha256_hex(p, n, out); }

/* the digest of data fed in pieces of 1, 2, 3, ... bytes */
static void digest_pieces(const unsigned char *p, size_t n, char out[65]) {
  bci_sha256 s;
  unsigned char d[32];
  bci_sha256_init(&s);
  for (size_t i = 0, k = 1; i < n; i += k, k = k % 97 + 1) bci_sha256_update(&s, p + i, k < n - i ? k : n - i);
  bci_sha256_final(&s, d);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void vectors(const char *path) {
  char h[65];
  digest_hex("", 0, h);
  is_str(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "%s: empty input", path);
  digest_hex("abc", 3, h);
  is_str(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "%s: \"abc\"", path);
  const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  digest_hex(m2, strlen(m2), h);
  is_str(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "%s: 448-bit message", path);
  const char *m3 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                   "mnopqrstnopqrstu";
  digest_hex(m3, strlen(m3), h);
  is_str(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1", "%s: 896-bit message", path);
  size_t n = 1000000;
  char *a = malloc(n);
  memset(a, 'a', n);
  digest_hex(a, n, h);
  is_str(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "%s: one million 'a'", path);
  free(a);
}

int main(void) {
  plan(5 + 5 + 2);
  bci_sha256_accel(0);
  vectors("portable");
  int ni = bci_sha256_accel(1);
  if (ni) vectors("SHA extensions");
  else for (int i = 0; i < 5; i++) ok(1, "SHA extensions # SKIP this CPU has none");
  diag("SHA extensions %s", ni ? "in use" : "not available: portable code only");

  /* every length 0..300 (all padding cases) and pieces: both paths agree */
  unsigned char buf[300];
  for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 131 + 7);
  int same = 1, pieces = 1;
  for (size_t n = 0; n <= 300; n++) {
    char p[65], q[65], r[65];
    bci_sha256_accel(0);
    digest_hex(buf, n, p);
    bci_sha256_accel(1);
    digest_hex(buf, n, q);
    digest_pieces(buf, n, r);
    if (strcmp(p, q)) { same = 0; diag("length %zu: portable %s, accelerated %s", n, p, q); }
    if (strcmp(p, r)) { pieces = 0; diag("length %zu: whole %s, in pieces %s", n, p, r); }
  }
  ok(same, "portable and %s digests agree for every length 0..300", ni ? "SHA-extension" : "(portable again)");
  ok(pieces, "digests of inputs fed in uneven pieces equal the whole-input digests");
  return done_testing();
}
