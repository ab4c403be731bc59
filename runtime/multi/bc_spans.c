/* multi/bc_spans.c: whether any two of a list's output buffers overlap.
 *
 * A list call records every byte range it will write, [lo, hi), and checks them all before it
 * launches anything. The ranges are sorted by lo, stably (equal starts keep the order they were
 * added in, which is by tensor), then one pass finds the first range that starts before the
 * furthest end so far. The sort is a least-significant-digit radix sort over only the bits in
 * which the starts differ (11 bits a pass; device addresses of one process differ in at most
 * ~40 bits: 4 passes), or none at all when the ranges come already sorted (outputs carved out
 * of one arena in order). libc's qsort of the 6,000 ranges of 1,000 tensors written in both
 * directions took 0.34-0.6 us a tensor, this 0.015-0.07 (tests/bench/bench_host). */
#include <string.h>

#include "multi/bc_multi.h"

#define DIGIT_BITS 11
#define DIGITS (1u << DIGIT_BITS)

/* small inputs: insertion sort (stable) */
static void insertion(bci_span *s, size_t n) {
  for (size_t i = 1; i < n; i++) {
    bci_span v = s[i];
    size_t j = i;
    while (j > 0 && s[j - 1].lo > v.lo) {
      s[j] = s[j - 1];
      j--;
    }
    s[j] = v;
  }
}

static void radix(bci_span *s, size_t n, bci_span *tmp) {
  uintptr_t diff = 0;
  for (size_t i = 1; i < n; i++) diff |= s[i].lo ^ s[0].lo;
  if (!diff) return;
  int low = __builtin_ctzll((unsigned long long)diff), high = 63 - __builtin_clzll((unsigned long long)diff);
  bci_span *src = s, *dst = tmp;
  size_t count[DIGITS];
  for (int shift = low; shift <= high; shift += DIGIT_BITS) {
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) count[(src[i].lo >> shift) & (DIGITS - 1)]++;
    size_t sum = 0;
    for (unsigned d = 0; d < DIGITS; d++) {
      size_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) dst[count[(src[i].lo >> shift) & (DIGITS - 1)]++] = src[i];
    bci_span *t = src;
    src = dst;
    dst = t;
  }
  if (src != s) memcpy(s, src, n * sizeof *s);
}

int bci_spans_overlap(bci_span *s, size_t n, bci_span *tmp, size_t *a, size_t *b) {
  if (n < 2) return 0;
  size_t i = 1;
  while (i < n && s[i - 1].lo <= s[i].lo) i++;
  if (i < n) {
    if (n <= 32) insertion(s, n);
    else radix(s, n, tmp);
  }
  size_t far = 0; /* the range reaching furthest so far */
  for (i = 1; i < n; i++) {
    if (s[i].lo < s[far].hi) {
      *a = far;
      *b = i;
      return 1;
    }
    if (s[i].hi > s[far].hi) far = i;
  }
  return 0;
}
