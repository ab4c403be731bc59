/* jit/bc_aot.c: the set of kernels compiled ahead of time by build.sh, embedded in the library as
 * one archive (see bc_jit.h for its layout). Indexed once per context; a payload's
 * checksum is verified when it is first used. */
#include <stdlib.h>
#include <string.h>

#include "jit/bc_jit.h"

#define MAGIC "BCAOT006"

static int rd(const unsigned char **p, const unsigned char *end, void *dst, size_t n) {
  if ((size_t)(end - *p) < n) return 0;
  memcpy(dst, *p, n);
  *p += n;
  return 1;
}

bc_status bci_aot_parse(bc_ctx *ctx, const unsigned char *p, const unsigned char *end, bci_aot_entry **out,
                        size_t *count_out) {
  *out = NULL;
  *count_out = 0;
  if (end - p == 0) return BC_OK; /* built without AOT kernels */
  char magic[8];
  uint32_t count;
  if (!rd(&p, end, magic, 8) || memcmp(magic, MAGIC, 8) != 0 || !rd(&p, end, &count, 4))
    return bci_fail(ctx, BC_ERR_INTERNAL, "the AOT archive has a bad header (expected %s); rebuild with ./build.sh", MAGIC);
  /* every entry takes at least 2 + 1 + 2 + 1 + 65 + 65 + 44 + 8 + 32 bytes: a count the data cannot hold is corrupt */
  if (count > (size_t)(end - p) / 220)
    return bci_fail(ctx, BC_ERR_INTERNAL, "the AOT archive claims %u entries in %zu bytes; it is corrupt, rebuild with ./build.sh",
                    count, (size_t)(end - p));
  bci_aot_entry *es = calloc(count ? count : 1, sizeof *es);
  if (!es) return bci_fail(ctx, BC_ERR_NOMEM, "out of memory");
  for (uint32_t i = 0; i < count; i++) {
    uint16_t nl, al;
    int32_t l[11];
    uint64_t size;
    const unsigned char *name, *arch, *hash, *key;
    if (!rd(&p, end, &nl, 2)) goto bad;
    name = p;
    if ((size_t)(end - p) < nl) goto bad;
    p += nl;
    if (!rd(&p, end, &al, 2)) goto bad;
    arch = p;
    if ((size_t)(end - p) < al) goto bad;
    p += al;
    hash = p;
    if ((size_t)(end - p) < 130) goto bad;
    p += 65;
    key = p;
    p += 65;
    if (!rd(&p, end, l, sizeof l) || !rd(&p, end, &size, 8)) goto bad;
    if ((size_t)(end - p) < 32 || (size_t)(end - p) - 32 < size) goto bad;
    /* names are stored NUL-terminated (nl includes the NUL) */
    if (nl == 0 || name[nl - 1] || al == 0 || arch[al - 1] || hash[64] || key[64]) goto bad;
    es[i].name = (const char *)name;
    es[i].arch = (const char *)arch;
    es[i].spec_hash = (const char *)hash;
    es[i].key = (const char *)key;
    es[i].launch = (bci_launch){ l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10] };
    es[i].size = size;
    es[i].data = p + 32; /* sha256 first, then the payload */
    p += 32 + size;
  }
  *out = es;
  *count_out = count;
  return BC_OK;
bad:
  free(es);
  return bci_fail(ctx, BC_ERR_INTERNAL, "the AOT archive is truncated or corrupt; rebuild with ./build.sh");
}

bc_status bci_aot_index(bc_ctx *ctx) {
  if (ctx->aot_indexed) return BC_OK;
  ctx->aot_indexed = 1;
  return bci_aot_parse(ctx, bci_aot_blob, bci_aot_blob_end, &ctx->aot, &ctx->naot);
}

const bci_aot_entry *bci_aot_find(bc_ctx *ctx, const char *name, const char *arch) {
  for (size_t i = 0; i < ctx->naot; i++)
    if (strcmp(ctx->aot[i].name, name) == 0 && strcmp(ctx->aot[i].arch, arch) == 0) return &ctx->aot[i];
  return NULL;
}

size_t bci_aot_count(bc_ctx *ctx) { return ctx->naot; }
const bci_aot_entry *bci_aot_at(bc_ctx *ctx, size_t i) { return i < ctx->naot ? &ctx->aot[i] : NULL; }

void bci_aot_free(bc_ctx *ctx) {
  free(ctx->aot);
  ctx->aot = NULL;
  ctx->naot = 0;
  ctx->aot_indexed = 0;
}
