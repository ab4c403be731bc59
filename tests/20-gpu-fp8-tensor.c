/* 20-gpu-fp8-tensor: the GPU tier for FP8 per-tensor current scaling. Every kernel (amax, scale,
 * quantize rowwise / columnwise / both, dequantize) against the CPU reference, bit-exact, for
 * e4m3 and e5m2, inputs fp32 / bf16 / fp16, shapes 1x1 .. 8192x8192, strided inputs, random
 * data with special values (0, -0, denormals, NaN, +-Inf, +-max, values past the saturation
 * point); every output poisoned before each run. Also a spec loaded at run time (JIT path), and
 * a check that the built-in formats never called NVRTC (AOT only). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockcast.h"
#include "gpu.h"
#include "tap.h"
#include "testdata.h"

static bc_ctx *ctx;
typedef struct dev_q {
  uint8_t *row, *col;
  float *rsi, *csi, *amax, *scale;
} dev_q;

/* one quantize run (current scaling or cast with a fixed scale) + dequantize of each direction */
static void run_case(const bc_format *f, bc_dtype dt, int64_t rows, int64_t cols, int64_t stride, int dirs, int kind,
                     int current, int deq_all) {
  size_t es = bc_dtype_size(dt);
  int64_t ld = stride ? stride : cols;
  size_t in_bytes = (size_t)((rows - 1) * ld + cols) * es;
  size_t n = (size_t)(rows * cols);
  void *h_in = malloc(in_bytes);
  fill(h_in, dt, in_bytes / es, kind);
  void *d_in = dmalloc(in_bytes);
  CK(cudaMemcpy(d_in, h_in, in_bytes, cudaMemcpyHostToDevice));
  dev_q d;
  d.row = (dirs & 1) ? dmalloc(n) : NULL;
  d.col = (dirs & 2) ? dmalloc(n) : NULL;
  float *fl = dmalloc(4 * sizeof(float));
  d.rsi = fl; d.csi = fl + 1; d.amax = fl + 2; d.scale = fl + 3;
  if (d.row) CK(cudaMemset(d.row, 0xA5, n));
  if (d.col) CK(cudaMemset(d.col, 0xA5, n));
  CK(cudaMemset(fl, 0xA5, 4 * sizeof(float)));
  float fixed_scale = kind == 2 ? 1.0f : 3.0f;
  if (!current) CK(cudaMemcpy(d.scale, &fixed_scale, 4, cudaMemcpyHostToDevice));

  bc_tensor x = { d_in, dt, rows, cols, stride };
  bc_qtensor q = { f, rows, cols, d.row, d.row ? d.rsi : NULL, d.col, d.col ? d.csi : NULL, d.amax, d.scale, 0, 0, 0, 0 };
  bc_status s = current ? bc_quantize(ctx, &x, &q, NULL) : bc_quantize_cast(ctx, &x, &q, NULL);
  cudaError_t ce = cudaDeviceSynchronize();

  /* reference */
  uint8_t *r_row = malloc(n), *r_col = malloc(n), *g_row = malloc(n), *g_col = malloc(n);
  float r_fl[4], g_fl[4];
  memset(r_fl, 0xA5, sizeof r_fl);
  r_fl[3] = fixed_scale;
  bc_tensor hx = { h_in, dt, rows, cols, stride };
  bc_qtensor hq = { f, rows, cols, d.row ? r_row : NULL, d.row ? &r_fl[0] : NULL, d.col ? r_col : NULL,
                    d.col ? &r_fl[1] : NULL, &r_fl[2], &r_fl[3], 0, 0, 0, 0 };
  bc_status rs = current ? bc_ref_quantize(ctx, &hx, &hq) : bc_ref_quantize_cast(ctx, &hx, &hq);
  int good = s == BC_OK && ce == cudaSuccess && rs == BC_OK;
  if (!good) diag("  status %s (%s), cuda %s, ref %s", bc_status_string(s), bc_last_error(ctx), cudaGetErrorString(ce), bc_status_string(rs));
  if (good) {
    CK(cudaMemcpy(g_fl, fl, sizeof g_fl, cudaMemcpyDeviceToHost));
    if (d.row) CK(cudaMemcpy(g_row, d.row, n, cudaMemcpyDeviceToHost));
    if (d.col) CK(cudaMemcpy(g_col, d.col, n, cudaMemcpyDeviceToHost));
    if (current) {
      good &= first_diff_report("amax", &g_fl[2], &r_fl[2], 4);
      good &= first_diff_report("scale", &g_fl[3], &r_fl[3], 4);
    }
    if (d.row) good &= first_diff_report("rowwise scale_inv", &g_fl[0], &r_fl[0], 4);
    if (d.col) good &= first_diff_report("columnwise scale_inv", &g_fl[1], &r_fl[1], 4);
    if (d.row) good &= first_diff_report("rowwise data", g_row, r_row, n);
    if (d.col) good &= first_diff_report("columnwise data", g_col, r_col, n);
  }
  /* dequantize each direction into each asked dtype (poisoned, with a padded row stride for small shapes) */
  int ndeq = 0, deq_good = 1;
  for (int dir = 1; good && dir <= 2; dir++) {
    if (!(dirs & dir)) continue;
    for (int ot = 0; ot < 3; ot++) {
      bc_dtype odt = (bc_dtype)ot;
      if (!deq_all && odt != dt) continue;
      int64_t orows = dir == 1 ? rows : cols, ocols = dir == 1 ? cols : rows;
      int64_t ostride = (deq_all && orows > 1) ? ocols + 8 : 0, old = ostride ? ostride : ocols;
      size_t ob = (size_t)((orows - 1) * old + ocols) * bc_dtype_size(odt);
      void *dout = dmalloc(ob), *hout = malloc(ob), *rout = malloc(ob);
      CK(cudaMemset(dout, 0xA5, ob));
      memset(rout, 0xA5, ob);
      bc_tensor o = { dout, odt, orows, ocols, ostride }, ro = { rout, odt, orows, ocols, ostride };
      bc_status ds = bc_dequantize(ctx, &q, (bc_direction)dir, &o, NULL);
      CK(cudaDeviceSynchronize());
      bc_ref_dequantize(ctx, &hq, (bc_direction)dir, &ro);
      CK(cudaMemcpy(hout, dout, ob, cudaMemcpyDeviceToHost));
      char what[64];
      snprintf(what, sizeof what, "dequantize %s -> %s", dir == 1 ? "rowwise" : "columnwise", bc_dtype_name(odt));
      if (ds != BC_OK) diag("  %s: %s", what, bc_last_error(ctx));
      deq_good &= ds == BC_OK && first_diff_report(what, hout, rout, ob);
      ndeq++;
      cudaFree(dout);
      free(hout);
      free(rout);
    }
  }
  const char *dn[] = { "", "row", "col", "rowcol" };
  bc_format_info info;
  bc_format_get_info(ctx, f, &info);
  ok(good && deq_good, "%s %s %lldx%lld%s %s %s kind %d (+%d dequantize)", info.name, bc_dtype_name(dt), (long long)rows,
     (long long)cols, stride ? " strided" : "", dn[dirs], current ? "quantize" : "cast", kind, ndeq);
  cudaFree(d_in);
  if (d.row) cudaFree(d.row);
  if (d.col) cudaFree(d.col);
  cudaFree(fl);
  free(h_in);
  free(r_row); free(r_col); free(g_row); free(g_col);
}

int main(void) {
  gpu_init_or_skip();
  /* a fresh disk cache, so the run-time spec below really goes through NVRTC */
  char cache[] = "/tmp/bc-gpu-cache-XXXXXX";
  if (!mkdtemp(cache)) { printf("Bail out! mkdtemp\n"); return 1; }
  setenv("BLOCKCAST_CACHE_DIR", cache, 1);
  char err[1024];
  if (bc_ctx_create(&ctx, err, sizeof err) != BC_OK) { printf("Bail out! %s\n", err); return 1; }
  diag("device: %s", gpu_name());
  /* BC_TEST_QUICK=1 (the compute-sanitizer run): shapes up to 1024x4096 only */
  const int quick = getenv("BC_TEST_QUICK") != NULL;
  if (quick) diag("BC_TEST_QUICK: shapes up to 1024x4096");
  const char *fmts[] = { "fp8_e4m3_tensor", "fp8_e5m2_tensor" };
  /* 300x200, 257x129: whole tiles whose transposed output rows are not 16-byte aligned (aligned and
   * unaligned input rows) */
  int64_t shapes[][2] = { { 1, 1 }, { 1, 7 }, { 7, 1 }, { 4096, 1 }, { 1, 4099 }, { 3, 17 }, { 127, 129 }, { 64, 64 }, { 300, 200 },
                          { 257, 129 }, { 1024, 4096 }, { 8192, 8192 } };
  for (int fi = 0; fi < 2; fi++) {
    const bc_format *f;
    bc_format_get(ctx, fmts[fi], &f);
    for (int dt = 0; dt < 3; dt++) {
      for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int64_t r = shapes[si][0], c = shapes[si][1];
        int big = r * c >= 8192LL * 8192;
        if (quick && big) continue;
        for (int dirs = 1; dirs <= 3; dirs++) {
          if (big && dirs != 3) continue;
          run_case(f, (bc_dtype)dt, r, c, 0, dirs, 0, 1, !big && r * c < 1000000);
          if (!big) {
            run_case(f, (bc_dtype)dt, r, c, 0, dirs, 1, 1, 0);
            run_case(f, (bc_dtype)dt, r, c, 0, dirs, 2, 0, 0);
          }
        }
      }
      /* strided (non-contiguous) inputs: misaligned stride and a 16-byte aligned one; a strided
       * column (its both directions: two row casts) */
      for (int dirs = 1; dirs <= 3; dirs++) {
        run_case(f, (bc_dtype)dt, 127, 129, 133, dirs, 0, 1, 1);
        run_case(f, (bc_dtype)dt, 64, 128, 192, dirs, 0, 1, 0);
        run_case(f, (bc_dtype)dt, 301, 1, 3, dirs, 0, 1, 1);
        run_case(f, (bc_dtype)dt, 257, 129, 133, dirs, 0, 1, 0);
      }
    }
  }
  /* Launches: a one-column tensor's two directions are row casts (templates/quantize_row.cu)
   * starting at the same stage, not the tile kernel: one more launch alone, the same count in a
   * list (the two casts are one group) */
  {
    const bc_format *f;
    bc_format_get(ctx, "fp8_e4m3_tensor", &f);
    const int64_t shp[2][2] = { { 4096, 1 }, { 64, 64 } };
    uint64_t one[2], list[2];
    for (int k = 0; k < 2; k++) {
      bc_tensor x[3];
      bc_qtensor q[3];
      char *buf = dmalloc(3 * (4096 * 4 + 64));
      for (int i = 0; i < 3; i++) {
        char *b = buf + i * (4096 * 4 + 64);
        x[i] = (bc_tensor){ b, BC_BF16, shp[k][0], shp[k][1], 0 };
        memset(&q[i], 0, sizeof q[i]);
        q[i].format = f;
        q[i].rows = shp[k][0];
        q[i].cols = shp[k][1];
        q[i].rowwise_data = b + 8192;
        q[i].columnwise_data = b + 12288;
        q[i].amax = (float *)(b + 16384);
        q[i].scale = (float *)(b + 16384 + 16);
        q[i].rowwise_scale_inv = (float *)(b + 16384 + 32);
        q[i].columnwise_scale_inv = (float *)(b + 16384 + 48);
      }
      CK(cudaMemset(buf, 0, 3 * (4096 * 4 + 64)));
      bc_stats a, b, c;
      bc_get_stats(ctx, &a);
      bc_status s1 = bc_quantize(ctx, &x[0], &q[0], NULL);
      bc_get_stats(ctx, &b);
      bc_status s2 = bc_quantize_list(ctx, 3, x, q, NULL);
      bc_get_stats(ctx, &c);
      CK(cudaDeviceSynchronize());
      one[k] = s1 == BC_OK ? b.launches - a.launches : 0;
      list[k] = s2 == BC_OK ? c.launches - b.launches : 0;
      CK(cudaFree(buf));
    }
    ok(one[0] == one[1] + 1 && list[0] == list[1] && list[1] > 0,
       "[4096, 1] both directions: two row casts (%llu launches alone, %llu in a list of 3) where [64, 64] takes the tile kernel "
       "(%llu, %llu)", (unsigned long long)one[0], (unsigned long long)list[0], (unsigned long long)one[1], (unsigned long long)list[1]);
  }

  bc_stats st;
  bc_get_stats(ctx, &st);
  is_int(st.nvrtc_compiles, 0, "built-in formats used AOT kernels only: no NVRTC call (%llu AOT kernels loaded)",
         (unsigned long long)st.aot_hits);

  /* a spec added at run time: generated and compiled by NVRTC in process, then bit-exact */
  char path[256];
  snprintf(path, sizeof path, "%s/bc-jit-%ld.lua", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
  FILE *fp = fopen(path, "wb");
  fputs("name = \"fp8_e4m3_jit\"\ndescription = \"run-time spec\"\nelement = \"e4m3\"\nblock = \"tensor\"\n"
        "scale = { type = \"fp32\", rule = \"amax\" }\nrowwise = { layout = \"rowmajor\" }\n"
        "columnwise = { layout = \"transposed\" }\n", fp);
  fclose(fp);
  const bc_format *jf;
  is_int(bc_format_load(ctx, path, &jf), BC_OK, "run-time spec loads");
  unlink(path);
  if (jf) {
    run_case(jf, BC_BF16, 127, 129, 0, 3, 0, 1, 1);
    bc_get_stats(ctx, &st);
    ok(st.nvrtc_compiles >= 3, "run-time spec compiled with NVRTC (%llu compiles)", (unsigned long long)st.nvrtc_compiles);
  }
  bc_ctx_destroy(ctx);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
  if (system(cmd) != 0) diag("could not remove %s", cache);
  return done_testing();
}
