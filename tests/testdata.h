/* tests/testdata.h: random test inputs with special values, and byte comparison with a report of
 * the first differences; shared by the GPU tests. */
#ifndef BC_TEST_TESTDATA_H
#define BC_TEST_TESTDATA_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "blockcast.h"
#include "tap.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* kind 0: finite data with 0/-0/denormals/NaN; kind 1: plus +-Inf and +-dtype max;
 * kind 2: like 0 but large (past the saturation point at scale 1) */
static inline void fill(void *buf, bc_dtype dt, size_t n, int kind) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next();
    int special = (r & 127) == 0;
    unsigned sign = (unsigned)(r >> 8) & 1, sel = (unsigned)(r >> 9) & 7;
    uint32_t mant = (uint32_t)(r >> 20);
    int e = (int)((r >> 12) % 31) - 20; /* 2^-20 .. 2^10 */
    if (kind == 2) e += 8;
    if (dt == BC_FP32) {
      uint32_t b = (sign << 31) | ((uint32_t)(127 + e) << 23) | (mant & 0x7FFFFF);
      if (special) {
        uint32_t sp[8] = { 0, 0x80000000u, 0x00000001u | (mant & 0x7FFFFF), 0x7FC00000u, 0xFFC00001u,
                           kind == 1 ? 0x7F800000u : 0x3F800000u, kind == 1 ? 0xFF800000u : 0x43E00000u,
                           kind == 1 ? 0x7F7FFFFFu : 0x43E80000u };
        b = sp[sel] ^ (sel > 4 ? 0 : 0);
      }
      ((uint32_t *)buf)[i] = b;
    } else if (dt == BC_BF16) {
      uint16_t b = (uint16_t)((sign << 15) | ((unsigned)(127 + e) << 7) | (mant & 0x7F));
      if (special) {
        uint16_t sp[8] = { 0, 0x8000, (uint16_t)(0x0001 | (mant & 0x7F)), 0x7FC0, 0xFFC1,
                           kind == 1 ? 0x7F80 : 0x3F80, kind == 1 ? 0xFF80 : 0x43E0, kind == 1 ? 0x7F7F : 0x43E8 };
        b = sp[sel];
      }
      ((uint16_t *)buf)[i] = b;
    } else {
      int he = 15 + (e < -14 ? -14 : e > 15 ? 15 : e);
      uint16_t b = (uint16_t)((sign << 15) | ((unsigned)he << 10) | (mant & 0x3FF));
      if (special) {
        uint16_t sp[8] = { 0, 0x8000, (uint16_t)(0x0001 | (mant & 0x3FF)), 0x7E00, 0xFE01,
                           kind == 1 ? 0x7C00 : 0x3C00, kind == 1 ? 0xFC00 : 0x5F00, kind == 1 ? 0x7BFF : 0x5F40 };
        b = sp[sel];
      }
      ((uint16_t *)buf)[i] = b;
    }
  }
}

/* whether the collectives and the sharded cast take a format (runtime/comm: bci_comm_format_ok):
 * 8- or 4-bit elements, and block amaxes that ignore NaN (nan_policy "satfinite") */
static inline int comm_takes(const bc_format_info *i) {
  return (i->element_bits == 8 || i->element_bits == 4) && strcmp(i->nan_policy, "scale_nan") != 0;
}

static inline int first_diff_report(const char *what, const void *got, const void *want, size_t n) {
  const uint8_t *g = got, *w = want;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (g[i] != w[i]) { if (!bad) first = i; bad++; }
  if (bad) {
    diag("  %s: %zu of %zu bytes differ; first at byte %zu: got 0x%02X expected 0x%02X", what, bad, n, first, g[first], w[first]);
    int shown = 0;
    for (size_t i = first + 1; i < n && shown < 4; i++)
      if (g[i] != w[i]) { diag("    byte %zu: got 0x%02X expected 0x%02X", i, g[i], w[i]); shown++; }
  }
  return bad == 0;
}

#ifdef BC_TEST_GPU_H
/* n bytes of device buffers got and want equal (else first_diff_report's lines) */
static inline int same_dev(const char *what, const void *got, const void *want, size_t n) {
  if (!n) return 1;
  uint8_t *a = malloc(n), *b = malloc(n);
  CK(cudaMemcpy(a, got, n, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b, want, n, cudaMemcpyDeviceToHost));
  int r = first_diff_report(what, a, b, n);
  free(a);
  free(b);
  return r;
}
#endif

#endif
