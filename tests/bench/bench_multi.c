/* tests/bench/bench_multi.c: the collectives over real NCCL, one process per GPU (2 to 8 GPUs;
 * says so and stops with fewer), busbw as nccl-tests computes it for an all-gather
 * (algbw = all ranks' bytes / time, busbw = algbw x (W - 1) / W). Rank 0 prints, for a bf16
 * activation [M, 8192] per rank of 64 and 256 MiB ($BC_BENCH_MULTI_MB: other sizes, e.g. 64,96,128):
 *   bf16        ncclAllGather of the bf16 rows (what a bf16 gather costs);
 *   <format>    bc_all_gather of the rows into the format, rowwise (quantize + exchange + assembly),
 *               against the fastest raw gather of the bytes it sends (bc_all_gather_bytes, rounded
 *               up to 256; ncclAllGather or grouped ncclSend / ncclRecv, as the communicator's
 *               gathers may move them: BLOCKCAST_GATHER; out of place or in place): the overhead,
 *               and the speedup over the bf16 gather; and the rank's
 *               rows quantized alone (bc_quantize, no communication); bc_all_gather_quantized of
 *               those rows already quantized, the collective's own cost, like for like as
 *               nccl-tests reports a gather: out of place (from a buffer of the rank's own, which
 *               it copies into place too) against the raw gather out of place, and in place (the
 *               rows quantized into out's own rows) against the raw gather in place; the in-place
 *               one also against NCCL's own gather of the same two pieces, data and block scales,
 *               from buffers of their own (a second NCCL operation costs its own latency); and a
 *               cast with the scale known (delayed scaling, bc_quantize_cast) followed by that
 *               gather, out of place and in place, against the bf16 gather; then the raw gathers
 *               and the collective again, queued (time_queued: the device's time with the host's
 *               enqueue out of the way, and the enqueue time a call), NCCL's two pieces also out of
 *               place there;
 * before them NCCL's own curve (a raw ncclAllGather, and the same gather as grouped ncclSend /
 * ncclRecv, of 8 to 512 MiB per rank);
 * and the sharded cast of the ~1B-parameter model of bench_shard.c (each rank its ZeRO range of
 * the flat fp32 buffer) over the W ranks, one all-reduce included, against the floor of its
 * kernels (bytes at the copy's speed) plus a raw ncclAllReduce of its vector's size.
 * bench.h's timing: median of 9 samples of 10 calls (all ranks in step: the collectives synchronize them).
 *   bench_multi [W]   (default: every GPU, at most 8; each rank killed after $BC_MULTI_TIMEOUT s,
 *                     540 by default, and all 20 s after one fails) */
#include <errno.h>
#include <unistd.h>

#include "bench.h"
#include "host_timing.h"
#include "../multi.h"

static bc_ctx *ctx;

typedef struct job {
  mt_nccl *nc;
  void *nccl;
  bc_comm *comm;
  const void *send;
  void *recv;
  size_t bytes;
  bc_tensor x;
  const int64_t *rows;
  bc_qtensor q, xq;
  int64_t n;
  bc_shard *sh;
  bc_qtensor *qs;
  float *vec;
  size_t nvec;
  int rank, W; /* do_nccl_sendrecv */
  const void *send2; /* do_nccl_*_two: a second piece, in buffers of its own */
  void *recv2;
  size_t bytes2;
} job;

static int do_nccl_gather(int i, void *u) {
  (void)i;
  job *j = u;
  return j->nc->allgather(j->send, j->recv, j->bytes, MT_UINT8, j->nccl, NULL) != 0;
}
/* the same, in place: the rank's piece already at its place of recv */
static int do_nccl_gather_in_place(int i, void *u) {
  (void)i;
  job *j = u;
  return j->nc->allgather((char *)j->recv + (size_t)j->rank * j->bytes, j->recv, j->bytes, MT_UINT8, j->nccl, NULL) != 0;
}
/* one piece as ncclSend / ncclRecv inside the caller's group: from send to every rank, itself
 * included (NCCL copies it in the group's kernel), as bci_nccl_gatherv moves a piece not in place;
 * send NULL: in place (the rank's piece already at its place of recv, sent to the others only) */
static int sr_piece(const job *j, const void *send, void *recv, size_t b) {
  int bad = 0;
  for (int r = 0; r < j->W && !bad; r++) {
    if (!send && r == j->rank) continue;
    const void *from = send ? send : (const char *)recv + (size_t)j->rank * b;
    bad = j->nc->send(from, b, MT_UINT8, r, j->nccl, NULL) != 0 ||
          j->nc->recv((char *)recv + (size_t)r * b, b, MT_UINT8, r, j->nccl, NULL) != 0;
  }
  return bad;
}
/* the job's piece (and its second, pieces == 2) in one group, out of place (from send / send2) or in place */
static int sr_group(const job *j, int pieces, int out) {
  int bad = j->nc->group_start() != 0;
  bad = bad || sr_piece(j, out ? j->send : NULL, j->recv, j->bytes);
  if (pieces == 2) bad = bad || sr_piece(j, out ? j->send2 : NULL, j->recv2, j->bytes2);
  return (j->nc->group_end() != 0) | bad;
}
/* grouped ncclSend / ncclRecv out of place, as bci_nccl_gatherv moves a piece not in place */
static int do_nccl_sendrecv_out(int i, void *u) {
  (void)i;
  return sr_group(u, 1, 1);
}
/* the same gather as grouped ncclSend / ncclRecv: each rank's piece to every other rank, in place */
static int do_nccl_sendrecv(int i, void *u) {
  (void)i;
  return sr_group(u, 1, 0);
}
/* two pieces in buffers of their own (a format's data and its scales) as two ncclAllGathers in one
 * group, out of place (from send / send2, the own pieces copied too) or in place */
static int ag_two(const job *j, int out) {
  const void *s1 = out ? j->send : (const char *)j->recv + (size_t)j->rank * j->bytes;
  const void *s2 = out ? j->send2 : (const char *)j->recv2 + (size_t)j->rank * j->bytes2;
  int bad = j->nc->group_start() != 0;
  bad = bad || j->nc->allgather(s1, j->recv, j->bytes, MT_UINT8, j->nccl, NULL) != 0 ||
        j->nc->allgather(s2, j->recv2, j->bytes2, MT_UINT8, j->nccl, NULL) != 0;
  return (j->nc->group_end() != 0) | bad;
}
/* in place: what NCCL itself takes to move them, as two ncclAllGathers or as send / receive */
static int do_nccl_gather_two(int i, void *u) {
  (void)i;
  return ag_two(u, 0);
}
static int do_nccl_sendrecv_two(int i, void *u) {
  (void)i;
  return sr_group(u, 2, 0);
}
/* the same two pieces out of place */
static int do_nccl_gather_two_out(int i, void *u) {
  (void)i;
  return ag_two(u, 1);
}
static int do_nccl_sendrecv_two_out(int i, void *u) {
  (void)i;
  return sr_group(u, 2, 1);
}
static int do_gather(int i, void *u) {
  (void)i;
  job *j = u;
  return bc_all_gather(ctx, j->comm, &j->x, j->rows, &j->q, NULL) != BC_OK;
}
static int do_quantize(int i, void *u) {
  (void)i;
  job *j = u;
  return bc_quantize(ctx, &j->x, &j->q, NULL) != BC_OK;
}
static int do_gather_quantized(int i, void *u) {
  (void)i;
  job *j = u;
  return bc_all_gather_quantized(ctx, j->comm, &j->xq, j->rows, &j->q, NULL) != BC_OK;
}
/* delayed scaling: the rows cast with the scale (and, NVFP4, the amax) xq already holds, then gathered */
static int do_cast_gather_quantized(int i, void *u) {
  job *j = u;
  if (bc_quantize_cast(ctx, &j->x, &j->xq, NULL) != BC_OK) return 1;
  return do_gather_quantized(i, u);
}
static int do_shard(int i, void *u) {
  (void)i;
  job *j = u;
  return bc_shard_cast(ctx, j->comm, j->n, j->sh, j->qs, NULL) != BC_OK;
}
static int do_nccl_allreduce(int i, void *u) {
  (void)i;
  job *j = u;
  return j->nc->allreduce(j->vec, j->vec, j->nvec, 7 /* ncclFloat32 */, 2 /* ncclMax */, j->nccl, NULL) != 0;
}

/* bench.h's median, or the end of this rank when a call failed: its peers would wait in a
 * collective it never makes (the parent kills them 20 s after this rank exits) */
static float timed(op_fn fn, void *u, const char *what, int rank) {
  float t = time_median(fn, u);
  if (t < 0) {
    printf("# rank %d: %s failed: %s\n", rank, what, bc_last_error(ctx));
    fflush(stdout);
    exit(1);
  }
  return t;
}

/* ---- queued timing: the device's time with the host's enqueue out of the way ----
 * A batch of calls whose enqueue takes longer than their device time is paced by the host, and
 * the events then time the host. Here the stream is first held by a host function (5 ms) while
 * the batch is enqueued behind it; a one-float ncclAllReduce after the hold lines the ranks up
 * again on the device; the events around the batch then time the device alone. Also the host's
 * enqueue time per call. Medians of `reps` samples. */
static job *barrier_job; /* the one-float all-reduce (set in rank_main) */
static void CUDART_CB hold_stream(void *u) { usleep((useconds_t)(*(const int *)u)); }

typedef struct qtime { float dev_ms, host_us; } qtime;

static qtime time_queued(op_fn fn, void *u, const char *what, int rank) {
  static const int hold_us = 5000;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float *ms = malloc(sizeof(float) * (size_t)reps), *hu = malloc(sizeof(float) * (size_t)reps);
  qtime q = { -1, -1 };
  for (int i = 0; i < reps; i++) {
    CK(cudaLaunchHostFunc(0, hold_stream, (void *)&hold_us));
    if (do_nccl_allreduce(0, barrier_job)) goto out;
    CK(cudaEventRecord(a, 0));
    double t0 = now_ms();
    for (int k = 0; k < BATCH; k++)
      if (fn(i * BATCH + k, u)) goto out;
    double t1 = now_ms();
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[i], a, b));
    ms[i] /= BATCH;
    hu[i] = (float)((t1 - t0) * 1e3 / BATCH);
  }
  qsort(ms, (size_t)reps, sizeof *ms, cmpf);
  qsort(hu, (size_t)reps, sizeof *hu, cmpf);
  q = (qtime){ ms[reps / 2], hu[reps / 2] };
out:
  free(ms);
  free(hu);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (q.dev_ms < 0) {
    printf("# rank %d: %s (queued) failed: %s\n", rank, what, bc_last_error(ctx));
    fflush(stdout);
    exit(1);
  }
  return q;
}
/* the faster of two ways, queued */
static qtime faster(qtime x, qtime y) { return y.dev_ms < x.dev_ms ? y : x; }

/* NCCL's own gather of two pieces of d and s bytes a rank (a format's data and block scales) from
 * buffers of their own, in place, the faster of two ncclAllGathers and send / receive: back to
 * back (*b2b, ms; NULL: not timed) and queued (*qt; NULL: not timed); out of place, queued
 * (*qo; NULL: not timed) */
static void time_two(const job *raw, uint64_t d, uint64_t s, int W, int rank, float *b2b, qtime *qt, qtime *qo) {
  job two = *raw;
  void *t1 = dmalloc(d * (uint64_t)W), *t2 = dmalloc(s * (uint64_t)W);
  two.recv = t1, two.bytes = d, two.recv2 = t2, two.bytes2 = s;
  if (qo) {
    void *o1 = dmalloc(d), *o2 = dmalloc(s);
    two.send = o1, two.send2 = o2;
    *qo = faster(time_queued(do_nccl_gather_two_out, &two, "two ncclAllGathers out of place (queued)", rank),
                 time_queued(do_nccl_sendrecv_two_out, &two, "send / receive of two pieces out of place (queued)", rank));
    cudaFree(o1);
    cudaFree(o2);
  }
  if (b2b) {
    *b2b = timed(do_nccl_gather_two, &two, "two ncclAllGathers of the same pieces", rank);
    float t = timed(do_nccl_sendrecv_two, &two, "ncclSend / ncclRecv of the same pieces", rank);
    if (t < *b2b) *b2b = t;
  }
  if (qt)
    *qt = faster(time_queued(do_nccl_gather_two, &two, "two ncclAllGathers (queued)", rank),
                 time_queued(do_nccl_sendrecv_two, &two, "send / receive of two pieces (queued)", rank));
  cudaFree(t1);
  cudaFree(t2);
}

/* The activation sizes, MiB a rank: $BC_BENCH_MULTI_MB (a comma-separated list, 1 to 8 of them, each
 * 1 to 1024), else 64 and 256. A malformed list is refused with a message (returns 0). */
static int activation_sizes(int *mb) {
  const char *e = getenv("BC_BENCH_MULTI_MB");
  if (!e || !*e) {
    mb[0] = 64, mb[1] = 256;
    return 2;
  }
  int n = 0;
  for (const char *p = e;;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > 1024 || n == 8 || (*end != ',' && *end != 0)) {
      fprintf(stderr, "bench_multi: BC_BENCH_MULTI_MB is '%s'; expected 1 to 8 sizes in MiB a rank (1 to 1024), comma-separated, "
                      "e.g. 64,96,128\n", e);
      return 0;
    }
    mb[n++] = (int)v;
    if (!*end) return n;
    p = end + 1;
  }
}

static double busbw(size_t per_rank, int W, float ms) { return (double)per_rank * W / (ms * 1e-3) / 1e9 * (W - 1) / W; }

static int rank_main(int rank, int W, const char *dir) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* its log keeps every line if the rank is killed */
  CK(cudaSetDevice(rank));
  if (bc_ctx_create(&ctx, NULL, 0) != BC_OK) return 1;
  reps = 9; /* samples of BATCH calls (bench.h) */
  char path[600];
  snprintf(path, sizeof path, "%s/blockcast.id", dir);
  bc_comm *comm;
  if (bc_comm_bootstrap(ctx, path, W, rank, 120.0, &comm) != BC_OK) {
    printf("# rank %d: %s\n", rank, bc_last_error(ctx));
    return 1;
  }
  mt_nccl nc;
  void *own = mt_nccl_open(&nc) ? mt_nccl_comm(ctx, &nc, dir, "own.id", rank, W) : NULL;
  if (!own) {
    printf("# rank %d: no NCCL communicator of its own\n", rank);
    return 1;
  }
  job bar = { .nc = &nc, .nccl = own, .vec = dmalloc(4), .nvec = 1 };
  CK(cudaMemset(bar.vec, 0, 4));
  barrier_job = &bar;
  float copy_ms;
  double gbs = copy_gbs(&copy_ms);
  if (rank == 0) {
    printf("# %s x %d, one process each; copy %.0f GB/s on rank 0 in this run\n", gpu_name(), W, gbs);
  }
  /* NCCL's own curve on this machine: a raw ncclAllGather per rank size, up then down (drift shows) */
  {
    const int lo_mb = 8, hi_mb = 512;
    void *sb = dmalloc((size_t)hi_mb << 20), *rb = dmalloc(((size_t)hi_mb << 20) * (size_t)W);
    CK(cudaMemset(sb, 0, (size_t)hi_mb << 20));
    float up[8] = { 0 }, down[8] = { 0 }, sr_up[8] = { 0 }, sr_down[8] = { 0 };
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < 7; i++) {
        int k = pass ? 6 - i : i;
        job j = { .nc = &nc, .nccl = own, .send = sb, .recv = rb, .bytes = ((size_t)lo_mb << k) << 20, .rank = rank,
                  .W = W };
        (pass ? down : up)[k] = timed(do_nccl_gather, &j, "ncclAllGather (curve)", rank);
        (pass ? sr_down : sr_up)[k] = timed(do_nccl_sendrecv, &j, "ncclSend / ncclRecv (curve)", rank);
      }
    if (rank == 0) {
      printf("| raw gather, per rank | ncclAllGather ms (sizes rising) | busbw GB/s | ms (sizes falling) | busbw GB/s | grouped "
             "ncclSend / ncclRecv ms (rising) | busbw GB/s | ms (falling) | busbw GB/s |\n|---|---|---|---|---|---|---|---|---|\n");
      for (int k = 0; k < 7; k++) {
        size_t b = ((size_t)lo_mb << k) << 20;
        printf("| %zu MiB | %.3f | %.0f | %.3f | %.0f | %.3f | %.0f | %.3f | %.0f |\n", b >> 20, up[k], busbw(b, W, up[k]), down[k],
               busbw(b, W, down[k]), sr_up[k], busbw(b, W, sr_up[k]), sr_down[k], busbw(b, W, sr_down[k]));
      }
      printf("\n");
    }
    cudaFree(sb);
    cudaFree(rb);
  }
  if (rank == 0)
    printf("| per rank | format | bc_all_gather ms | busbw GB/s (the format: of the bytes it sends, quantize included) | raw gather of its "
           "bytes (rounded up to 256 B; the fastest of ncclAllGather and send / receive, out of place and in place), ms | overhead | "
           "vs the bf16 gather | its rows' bc_quantize alone, ms | bc_all_gather_quantized of the rows quantized (out of place), ms | "
           "its overhead over the fastest raw | raw gather out of place (the own piece copied too), ms | the collective's overhead "
           "over it | bc_all_gather_quantized in place (rows quantized into out's), ms | raw gather in place, ms | the collective's "
           "overhead over it | NCCL's raw gather of its two pieces (data, scales: buffers of their own, in place), ms | the "
           "collective in place over that | cast with a known scale + the gather out of place, ms | vs the bf16 gather | the cast "
           "into its rows of out + the gather in place, ms | vs the bf16 gather |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const int64_t K = 8192;
  const char *fmts[] = { "fp8_e4m3_tensor", "mxfp8_e4m3", "nvfp4" };
  char qlines[8192];
  int qlen = 0;
  qlines[0] = 0;
  int mbs[8], nmb = activation_sizes(mbs);
  if (!nmb) return 1;
  for (int mi = 0; mi < nmb; mi++) {
    const int mb = mbs[mi];
    int64_t M = (int64_t)mb * 1024 * 1024 / (K * 2), rows[8];
    for (int r = 0; r < W; r++) rows[r] = M;
    size_t per = (size_t)(M * K) * 2;
    void *x = dmalloc(per), *all = dmalloc(per * (size_t)W);
    {
      uint16_t *h = malloc(per);
      fill_bf16(h, (size_t)(M * K), 11 + rank);
      CK(cudaMemcpy(x, h, per, cudaMemcpyHostToDevice));
      free(h);
    }
    job j;
    memset(&j, 0, sizeof j);
    j.nc = &nc, j.nccl = own, j.comm = comm, j.send = x, j.recv = all, j.bytes = per;
    float bf = timed(do_nccl_gather, &j, "ncclAllGather of bf16", rank);
    job js = j;
    js.W = W, js.rank = rank, js.send = NULL;
    float bfs = timed(do_nccl_sendrecv, &js, "ncclSend / ncclRecv of bf16", rank);
    if (rank == 0)
      printf("| %d MiB | bf16 (ncclAllGather; send / receive: %.3f ms, %.2fx) | %.3f | %.0f | | | 1.00x |\n", mb, bfs, bf / bfs, bf,
             busbw(per, W, bf));
    for (int fi = 0; fi < 3; fi++) {
      const bc_format *f;
      bc_format_get(ctx, fmts[fi], &f);
      bc_qlayout l;
      bc_qtensor_layout(ctx, f, M * W, K, BC_ROWWISE, 0, &l);
      void *rd = dmalloc(l.data_bytes), *rs = dmalloc(l.scale_bytes);
      float *am = dmalloc(8);
      job g = j;
      g.x = (bc_tensor){ x, BC_BF16, M, K, K };
      g.rows = rows;
      g.q = (bc_qtensor){ f, M * W, K, rd, rs, NULL, NULL, am, am + 1, 0, 0, 0, 0 };
      float q = timed(do_gather, &g, fmts[fi], rank);
      uint64_t sent = 0;
      bc_all_gather_bytes(ctx, f, W, rows, K, BC_ROWWISE, 0, &sent); /* every rank the same count (equal rows: the same for all) */
      /* rounded up to 256 bytes: NCCL's byte gather of a count off a 16-byte multiple is much
       * slower (on 2 H200s, 128 MiB + 4 bytes took 0.806 ms, 128 MiB 0.548), and bc_all_gather
       * sends its pieces (data, scales, amax) as aligned gathers of their own */
      uint64_t sent_al = (sent + 255) / 256 * 256;
      void *s2 = dmalloc(sent_al), *r2 = dmalloc(sent_al * (uint64_t)W);
      job raw = j;
      raw.send = s2, raw.recv = r2, raw.bytes = sent_al;
      raw.W = W, raw.rank = rank;
      /* the raw gather of those bytes four ways: out of place (the rank's piece from a buffer of
       * its own, copied into place too) and in place, each as ncclAllGather and as send / receive;
       * the faster of each pair, and the fastest of the four */
      float rw_out = timed(do_nccl_gather, &raw, "ncclAllGather of the same bytes", rank);
      float t_ = timed(do_nccl_sendrecv_out, &raw, "ncclSend / ncclRecv of the same bytes, out of place", rank);
      if (t_ < rw_out) rw_out = t_;
      float rw_in = timed(do_nccl_gather_in_place, &raw, "ncclAllGather of the same bytes, in place", rank);
      t_ = timed(do_nccl_sendrecv, &raw, "ncclSend / ncclRecv of the same bytes", rank);
      if (t_ < rw_in) rw_in = t_;
      float rw = rw_in < rw_out ? rw_in : rw_out;
      /* block formats send two pieces (data, block scales) from buffers of their own: NCCL's cost
       * for the same two pieces, in place, the faster of two ncclAllGathers and send / receive */
      float rw2 = 0;
      bc_format_info fi_;
      bc_format_get_info(ctx, f, &fi_);
      const uint64_t d_raw = (uint64_t)(M * K) * (uint64_t)fi_.element_bits / 8, d_al = (d_raw + 255) / 256 * 256;
      const uint64_t s_al = sent > d_raw + 64 ? (sent - d_raw + 255) / 256 * 256 : 0; /* a per-tensor amax is no piece */
      if (s_al) time_two(&raw, d_al, s_al, W, rank, &rw2, NULL, NULL);
      /* the local part alone: this rank's rows quantized into a tensor of their own */
      bc_qlayout ll;
      bc_qtensor_layout(ctx, f, M, K, BC_ROWWISE, 0, &ll);
      void *ld_ = dmalloc(ll.data_bytes), *ls_ = dmalloc(ll.scale_bytes);
      job lq = g;
      lq.q = (bc_qtensor){ f, M, K, ld_, ls_, NULL, NULL, am, am + 1, 0, 0, 0, 0 };
      float qa = timed(do_quantize, &lq, "bc_quantize of the rank's rows", rank);
      /* the gather of rows already quantized (per-tensor and NVFP4: with the group's amax, by
       * bc_quantize_comm), alone and after a cast with the scale known (delayed scaling) */
      float *am2 = dmalloc(8);
      job gq = g;
      gq.xq = (bc_qtensor){ f, M, K, ld_, ls_, NULL, NULL, am2, am2 + 1, 0, 0, 0, 0 };
      if (bc_quantize_comm(ctx, comm, &gq.x, &gq.xq, NULL) != BC_OK) {
        fprintf(stderr, "rank %d: bc_quantize_comm: %s\n", rank, bc_last_error(ctx));
        return 1;
      }
      float gqa = timed(do_gather_quantized, &gq, "bc_all_gather_quantized", rank);
      float cgq = timed(do_cast_gather_quantized, &gq, "bc_quantize_cast + bc_all_gather_quantized", rank);
      /* the same, the cast writing straight into this rank's rows (and block scales) of out: the
       * gather then moves nothing of the rank's own (in place) */
      job gi = gq;
      gi.xq.rowwise_data = (char *)rd + (size_t)rank * ll.data_bytes;
      gi.xq.amax = am, gi.xq.scale = am + 1; /* out's own words, as a cast into out's rows would write them */
      /* per tensor: its scale_inv is out's one word */
      gi.xq.rowwise_scale_inv = strcmp(fmts[fi], "fp8_e4m3_tensor") ? (char *)rs + (size_t)rank * ll.scale_bytes : rs;
      float cgi = timed(do_cast_gather_quantized, &gi, "bc_quantize_cast into out + bc_all_gather_quantized in place", rank);
      float gqi = timed(do_gather_quantized, &gi, "bc_all_gather_quantized in place", rank);
      /* queued: the device's time alone, and the host's enqueue time a call */
      qtime q_out = faster(time_queued(do_nccl_gather, &raw, "ncclAllGather of the same bytes", rank),
                           time_queued(do_nccl_sendrecv_out, &raw, "ncclSend / ncclRecv, out of place", rank));
      qtime q_in = faster(time_queued(do_nccl_gather_in_place, &raw, "ncclAllGather in place", rank),
                          time_queued(do_nccl_sendrecv, &raw, "ncclSend / ncclRecv in place", rank));
      /* NCCL's two pieces queued, as above and at the collective's exact sizes (the rank's
       * rows' data and block scales; above: rounded up to 256 bytes, the scales with the amax's
       * 4 bytes) */
      qtime q_two = { 0, 0 }, q_twox = { 0, 0 }, q_twoo = { 0, 0 };
      if (s_al) {
        time_two(&raw, d_al, s_al, W, rank, NULL, &q_two, NULL);
        time_two(&raw, ll.data_bytes, ll.scale_bytes, W, rank, NULL, &q_twox, &q_twoo);
      }
      bc_stats st0, st1, st2;
      bc_get_stats(ctx, &st0);
      qtime q_gqa = time_queued(do_gather_quantized, &gq, "bc_all_gather_quantized", rank);
      bc_get_stats(ctx, &st1);
      qtime q_gqi = time_queued(do_gather_quantized, &gi, "bc_all_gather_quantized in place", rank);
      bc_get_stats(ctx, &st2);
      const double calls = (double)reps * BATCH;
      cudaFree(am2);
      cudaFree(ld_);
      cudaFree(ls_);
      if (rank == 0) {
        char two_ms[32] = "(one piece)", two_ov[32] = "";
        if (rw2 > 0) {
          snprintf(two_ms, sizeof two_ms, "%.3f", rw2);
          snprintf(two_ov, sizeof two_ov, "%+.1f%%", 100.0 * (gqi / rw2 - 1));
        }
        printf("| %d MiB | %s | %.3f | %.0f | %.3f | %+.1f%% | %.2fx | %.3f | %.3f | %+.1f%% | %.3f | %+.1f%% | %.3f | %.3f | %+.1f%% | %s | %s "
               "| %.3f | %.2fx | %.3f | %.2fx |\n", mb, fmts[fi], q, busbw(sent, W, q), rw, 100.0 * (q / rw - 1), bf / q, qa, gqa,
               100.0 * (gqa / rw - 1), rw_out, 100.0 * (gqa / rw_out - 1), gqi, rw_in, 100.0 * (gqi / rw_in - 1), two_ms, two_ov, cgq,
               bf / cgq, cgi, bf / cgi);
        char two_q[48] = "(one piece)", twox_q[48] = "(one piece)", twoo_q[48] = "(one piece)";
        if (s_al) {
          snprintf(two_q, sizeof two_q, "%.3f (%.0f)", q_two.dev_ms, q_two.host_us);
          snprintf(twox_q, sizeof twox_q, "%.3f (%.0f)", q_twox.dev_ms, q_twox.host_us);
          snprintf(twoo_q, sizeof twoo_q, "%.3f (%.0f)", q_twoo.dev_ms, q_twoo.host_us);
        }
        qlen += snprintf(qlines + qlen, sizeof qlines - qlen,
                         "| %d MiB | %s | %.3f (%.0f) | %.3f (%.0f) | %+.1f%% | %.3f (%.0f) | %.3f (%.0f) | %+.1f%% | %s | %s | %s | %.2f / %.2f |\n",
                         mb, fmts[fi], q_out.dev_ms, q_out.host_us, q_gqa.dev_ms, q_gqa.host_us, 100.0 * (q_gqa.dev_ms / q_out.dev_ms - 1),
                         q_in.dev_ms, q_in.host_us, q_gqi.dev_ms, q_gqi.host_us, 100.0 * (q_gqi.dev_ms / q_in.dev_ms - 1), two_q, twox_q,
                         twoo_q, (double)(st1.launches - st0.launches) / calls, (double)(st2.launches - st1.launches) / calls);
        if (qlen >= (int)sizeof qlines) qlen = (int)sizeof qlines - 1;
      }
      fflush(stdout);
      cudaFree(rd);
      cudaFree(rs);
      cudaFree(am);
      cudaFree(s2);
      cudaFree(r2);
    }
    cudaFree(x);
    cudaFree(all);
  }
  if (rank == 0)
    printf("\n| queued (the device's time, the batch enqueued behind a 5 ms hold; in parentheses the host's enqueue time a call, us) "
           "| format | raw gather out of place, ms | bc_all_gather_quantized out of place, ms | its overhead | raw gather in place, ms | "
           "bc_all_gather_quantized in place, ms | its overhead | NCCL's two pieces in place, ms | the same at the collective's exact piece "
           "sizes, ms | NCCL's two pieces out of place (exact sizes, the own pieces copied too), ms | the collective's kernel launches a call "
           "(out of place / in place) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n%s",
           qlines);
  /* the sharded cast of a ~1B-parameter model, every rank its ZeRO range */
  int64_t shape[65][2];
  int n = model_1b(shape);
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += shape[i][0] * shape[i][1];
  const int64_t lo = total / W * rank, hi = rank == W - 1 ? total : total / W * (rank + 1);
  float *master = dmalloc((size_t)(hi - lo) * 4);
  CK(cudaMemset(master, 0x3F, (size_t)(hi - lo) * 4));
  if (rank == 0)
    printf("\n| sharded cast (1B model, %d-way ZeRO) | ms | kernels' floor ms | raw all-reduce ms | step / (floor + all-reduce) | "
           "the same with the reads its scaling needs (tensor amax: the shard twice) |\n|---|---|---|---|---|---|\n", W);
  const char *sf[] = { "fp8_e4m3_tensor", "fp8_block_128x128", "mxfp8_e4m3", "nvfp4" };
  for (int c = 0; c < 4; c++) {
    const bc_format *f;
    bc_format_get(ctx, sf[c], &f);
    bc_format_info info;
    bc_format_get_info(ctx, f, &info);
    int dirs = info.block == BC_BLOCK_1D ? 3 : 1;
    bc_shard sh[65];
    bc_qtensor qs[65];
    void *bufs[65][4];
    memset(bufs, 0, sizeof bufs);
    double bytes = (double)(hi - lo) * 4;
    int64_t base = 0;
    size_t nvec = 0;
    for (int i = 0; i < n; i++) {
      int64_t N = shape[i][0] * shape[i][1], a, b;
      zero_part(lo, hi, base, N, &a, &b);
      sh[i] = (bc_shard){ master + (base + a - lo), BC_FP32, a, b - a, 0 };
      qs[i] = (bc_qtensor){ f, shape[i][0], shape[i][1], NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0 };
      for (int d = 0; d < 2; d++) {
        if (!(dirs & (1 << d))) continue;
        bc_qlayout l;
        bc_qtensor_layout(ctx, f, shape[i][0], shape[i][1], d ? BC_COLUMNWISE : BC_ROWWISE, 0, &l);
        bufs[i][2 * d] = dmalloc(l.data_bytes);
        bufs[i][2 * d + 1] = dmalloc(l.scale_bytes);
        if (d) qs[i].columnwise_data = bufs[i][2], qs[i].columnwise_scale_inv = bufs[i][3];
        else qs[i].rowwise_data = bufs[i][0], qs[i].rowwise_scale_inv = bufs[i][1];
        bytes += (double)(b - a) * info.element_bits / 8 + (info.block == BC_BLOCK_TENSOR ? 0 : (double)(b - a) / (double)N * l.scale_bytes);
      }
      float *am = dmalloc(8);
      qs[i].amax = am, qs[i].scale = am + 1;
      /* the vector bc_shard_cast all-reduces (bc_shard.c's layout): tensor amaxes, W x 2 x (3 + nbc) per blocked pass */
      if (info.block == BC_BLOCK_TENSOR || info.two_level) nvec++;
      if (info.block != BC_BLOCK_TENSOR) {
        nvec += (size_t)W * 2 * (3 + (size_t)((shape[i][1] + info.block_cols - 1) / info.block_cols));
        if (dirs & 2) nvec += (size_t)W * 2 * (3 + (size_t)shape[i][1]);
      }
      base += N;
    }
    job j;
    memset(&j, 0, sizeof j);
    j.nc = &nc, j.nccl = own, j.comm = comm;
    j.n = n, j.sh = sh, j.qs = qs;
    float step = timed(do_shard, &j, sf[c], rank);
    j.vec = dmalloc(nvec * 4), j.nvec = nvec;
    CK(cudaMemset(j.vec, 0, nvec * 4));
    float ar = timed(do_nccl_allreduce, &j, "ncclAllReduce", rank);
    double floor_ms = bytes / (gbs * 1e9) * 1e3;
    /* per-tensor current scaling and NVFP4's tensor level: no code before every rank's amax is
     * known, so the shard is read twice (bench_shard.c says why) */
    const int two_reads = info.block == BC_BLOCK_TENSOR || info.two_level;
    double floor2_ms = floor_ms + (two_reads ? (double)(hi - lo) * 4 / (gbs * 1e9) * 1e3 : 0);
    if (rank == 0)
      printf("| %s %s | %.3f | %.3f | %.3f | %.2fx | %.2fx |\n", sf[c], dirs == 3 ? "both" : "rowwise", step, floor_ms, ar,
             step / (floor_ms + ar), step / (floor2_ms + ar));
    fflush(stdout);
    for (int i = 0; i < n; i++) {
      for (int k = 0; k < 4; k++) cudaFree(bufs[i][k]);
      cudaFree(qs[i].amax);
    }
    cudaFree(j.vec);
  }
  cudaFree(master);
  bc_comm_destroy(comm);
  nc.destroy(own);
  bc_ctx_destroy(ctx);
  return 0;
}

int main(int argc, char **argv) {
  int cm = mt_count_main(argc, argv);
  if (cm >= 0) return cm;
  if (argc > 4 && !strcmp(argv[1], "--rank")) return rank_main(atoi(argv[2]), atoi(argv[3]), argv[4]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int mbs[8];
  if (!activation_sizes(mbs)) return 2; /* said why; the ranks read the same list */
  char why[256], *end = NULL;
  int n = mt_gpu_count(argv[0], why, sizeof why);
  if (n < 0) {
    printf("bench_multi: counting the GPUs failed: %s\n", why);
    return 1;
  }
  long want = argc > 1 ? strtol(argv[1], &end, 10) : (n < 8 ? n : 8);
  if (argc > 2 || (argc > 1 && (!end || *end || want < 2 || want > 8))) {
    printf("usage: bench_multi [W]   (W: 2 to 8 ranks, one GPU each; default: every GPU, at most 8)\n");
    return 2;
  }
  int W = (int)want;
  if (n < 2 || W > n) {
    printf("# bench_multi needs %d GPUs, %d here (%s)\n", W < 2 ? 2 : W, n, why);
    return n < 2 ? 0 : 1;
  }
  char dir[] = "/tmp/blockcast-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  unsigned limit = mt_timeout(540);
  pid_t pids[8];
  int st[8];
  int started = mt_spawn(argv[0], W, dir, limit, pids);
  int bad = mt_wait(started, pids, st) > 0 || started < W;
  for (int r = 0; r < started; r++) {
    char log[600], buf[4096], how[96];
    mt_log_path(log, sizeof log, dir, r);
    FILE *fp = fopen(log, "r");
    size_t k;
    while (fp && (k = fread(buf, 1, sizeof buf, fp)) > 0) fwrite(buf, 1, k, stdout);
    if (fp) fclose(fp);
    if (!WIFEXITED(st[r]) || WEXITSTATUS(st[r])) printf("# rank %d %s\n", r, mt_status_text(st[r], how, sizeof how));
  }
  if (started < W) printf("# only %d of %d ranks could be started\n", started, W);
  mt_cleanup(dir, W);
  return bad;
}
