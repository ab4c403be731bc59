/* base/bc_sha256.c: SHA-256 (FIPS 180-4), for spec hashes, AOT payload checksums and cache keys.
 * Every disk-cache hit hashes the kernel's ~30 KB source for its key (issue 4: a hit within 1 ms),
 * so on x86-64 CPUs with the SHA extensions the compression function runs on them (~8x the
 * portable code); tests/05-sha256.c checks both paths against FIPS 180-4 vectors and each other. */
#include <string.h>

#include "base/bc_base.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BC_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block(uint32_t *hs, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = hs[0], b = hs[1], c = hs[2], d = hs[3], e = hs[4], f = hs[5], g = hs[6], h = hs[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  hs[0] += a; hs[1] += b; hs[2] += c; hs[3] += d;
  hs[4] += e; hs[5] += f; hs[6] += g; hs[7] += h;
}

static void blocks_portable(uint32_t *h, const unsigned char *p, size_t n) {
  for (; n; n--, p += 64) block(h, p);
}

#ifdef BC_SHA_NI
/* The same compression with the SHA extensions: the state as ABEF / CDGH quads, four rounds
 * (two sha256rnds2) per quad of message words; words 16..63 from sha256msg1 / sha256msg2. */
__attribute__((target("sha,sse4.1"))) static void blocks_ni(uint32_t *h, const unsigned char *p, size_t n) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
  __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                        /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                                             /* CDGH */
  for (; n; n--, p += 64) {
    const __m128i abef = s0, cdgh = s1;
    __m128i m[4];
    for (int i = 0; i < 16; i++) {
      if (i < 4) {
        m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
      } else {
        /* W[4i..4i+3] from W[4i-16..4i-1]: m[i%4] holds W[4i-16..], the ring the next three */
        __m128i w = _mm_sha256msg1_epu32(m[i & 3], m[(i + 1) & 3]);
        w = _mm_add_epi32(w, _mm_alignr_epi8(m[(i + 3) & 3], m[(i + 2) & 3], 4));
        m[i & 3] = _mm_sha256msg2_epu32(w, m[(i + 3) & 3]);
      }
      __m128i k = _mm_add_epi32(m[i & 3], _mm_loadu_si128((const __m128i *)&K[4 * i]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, k);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);                                                /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);                                               /* DCHG */
  _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xF0));              /* DCBA */
  _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));                 /* HGFE */
}

static int cpu_has_sha_ni(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) return 0; /* SSSE3, SSE4.1 */
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return (b >> 29) & 1u; /* SHA */
}
#endif

/* -1: not decided yet; 0: portable; 1: SHA extensions */
static int accel = -1;

int bci_sha256_accel(int mode) {
  if (mode == 0 || mode == 1) {
#ifdef BC_SHA_NI
    __atomic_store_n(&accel, mode == 1 ? cpu_has_sha_ni() : 0, __ATOMIC_RELAXED);
#else
    __atomic_store_n(&accel, 0, __ATOMIC_RELAXED);
#endif
  }
  int a = __atomic_load_n(&accel, __ATOMIC_RELAXED);
  if (a < 0) {
#ifdef BC_SHA_NI
    a = cpu_has_sha_ni();
#else
    a = 0;
#endif
    __atomic_store_n(&accel, a, __ATOMIC_RELAXED);
  }
  return a;
}

static void blocks(uint32_t *h, const unsigned char *p, size_t n) {
#ifdef BC_SHA_NI
  if (bci_sha256_accel(-1)) {
    blocks_ni(h, p, n);
    return;
  }
#endif
  blocks_portable(h, p, n);
}

void bci_sha256_init(bci_sha256 *s) {
  static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->fill = 0;
}

void bci_sha256_update(bci_sha256 *s, const void *data, size_t n) {
  const unsigned char *p = data;
  s->len += n;
  if (s->fill) {
    size_t take = 64 - s->fill;
    if (take > n) take = n;
    memcpy(s->buf + s->fill, p, take);
    s->fill += take;
    p += take;
    n -= take;
    if (s->fill < 64) return;
    blocks(s->h, s->buf, 1);
    s->fill = 0;
  }
  if (n >= 64) {
    blocks(s->h, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
  }
  memcpy(s->buf, p, n);
  s->fill = n;
}

void bci_sha256_final(bci_sha256 *s, unsigned char out[32]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80;
  bci_sha256_update(s, &pad, 1);
  unsigned char z = 0;
  while (s->fill != 56) bci_sha256_update(s, &z, 1);
  unsigned char lenb[8];
  for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
  bci_sha256_update(s, lenb, 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(s->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)s->h[i];
  }
}

void bci_sha256_hex(const void *data, size_t n, char out[65]) {
  bci_sha256 s;
  unsigned char d[32];
  bci_sha256_init(&s);
  bci_sha256_update(&s, data, n);
  bci_sha256_final(&s, d);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}
