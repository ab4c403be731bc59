/* 19-comm-nccl: the NCCL transport's host side, no GPU needed: communicator ids and their hex
 * form, the argument checks of bc_comm_create_nccl / bc_comm_bootstrap (made before NCCL is
 * opened or a GPU is asked for), the bootstrap's env and file paths failing with messages that
 * name what was wrong. Passes with or without libnccl.so.2 and a GPU; nothing crashes. */
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "tap.h"

static bc_ctx *ctx;

static int is_hex256(const char *s) {
  if (strlen(s) != 256) return 0;
  for (int i = 0; i < 256; i++)
    if (!strchr("0123456789abcdef", s[i])) return 0;
  return 1;
}


/* ---- the local transport and the collectives' checks, without a GPU ---- */

typedef struct rk {
  bc_comm *comm;
  int64_t n;
  bc_status s;
  char err[1024];
} rk;

static void *allreduce_rank(void *p) {
  rk *r = p;
  r->s = bc_amax_allreduce(ctx, r->comm, (float *)(uintptr_t)256, r->n, NULL);
  snprintf(r->err, sizeof r->err, "%s", bc_last_error(ctx));
  return NULL;
}

/* a spec written to a temporary file and loaded (NULL when it does not load) */
static const bc_format *load_spec_text(const char *tag, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "/tmp/bc-%s-%ld.lua", tag, (long)getpid());
  FILE *fp = fopen(path, "wb");
  if (!fp) return NULL;
  fputs(text, fp);
  fclose(fp);
  const bc_format *f = NULL;
  if (bc_format_load(ctx, path, &f) != BC_OK) f = NULL;
  unlink(path);
  return f;
}

static void local_and_collectives(void) {
  bc_comm *c[64];
  ERR_HAS(bc_comm_create_local(ctx, 0, c), BC_ERR_ARG, "nranks is 0; expected 1 to 64 ranks", "create_local 0 ranks");
  ERR_HAS(bc_comm_create_local(ctx, 65, c), BC_ERR_ARG, "expected 1 to 64 ranks", "create_local 65 ranks");
  ERR_HAS(bc_comm_create_local(ctx, 2, NULL), BC_ERR_ARG, "'comms' is NULL", "create_local NULL comms");
  is_int(bc_comm_create_local(NULL, 2, c), BC_ERR_ARG, "NULL ctx: create_local");
  is_int(bc_comm_create_local(ctx, 3, c), BC_OK, "create_local 3 ranks");
  bc_comm_info info;
  is_int(bc_comm_get_info(ctx, c[2], &info), BC_OK, "get_info");
  ok(info.transport == BC_TRANSPORT_LOCAL && info.rank == 2 && info.size == 3 && info.bytes_sent == 0 && info.collectives == 0,
     "local rank 2 of 3, nothing sent yet");
  ERR_HAS(bc_comm_get_info(ctx, NULL, &info), BC_ERR_ARG, "'comm' is NULL", "get_info NULL comm");
  for (int r = 0; r < 3; r++) bc_comm_destroy(c[r]);
  bc_comm_destroy(NULL);

  /* the collectives' own checks (no rendezvous needed to fail them) */
  bc_comm_create_local(ctx, 1, c);
  const bc_format *f8, *mx;
  bc_format_get(ctx, "fp8_e4m3_tensor", &f8);
  bc_format_get(ctx, "mxfp8_e4m3", &mx);
  float *fake = (float *)(uintptr_t)256;
  ERR_HAS(bc_amax_allreduce(ctx, NULL, fake, 1, NULL), BC_ERR_ARG, "'comm' is NULL", "amax_allreduce NULL comm");
  ERR_HAS(bc_amax_allreduce(ctx, c[0], fake, -1, NULL), BC_ERR_ARG, "n is -1", "amax_allreduce n < 0");
  ERR_HAS(bc_amax_allreduce(ctx, c[0], NULL, 2, NULL), BC_ERR_ARG, "'amax' is NULL or misaligned", "amax_allreduce NULL amax");
  is_int(bc_amax_allreduce(ctx, c[0], NULL, 0, NULL), BC_OK, "amax_allreduce n = 0 does nothing");
  bc_tensor x = { fake, BC_BF16, 4, 64, 0 };
  int64_t rows1[1] = { 4 };
  bc_qtensor q = { mx, 4, 64, fake, fake, NULL, NULL, NULL, NULL, 0, 0, 0, 0 };
  ERR_HAS(bc_all_gather(ctx, NULL, &x, rows1, &q, NULL), BC_ERR_ARG, "'comm' is NULL", "all_gather NULL comm");
  ERR_HAS(bc_all_gather(ctx, c[0], NULL, rows1, &q, NULL), BC_ERR_ARG, "'x' is NULL", "all_gather NULL x");
  ERR_HAS(bc_all_gather(ctx, c[0], &x, NULL, &q, NULL), BC_ERR_ARG, "'rows' is NULL", "all_gather NULL rows");
  int64_t bad_rows[1] = { 5 };
  ERR_HAS(bc_all_gather(ctx, c[0], &x, bad_rows, &q, NULL), BC_ERR_ARG, "x is [4, 64] but rank 0 holds rows[0] = 5 rows",
          "all_gather rows disagree with x");
  int64_t neg_rows[1] = { -1 };
  ERR_HAS(bc_all_gather(ctx, c[0], &x, neg_rows, &q, NULL), BC_ERR_ARG, "rows[0] is -1", "all_gather negative rows");
  bc_qtensor q0 = q;
  q0.rowwise_data = NULL;
  ERR_HAS(bc_all_gather(ctx, c[0], &x, rows1, &q0, NULL), BC_ERR_ARG, "out has no direction", "all_gather no direction");
  bc_qtensor qs = q;
  qs.stochastic_rounding = 1;
  ERR_HAS(bc_all_gather(ctx, c[0], &x, rows1, &qs, NULL), BC_ERR_UNSUPPORTED, "stochastic_rounding", "all_gather SR unsupported");
  bc_qtensor qr = q;
  qr.rows = 8;
  ERR_HAS(bc_all_gather(ctx, c[0], &x, rows1, &qr, NULL), BC_ERR_ARG, "out has 8 rows but the ranks' rows sum to 4",
          "all_gather out rows");
  /* formats the collectives' kernels do not take: 6-bit elements, blocks marked by NaN */
  const bc_format *m6, *nb = NULL;
  bc_format_get(ctx, "mxfp6_e2m3", &m6);
  bc_qtensor q6 = { m6, 4, 64, fake, fake, NULL, NULL, NULL, NULL, 0, 0, 0, 0 };
  ERR_HAS(bc_all_gather(ctx, c[0], &x, rows1, &q6, NULL), BC_ERR_UNSUPPORTED,
          "bc_all_gather: format 'mxfp6_e2m3' has 6-bit elements; the collectives take formats of 8- or 4-bit elements",
          "all_gather refuses 6-bit elements");
  nb = load_spec_text("nanblock", "name = \"mxfp8_nanblock\"\ndescription = \"t\"\nelement = \"e4m3\"\nblock = { rows = 1, cols = 32 }\n"
                      "scale = { type = \"e8m0\", rule = \"rceil\" }\nnan_policy = \"scale_nan\"\n"
                      "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 128, pad_cols = 4 } }\n");
  ok(nb != NULL, "a scale_nan spec loads");
  bc_qtensor qn = { nb, 4, 64, fake, fake, NULL, NULL, NULL, NULL, 0, 0, 0, 0 };
  ERR_HAS(bc_all_gather(ctx, c[0], &x, rows1, &qn, NULL), BC_ERR_UNSUPPORTED,
          "format 'mxfp8_nanblock' marks blocks holding NaN (nan_policy \"scale_nan\")", "all_gather refuses scale_nan");
  ERR_HAS(bc_all_gather_quantized(ctx, c[0], NULL, rows1, &q, NULL), BC_ERR_ARG, "'xq' is NULL", "all_gather_quantized NULL xq");
  bc_qtensor xq = { f8, 4, 64, fake, fake, NULL, NULL, fake, fake, 0, 0, 0, 0 };
  ERR_HAS(bc_all_gather_quantized(ctx, c[0], &xq, rows1, &q, NULL), BC_ERR_ARG, "xq's format is not out's",
          "all_gather_quantized format mismatch");
  /* per tensor: out's scale_inv is copied from xq's, which must be there (it was read at address 0) */
  bc_qtensor q8 = { f8, 4, 64, fake, fake, NULL, NULL, fake, fake, 0, 0, 0, 0 }, xq8 = xq;
  xq8.rowwise_scale_inv = NULL;
  ERR_HAS(bc_all_gather_quantized(ctx, c[0], &xq8, rows1, &q8, NULL), BC_ERR_ARG,
          "bc_all_gather_quantized: xq has no rowwise scale_inv; per-tensor format 'fp8_e4m3_tensor' copies it", "all_gather_quantized "
          "per tensor without xq's scale_inv");
  q8.stochastic_rounding = 1;
  ERR_HAS(bc_all_gather_quantized(ctx, c[0], &xq, rows1, &q8, NULL), BC_ERR_UNSUPPORTED, "out->stochastic_rounding is set; the gather "
          "keeps xq's codes", "all_gather_quantized refuses stochastic rounding on every split");
  ERR_HAS(bc_quantize_comm(ctx, NULL, &x, &q, NULL), BC_ERR_ARG, "'comm' is NULL", "quantize_comm NULL comm");
  ERR_HAS(bc_quantize_comm(ctx, c[0], NULL, &q, NULL), BC_ERR_ARG, "'x' is NULL", "quantize_comm NULL x");
  ERR_HAS(bc_quantize_list_comm(ctx, c[0], -2, &x, &q, NULL), BC_ERR_ARG, "n is -2", "quantize_list_comm n < 0");
  ERR_HAS(bc_quantize_list_comm(ctx, c[0], 2, NULL, &q, NULL), BC_ERR_ARG, "'x' is NULL", "quantize_list_comm NULL x");
  bc_qtensor ql[2] = { q, q };
  ql[1].format = f8; /* per-tensor: needs an amax for the reduction */
  ERR_HAS(bc_quantize_list_comm(ctx, c[0], 2, (bc_tensor[2]){ x, x }, ql, NULL), BC_ERR_ARG, "bc_quantize_list_comm: tensor 1: q->amax is NULL",
          "quantize_list_comm names the entry");

  /* bc_shard_cast: every bad entry named, with what would be right (checked before any launch) */
  {
    const bc_format *m4, *b2;
    bc_format_get(ctx, "mxfp4", &m4);
    bc_format_get(ctx, "fp8_block_128x128", &b2);
    float amx, scl;
    bc_shard sh[2] = { { fake, BC_FP32, 0, 64, 0 }, { fake, BC_BF16, 10, 20, 0 } };
    bc_qtensor sq[2] = { { mx, 4, 16, fake, fake, NULL, NULL, NULL, NULL, 0, 0, 0, 0 },
                         { mx, 4, 16, fake, fake, fake, fake, NULL, NULL, 0, 0, 0, 0 } };
    ERR_HAS(bc_shard_cast(ctx, NULL, 2, sh, sq, NULL), BC_ERR_ARG, "'comm' is NULL", "shard_cast NULL comm");
    ERR_HAS(bc_shard_cast(ctx, c[0], -1, sh, sq, NULL), BC_ERR_ARG, "n is -1", "shard_cast n < 0");
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, NULL, sq, NULL), BC_ERR_ARG, "'shards' is NULL", "shard_cast NULL shards");
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, sh, NULL, NULL), BC_ERR_ARG, "'q' is NULL", "shard_cast NULL q");
    bc_shard bs = sh[1];
    bs.len = 60;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, (bc_shard[2]){ sh[0], bs }, sq, NULL), BC_ERR_ARG,
            "weight 1: the shard is [start 10, len 60]; expected 0 <= start and start + len <= 64", "shard_cast shard out of range");
    bs = sh[1];
    bs.dtype = (bc_dtype)7;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, (bc_shard[2]){ sh[0], bs }, sq, NULL), BC_ERR_ARG, "weight 1: the shard's dtype", "shard_cast bad dtype");
    bs = sh[1];
    bs.data = NULL;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, (bc_shard[2]){ sh[0], bs }, sq, NULL), BC_ERR_ARG, "weight 1: the shard's data is NULL",
            "shard_cast NULL data");
    bc_qtensor bq = sq[1];
    bq.rowwise_data = bq.columnwise_data = NULL;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, sh, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_ARG, "weight 1: q has no data pointer",
            "shard_cast no direction");
    bq = sq[1];
    bq.format = b2;
    bq.rows = bq.cols = 128;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, sh, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_ARG,
            "weight 1: format 'fp8_block_128x128' scales 2D blocks, so its columnwise data is the transpose", "shard_cast 2D columnwise");
    bq = sq[1];
    bq.format = f8;
    bq.columnwise_data = bq.columnwise_scale_inv = NULL;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, sh, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_ARG, "weight 1: q->amax is NULL",
            "shard_cast per-tensor without amax");
    bq.amax = &amx;
    bq.scale = &scl;
    bq.stochastic_rounding = 1;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, sh, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_ARG, "stochastic rounding is not offered",
            "shard_cast SR");
    {
      bc_shard gs = sh[1];
      gs.given_scale = 1; /* on mxfp8_e4m3: a block format */
      ERR_HAS(bc_shard_cast(ctx, c[0], 2, (bc_shard[2]){ sh[0], gs }, sq, NULL), BC_ERR_ARG,
              "bc_shard_cast: weight 1: given_scale is set, but format 'mxfp8_e4m3' scales blocks", "shard_cast given_scale on a block format");
    }
    bq = sq[1];
    bq.format = m4;
    bq.cols = 15;
    bq.rows = 4;
    bs = sh[1];
    bs.len = 5;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, (bc_shard[2]){ sh[0], bs }, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_ARG,
            "bc_shard_cast: weight 1: format 'mxfp4' packs 2 4-bit elements in 1 byte(s)", "shard_cast 4-bit odd columns");
    {
      const bc_format *m6;
      bc_format_get(ctx, "mxfp6_e3m2", &m6);
      bq = sq[1];
      bq.format = m6;
      ERR_HAS(bc_shard_cast(ctx, c[0], 2, sh, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_UNSUPPORTED,
              "bc_shard_cast: weight 1: format 'mxfp6_e3m2' has 6-bit elements", "shard_cast refuses 6-bit elements");
      ERR_HAS(bc_shard_finish(ctx, 2, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_UNSUPPORTED,
              "bc_shard_finish: weight 1: format 'mxfp6_e3m2' has 6-bit elements", "shard_finish refuses 6-bit elements");
    }
    bq = sq[1];
    bq.format = b2;
    bq.rows = bq.cols = 128;
    bq.columnwise_data = bq.columnwise_scale_inv = NULL;
    bq.rowwise_scale_inv = (char *)fake + 2;
    bs = sh[1];
    bs.len = 100;
    ERR_HAS(bc_shard_cast(ctx, c[0], 2, (bc_shard[2]){ sh[0], bs }, (bc_qtensor[2]){ sq[0], bq }, NULL), BC_ERR_ARG,
            "weight 1: q->rowwise_scale_inv is misaligned; format 'fp8_block_128x128' stores 4-byte scales", "shard_cast misaligned scales");
    is_int(bc_shard_cast(ctx, c[0], 0, NULL, NULL, NULL), BC_OK, "shard_cast of no weights does nothing");
    ERR_HAS(bc_shard_finish(ctx, 2, NULL, NULL), BC_ERR_ARG, "'q' is NULL", "shard_finish NULL q");
    {
      /* a 2D-block spec whose columnwise data is row-major (not the transpose finish builds; per-tensor
       * specs must take transposed columnwise data) */
      const bc_format *rm = load_spec_text(
          "fp8rm", "name = \"fp8_rowmajor_col\"\ndescription = \"t\"\nelement = \"e4m3\"\nblock = { rows = 128, cols = 128 }\n"
                   "scale = { type = \"fp32\", rule = \"amax\" }\n"
                   "rowwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 1, pad_cols = 1 } }\n"
                   "columnwise = { layout = \"rowmajor\", scale_layout = { order = \"rowmajor\", pad_rows = 1, pad_cols = 1 } }\n");
      ok(rm != NULL, "a 2D-block spec with row-major columnwise data loads");
      if (rm) {
        bc_qtensor qr = { rm, 4, 16, fake, fake, fake, fake, fake, fake, 0, 0, 0, 0 };
        ERR_HAS(bc_shard_finish(ctx, 1, &qr, NULL), BC_ERR_UNSUPPORTED,
                "bc_shard_finish: weight 0: format 'fp8_rowmajor_col' stores its columnwise data untransposed",
                "shard_finish refuses untransposed columnwise data");
      }
    }
    bc_qtensor fq = { b2, 128, 128, NULL, fake, fake, fake, NULL, NULL, 0, 0, 0, 0 };
    ERR_HAS(bc_shard_finish(ctx, 2, (bc_qtensor[2]){ sq[0], fq }, NULL), BC_ERR_ARG,
            "bc_shard_finish: weight 1: q needs rowwise_data and rowwise_scale_inv", "shard_finish without the rowwise copy");
    fq.rowwise_data = fake;
    fq.columnwise_scale_inv = (char *)fake + 1;
    ERR_HAS(bc_shard_finish(ctx, 1, &fq, NULL), BC_ERR_ARG, "weight 0: a scale_inv pointer is misaligned", "shard_finish misaligned scales");
    fq.format = NULL;
    ERR_HAS(bc_shard_finish(ctx, 1, &fq, NULL), BC_ERR_ARG, "weight 0: q->format is NULL", "shard_finish NULL format");
    is_int(bc_shard_finish(ctx, 1, &sq[1], NULL), BC_OK, "shard_finish skips a 1D format (nothing to build)");
  }
  bc_comm_destroy(c[0]);

  /* bc_all_gather_bytes: the formula on small cases worked by hand */
  uint64_t b = 0;
  int64_t r2[2] = { 3, 5 };
  is_int(bc_all_gather_bytes(ctx, f8, 2, r2, 4, BC_ROWWISE, 0, &b), BC_OK, "all_gather_bytes fp8 tensor");
  is_int(b, 4 + 3 * 4, "fp8 per-tensor rowwise, rank 0 of [3 | 5] x 4: the amax + 3 rows of 4 bytes");
  is_int(bc_all_gather_bytes(ctx, f8, 2, r2, 4, BC_ROWWISE | BC_COLUMNWISE, 1, &b), BC_OK, "all_gather_bytes fp8 both");
  is_int(b, 4 + 5 * 4, "fp8 per-tensor both, rank 1: the columnwise copy is built locally (nothing more sent)");
  int64_t r64[2] = { 64, 64 };
  is_int(bc_all_gather_bytes(ctx, mx, 2, r64, 64, BC_ROWWISE, 0, &b), BC_OK, "all_gather_bytes mxfp8 rowwise");
  is_int(b, 64 * 64 + 63 * 4 + 2, "mxfp8 rowwise 64 rows x 64: data + scales [64 x 2] stored with 4 columns, up to the last valid");
  int64_t r40[2] = { 40, 88 };
  is_int(bc_all_gather_bytes(ctx, mx, 2, r40, 64, BC_COLUMNWISE, 0, &b), BC_OK, "all_gather_bytes mxfp8 columnwise, cut blocks");
  /* 32x1 blocks: rows 40 cut the block [32, 64); boundary amaxes 2 x 64 fp32; slab [0, 64): its
   * row-major columnwise rows (40 of them travel) and scales [2 block rows x 64], transposed
   * order: stored [2 (pad 4)][64 (pad 128)]: up to the last valid entry (1 * 128 + 64) */
  is_int(b, 2 * 64 * 4 + 40 * 64 + (128 + 64), "... = boundary amaxes + the rank's rows + the slab's scales");
  ERR_HAS(bc_all_gather_bytes(ctx, mx, 2, r40, 64, 4, 0, &b), BC_ERR_ARG, "directions is 4", "all_gather_bytes bad directions");
  ERR_HAS(bc_all_gather_bytes(ctx, mx, 2, r40, 64, 1, 2, &b), BC_ERR_ARG, "rank 2 of 2 ranks", "all_gather_bytes bad rank");

  /* a call that disagrees across ranks fails on every rank naming both (no GPU needed: the
   * rendezvous compares before any device work) */
  bc_comm_create_local(ctx, 2, c);
  rk a[2] = { { c[0], 1, 0, "" }, { c[1], 2, 0, "" } };
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, allreduce_rank, &a[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  ok(a[0].s == BC_ERR_ARG && a[1].s == BC_ERR_ARG && strstr(a[0].err, "n=1") && strstr(a[0].err, "n=2") && strstr(a[1].err, "n=2"),
     "bc_amax_allreduce with n = 1 on rank 0 and n = 2 on rank 1: both fail naming both (%s)", a[0].err);
  for (int r = 0; r < 2; r++) bc_comm_destroy(c[r]);

  /* a rank that never comes: the others time out, and the communicator refuses later calls */
  setenv("BLOCKCAST_COMM_TIMEOUT", "0.2", 1);
  bc_comm_create_local(ctx, 2, c);
  rk lone = { c[0], 1, 0, "" };
  allreduce_rank(&lone);
  ok(lone.s == BC_ERR_UNAVAILABLE && strstr(lone.err, "waited 0 s") == NULL && strstr(lone.err, "for the other ranks (1 of 2 arrived)"),
     "a rank alone at a rendezvous times out: %s", lone.err);
  allreduce_rank(&lone);
  ok(lone.s == BC_ERR_UNAVAILABLE && strstr(lone.err, "unusable since an earlier failure"), "later calls are refused: %s", lone.err);
  unsetenv("BLOCKCAST_COMM_TIMEOUT");
  for (int r = 0; r < 2; r++) bc_comm_destroy(c[r]);
}

int main(void) {
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }

  /* ---- ids and hex ---- */
  bc_comm_id id, back;
  for (int i = 0; i < BC_COMM_ID_BYTES; i++) id.bytes[i] = (unsigned char)(i * 37 + 11);
  char hex[2 * BC_COMM_ID_BYTES + 1];
  is_int(bc_comm_id_to_string(ctx, &id, hex), BC_OK, "to_string");
  ok(is_hex256(hex), "to_string writes 256 lowercase hex digits");
  ok(strncmp(hex, "0b30", 4) == 0, "to_string: byte 0 first, high nibble first (%.8s)", hex);
  memset(&back, 0, sizeof back);
  is_int(bc_comm_id_from_string(ctx, hex, &back), BC_OK, "from_string");
  is_bytes(back.bytes, id.bytes, BC_COMM_ID_BYTES, "hex round trip");
  char upper[sizeof hex];
  for (size_t i = 0; i < sizeof hex; i++) upper[i] = (char)(hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 32 : hex[i]);
  memset(&back, 0, sizeof back);
  is_int(bc_comm_id_from_string(ctx, upper, &back), BC_OK, "from_string accepts upper case");
  is_bytes(back.bytes, id.bytes, BC_COMM_ID_BYTES, "upper-case round trip");

  ERR_HAS(bc_comm_id_from_string(ctx, "abc", &back), BC_ERR_ARG, "has length 3; expected exactly 256 hex digits", "short hex");
  ERR_HAS(bc_comm_id_from_string(ctx, "", &back), BC_ERR_ARG, "has length 0", "empty hex");
  char bad[300];
  memcpy(bad, hex, sizeof hex);
  bad[17] = 'g';
  ERR_HAS(bc_comm_id_from_string(ctx, bad, &back), BC_ERR_ARG, "character 17 is 'g', not a hex digit", "non-hex char");
  memcpy(bad, hex, sizeof hex);
  bad[256] = '0';
  bad[257] = 0;
  ERR_HAS(bc_comm_id_from_string(ctx, bad, &back), BC_ERR_ARG, "longer than 256 characters", "long hex");
  memcpy(bad, hex, sizeof hex);
  bad[256] = '\n';
  bad[257] = 0;
  ERR_HAS(bc_comm_id_from_string(ctx, bad, &back), BC_ERR_ARG, "character 256 is 0x0a", "trailing newline");
  ERR_HAS(bc_comm_id_from_string(ctx, NULL, &back), BC_ERR_ARG, "'hex' is NULL", "NULL hex");
  ERR_HAS(bc_comm_id_from_string(ctx, hex, NULL), BC_ERR_ARG, "'id' is NULL", "NULL id (from_string)");
  ERR_HAS(bc_comm_id_to_string(ctx, NULL, hex), BC_ERR_ARG, "'id' is NULL", "NULL id (to_string)");
  ERR_HAS(bc_comm_id_to_string(ctx, &id, NULL), BC_ERR_ARG, "'out' is NULL", "NULL out (to_string)");
  ERR_HAS(bc_comm_id_create(ctx, NULL), BC_ERR_ARG, "'id' is NULL", "NULL id (create)");

  /* a fresh id: needs libnccl.so.2 (maybe a GPU); without them a clean failure with a message */
  bc_status s = bc_comm_id_create(ctx, &back);
  ok(s == BC_OK || s == BC_ERR_UNAVAILABLE || s == BC_ERR_NCCL, "bc_comm_id_create: OK or a clean failure (%s)", bc_status_string(s));
  if (s == BC_OK) {
    ok(bc_comm_id_to_string(ctx, &back, hex) == BC_OK && is_hex256(hex), "a fresh id prints as hex");
  } else {
    diag("bc_comm_id_create: %s: %s", bc_status_string(s), bc_last_error(ctx));
    ok(strlen(bc_last_error(ctx)) > 20 && (s != BC_ERR_UNAVAILABLE || strstr(bc_last_error(ctx), "NCCL")),
       "bc_comm_id_create's failure explains itself");
  }

  /* ---- argument checks: before NCCL is opened or a GPU is asked for ---- */
  bc_comm *comm = (bc_comm *)&id; /* must come back NULL */
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 0, 0, &comm), BC_ERR_ARG, "nranks is 0; expected at least 1", "nranks 0");
  ok(comm == NULL, "*out is NULL on failure");
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 4, 4, &comm), BC_ERR_ARG, "rank is 4; expected 0 <= rank < nranks (4)", "rank too big");
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 4, -1, &comm), BC_ERR_ARG, "rank is -1", "negative rank");
  ERR_HAS(bc_comm_create_nccl(ctx, NULL, 2, 0, &comm), BC_ERR_ARG, "'id' is NULL", "NULL id (create_nccl)");
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 2, 0, NULL), BC_ERR_ARG, "'out' is NULL", "NULL out (create_nccl)");
  ERR_HAS(bc_comm_wrap_nccl(ctx, NULL, &comm), BC_ERR_ARG, "'nccl_comm' is NULL", "wrap NULL");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:X", 0, 0, 1.0, &comm), BC_ERR_ARG, "nranks is 0", "bootstrap nranks 0");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:X", 2, 2, 1.0, &comm), BC_ERR_ARG, "rank is 2", "bootstrap rank 2 of 2");
  ERR_HAS(bc_comm_bootstrap(ctx, NULL, 2, 0, 1.0, &comm), BC_ERR_ARG, "'where' is NULL", "bootstrap NULL where");
  ERR_HAS(bc_comm_bootstrap(ctx, "", 2, 0, 1.0, &comm), BC_ERR_ARG, "'where' is empty", "bootstrap empty where");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:", 2, 0, 1.0, &comm), BC_ERR_ARG, "no variable name", "bootstrap env: without a name");
  ERR_HAS(bc_comm_bootstrap(ctx, "/tmp/x", 2, 1, -1.0, &comm), BC_ERR_ARG, "timeout_s is -1", "bootstrap negative timeout");
  ERR_HAS(bc_comm_bootstrap(ctx, "/tmp/x", 2, 1, NAN, &comm), BC_ERR_ARG, "timeout_s is", "bootstrap NaN timeout");
  /* BLOCKCAST_GATHER, read when a communicator is made: a value it does not know fails first */
  setenv("BLOCKCAST_GATHER", "ring", 1);
  comm = (bc_comm *)&id; /* must come back NULL */
  ERR_HAS(bc_comm_create_nccl(ctx, &id, 2, 0, &comm), BC_ERR_ARG,
          "bc_comm_create_nccl: BLOCKCAST_GATHER is 'ring'; expected auto (the default), collective", "BLOCKCAST_GATHER=ring (create)");
  ok(comm == NULL, "*out is NULL on failure (BLOCKCAST_GATHER)");
  ERR_HAS(bc_comm_wrap_nccl(ctx, &id, &comm), BC_ERR_ARG, "bc_comm_wrap_nccl: BLOCKCAST_GATHER is 'ring'", "BLOCKCAST_GATHER=ring (wrap)");
  unsetenv("BLOCKCAST_GATHER");
  is_int(bc_comm_id_create(NULL, &id), BC_ERR_ARG, "NULL ctx: id_create");
  is_int(bc_comm_id_to_string(NULL, &id, hex), BC_ERR_ARG, "NULL ctx: to_string");
  is_int(bc_comm_id_from_string(NULL, hex, &id), BC_ERR_ARG, "NULL ctx: from_string");
  is_int(bc_comm_create_nccl(NULL, &id, 1, 0, &comm), BC_ERR_ARG, "NULL ctx: create_nccl");
  is_int(bc_comm_wrap_nccl(NULL, &id, &comm), BC_ERR_ARG, "NULL ctx: wrap_nccl");
  is_int(bc_comm_bootstrap(NULL, "env:X", 1, 0, 1.0, &comm), BC_ERR_ARG, "NULL ctx: bootstrap");

  /* ---- bootstrap through the environment ---- */
  unsetenv("BC_TEST19_NO_SUCH_ID");
  ERR_HAS(bc_comm_bootstrap(ctx, "env:BC_TEST19_NO_SUCH_ID", 2, 1, 1.0, &comm), BC_ERR_ARG,
          "environment variable BC_TEST19_NO_SUCH_ID is not set", "bootstrap: unset variable");
  ok(comm == NULL, "bootstrap: *out is NULL on failure");
  setenv("BC_TEST19_BAD_ID", "0123xyz", 1);
  ERR_HAS(bc_comm_bootstrap(ctx, "env:BC_TEST19_BAD_ID", 2, 1, 1.0, &comm), BC_ERR_ARG,
          "environment variable BC_TEST19_BAD_ID: character 4 is 'x'", "bootstrap: malformed variable");

  /* ---- bootstrap through a file ---- */
  char dir[] = "/tmp/bc19.XXXXXX";
  if (!mkdtemp(dir)) { printf("Bail out! mkdtemp failed\n"); return 1; }
  char path[256];
  snprintf(path, sizeof path, "%s/id", dir);
  ERR_HAS(bc_comm_bootstrap(ctx, path, 2, 1, 0.05, &comm), BC_ERR_UNAVAILABLE, "did not appear within 0.05 s", "bootstrap: no file, timeout");
  is_str_has(bc_last_error(ctx), path, "bootstrap timeout: the message names the path");
  FILE *f = fopen(path, "w");
  fputs("not an id\n", f);
  fclose(f);
  ERR_HAS(bc_comm_bootstrap(ctx, path, 2, 1, 0.02, &comm), BC_ERR_UNAVAILABLE, "is not an id after 0.02 s", "bootstrap: malformed file");
  unlink(path);

  /* rank 0 checks what creating the communicator needs (BLOCKCAST_GATHER, NCCL, a current CUDA
   * context: none here) before it writes the id: a clean failure and no file, so the other ranks
   * time out naming the path instead of waiting in ncclCommInitRank for a rank 0 that left */
  setenv("BLOCKCAST_GATHER", "ring", 1);
  ERR_HAS(bc_comm_bootstrap(ctx, path, 2, 0, 1.0, &comm), BC_ERR_ARG, "bc_comm_bootstrap: BLOCKCAST_GATHER is 'ring'",
          "bootstrap rank 0, BLOCKCAST_GATHER=ring");
  ok(comm == NULL && access(path, F_OK) != 0, "... before writing the id: no file");
  unsetenv("BLOCKCAST_GATHER");
  s = bc_comm_bootstrap(ctx, path, 2, 0, 1.0, &comm);
  ok(s != BC_OK && comm == NULL, "bootstrap rank 0 without a CUDA context fails (%s)", bc_status_string(s));
  diag("bootstrap rank 0: %s", bc_last_error(ctx));
  ok(strlen(bc_last_error(ctx)) > 20, "... with a message");
  ok(access(path, F_OK) != 0, "... before writing the id: no file for the other ranks to trust");
  unlink(path);
  rmdir(dir);

  local_and_collectives();
  bc_ctx_destroy(ctx);
  return done_testing();
}
