/* 06-udiv: bci_udiv31 (runtime/base/bc_base.h), the multiplier and shift with which the block
 * quantize kernels find their tile's row (templates/common.cuh: bc_udiv31 computes the same
 * (t * m) >> s), equals t / d: for every d up to 1024 every t below 3 d and the 3 d below 2^31;
 * for powers of two, their neighbours and random d up to 2^31 - 1, the quotients' boundaries
 * (k d - 1, k d) around random k and at both ends; and 10 million random pairs. */
#include <stdlib.h>

#include "base/bc_base.h"
#include "tap.h"

#define TOP 0x80000000u /* t < 2^31 */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

/* the first t below 2^31 where the kernel's quotient differs from t / d, or TOP */
static uint32_t first_bad(uint32_t d, uint32_t lo, uint32_t hi) {
  uint32_t m, s;
  bci_udiv31(d, &m, &s);
  for (uint32_t t = lo; t < hi && t < TOP; t++)
    if ((uint32_t)(((uint64_t)t * m) >> s) != t / d) return t;
  return TOP;
}

/* the quotient boundaries k d - 1 and k d for k in [k0, k1) */
static uint32_t bad_at_multiples(uint32_t d, uint64_t k0, uint64_t k1) {
  uint32_t m, s;
  bci_udiv31(d, &m, &s);
  for (uint64_t k = k0; k < k1; k++) {
    for (int e = -1; e <= 0; e++) {
      int64_t t = (int64_t)(k * d) + e;
      if (t < 0 || t >= (int64_t)TOP) continue;
      if ((uint32_t)(((uint64_t)t * m) >> s) != (uint32_t)t / d) return (uint32_t)t;
    }
  }
  return TOP;
}

int main(void) {
  uint32_t bad_d = 0, bad_t = TOP;
  for (uint32_t d = 1; d <= 1024 && bad_t == TOP; d++) {
    bad_t = first_bad(d, 0, 3 * d);
    if (bad_t == TOP) bad_t = first_bad(d, TOP - 3 * d, TOP);
    bad_d = d;
  }
  if (!ok(bad_t == TOP, "every d <= 1024: t < 3 d and the 3 d below 2^31")) diag("d %u, t %u", bad_d, bad_t);

  uint32_t ds[256];
  int n = 0;
  for (int l = 0; l <= 31; l++) {
    uint32_t p = 1u << l;
    if (p < TOP) ds[n++] = p;
    if (p + 1 < TOP) ds[n++] = p + 1;
    if (p > 2) ds[n++] = p - 1;
  }
  ds[n++] = TOP - 1;
  const int fixed = n;
  while (n < 256) ds[n++] = 1 + rnd() % (TOP - 1);
  bad_t = TOP;
  for (int i = 0; i < n && bad_t == TOP; i++) {
    uint32_t d = ds[i];
    uint64_t kmax = (TOP - 1) / d + 1, k = kmax > 2000 ? 1 + rnd() % (kmax - 2000) : 1;
    bad_t = bad_at_multiples(d, 0, kmax < 1000 ? kmax + 1 : 1000);
    if (bad_t == TOP && kmax > 1000) bad_t = bad_at_multiples(d, kmax - 1000, kmax + 1);
    if (bad_t == TOP && kmax > 2000) bad_t = bad_at_multiples(d, k, k + 1000);
    if (bad_t == TOP) bad_t = first_bad(d, TOP - 4096, TOP);
    bad_d = d;
  }
  if (!ok(bad_t == TOP, "powers of two, their neighbours, 2^31 - 1 and %d random d: every quotient boundary near 0, 2^31 and "
          "random k", n - fixed))
    diag("d %u, t %u", bad_d, bad_t);

  long wrong = 0;
  for (long i = 0; i < 10000000; i++) {
    uint32_t d = 1 + rnd() % (rnd() % 2 ? 4096 : TOP - 1), t = rnd() % TOP, m, s;
    bci_udiv31(d, &m, &s);
    if ((uint32_t)(((uint64_t)t * m) >> s) != t / d && !wrong++) diag("d %u, t %u", d, t);
  }
  ok(wrong == 0, "10 million random (d, t): %ld wrong", wrong);

  uint32_t m, s;
  bci_udiv31(1, &m, &s);
  ok(m == 0x80000000u && s == 31, "d = 1: m = 2^31, s = 31 (got %#x, %u)", m, s);
  bci_udiv31(TOP - 1, &m, &s);
  ok(s == 62 && m > 0x80000000u, "d = 2^31 - 1: s = 62, m just above 2^31 (got %#x, %u)", m, s);
  return done_testing();
}
