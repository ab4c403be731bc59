/* comm/bc_local.c: the local transport: W ranks of one process, one thread each, on one or
 * several GPUs. A collective is two host rendezvous of the W threads around device copies:
 *   1. each rank records `ready` on its stream (its inputs are written) and arrives with its
 *      call's signature, its event and its send buffers;
 *   2. each rank's stream waits for every rank's `ready`, then copies what it receives (every
 *      rank pulls into its own buffers: cuMemcpyAsync between device pointers, across devices
 *      too), records `done` and arrives again;
 *   3. each rank's stream waits for every rank's `done` (no one reuses a buffer another rank
 *      may still be reading), and the call returns.
 * The host never waits for the GPU; the threads wait for each other. The slots a rank fills
 * are double-buffered by the rendezvous' parity: a rank can be at most one rendezvous ahead of
 * another, so the slots of the previous one are never overwritten while read. The events are
 * re-recorded only after every rank has issued its waits on them (a later rendezvous). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/bc_comm.h"

typedef struct slot {
  char sig[BCI_COMM_SIG];
  int phase;                  /* 0: an agreement check, 1 and 2: a collective's two rendezvous */
  int failed;                 /* this rank failed earlier in the call (its buffers are not to be read) */
  CUevent ev;
  int njobs;
  const bci_gather_job *jobs;
} slot;

struct bci_hub {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int size, refs;
  int arrived;
  uint64_t gen;
  int broken;
  char why[1024];
  double timeout;             /* seconds: $BLOCKCAST_COMM_TIMEOUT when the group was made */
  slot slots[2][BCI_COMM_MAX_LOCAL];
};

/* $BLOCKCAST_COMM_TIMEOUT (default 600 s), at most 10^9 s */
static double timeout_s(void) {
  const char *e = getenv("BLOCKCAST_COMM_TIMEOUT");
  double t = e ? strtod(e, NULL) : 0;
  if (!(t > 0)) t = 600.0;
  return t < 1e9 ? t : 1e9;
}

bc_status bc_comm_create_local(bc_ctx *ctx, int nranks, bc_comm **comms) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!comms) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_create_local: argument 'comms' is NULL; expected an array of nranks bc_comm *");
  if (nranks < 1 || nranks > BCI_COMM_MAX_LOCAL)
    return bci_fail(ctx, BC_ERR_ARG, "bc_comm_create_local: nranks is %d; expected 1 to %d ranks", nranks, BCI_COMM_MAX_LOCAL);
  for (int r = 0; r < nranks; r++) comms[r] = NULL;
  struct bci_hub *h = calloc(1, sizeof *h);
  if (!h) return bci_fail(ctx, BC_ERR_NOMEM, "bc_comm_create_local: out of memory");
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  h->size = h->refs = nranks;
  h->timeout = timeout_s();
  for (int r = 0; r < nranks; r++) {
    bc_comm *c = calloc(1, sizeof *c);
    if (!c) {
      for (int q = 0; q < r; q++) free(comms[q]);
      for (int q = 0; q < r; q++) comms[q] = NULL;
      pthread_cond_destroy(&h->cv);
      pthread_mutex_destroy(&h->mu);
      free(h);
      return bci_fail(ctx, BC_ERR_NOMEM, "bc_comm_create_local: out of memory");
    }
    c->transport = BC_TRANSPORT_LOCAL;
    c->rank = r;
    c->size = nranks;
    c->hub = h;
    comms[r] = c;
  }
  return BC_OK;
}

void bci_local_destroy(bc_comm *comm) {
  struct bci_hub *h = comm->hub;
  if (comm->ready) bci_cu.EventDestroy(comm->ready);
  if (comm->done) bci_cu.EventDestroy(comm->done);
  if (!h) return;
  pthread_mutex_lock(&h->mu);
  int last = --h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (last) {
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
  }
}


/* Arrive with this rank's slot and wait for all ranks; *out: the rendezvous' slots. A timeout
 * or an earlier failure breaks the hub for every rank. Then every rank compares the
 * signatures (all see the same slots, so all fail alike). */
static bc_status rendezvous(bc_ctx *ctx, bc_comm *c, const char *fn, const slot *mine, const slot **out) {
  struct bci_hub *h = c->hub;
  pthread_mutex_lock(&h->mu);
  if (h->broken) {
    pthread_mutex_unlock(&h->mu);
    return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s: the local communicator is unusable since an earlier failure: %s", fn, h->why);
  }
  uint64_t g = h->gen;
  slot *s = &h->slots[g & 1][0];
  s[c->rank] = *mine;
  if (++h->arrived == h->size) {
    h->arrived = 0;
    h->gen++;
    pthread_cond_broadcast(&h->cv);
  } else {
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    const double t = h->timeout;
    dl.tv_sec += (time_t)t;
    dl.tv_nsec += (long)((t - (double)(time_t)t) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
      dl.tv_sec++;
      dl.tv_nsec -= 1000000000L;
    }
    while (h->gen == g && !h->broken) {
      int rc = pthread_cond_timedwait(&h->cv, &h->mu, &dl);
      if (rc != 0 && rc != EINTR && h->gen == g && !h->broken) {
        h->broken = 1;
        snprintf(h->why, sizeof h->why,
                 "rank %d waited %g s in %s for the other ranks (%d of %d arrived); every rank must make the same "
                 "collective calls in the same order (BLOCKCAST_COMM_TIMEOUT sets the wait)",
                 c->rank, t, fn, h->arrived, h->size);
        pthread_cond_broadcast(&h->cv);
      }
    }
    if (h->gen == g) {
      pthread_mutex_unlock(&h->mu);
      return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s: %s", fn, h->why);
    }
  }
  pthread_mutex_unlock(&h->mu);
  *out = s;
  for (int r = 0; r < c->size; r++) {
    if (strcmp(s[r].sig, s[0].sig) != 0 || s[r].njobs != s[0].njobs || s[r].phase != s[0].phase)
      return bci_fail(ctx, BC_ERR_ARG, "%s: rank 0 called '%s' (step %d, %d pieces) but rank %d called '%s' (step %d, %d pieces); "
                      "every rank must make the same call with agreeing arguments", fn, s[0].sig, s[0].phase, s[0].njobs, r,
                      s[r].sig, s[r].phase, s[r].njobs);
  }
  return BC_OK;
}

bc_status bci_local_check(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig) {
  slot me = { .njobs = 0 };
  snprintf(me.sig, sizeof me.sig, "%s", sig);
  const slot *all;
  return rendezvous(ctx, comm, fn, &me, &all);
}

/* this rank's events, made in its current CUDA context */
static bc_status events(bc_ctx *ctx, bc_comm *c) {
  bc_status s = bci_cuda_load(ctx);
  if (s != BC_OK) return s;
  CUcontext cu = NULL;
  BCI_CU(ctx, bci_cu.CtxGetCurrent(&cu));
  if (c->ready && cu == c->cu) return BC_OK;
  if (c->ready) bci_cu.EventDestroy(c->ready);
  if (c->done) bci_cu.EventDestroy(c->done);
  c->ready = c->done = NULL;
  BCI_CU(ctx, bci_cu.EventCreate(&c->ready, CU_EVENT_DISABLE_TIMING));
  BCI_CU(ctx, bci_cu.EventCreate(&c->done, CU_EVENT_DISABLE_TIMING));
  c->cu = cu;
  return BC_OK;
}

static bc_status wait_all(bc_ctx *ctx, bc_comm *c, const slot *all, void *stream) {
  for (int r = 0; r < c->size; r++)
    if (r != c->rank) BCI_CU(ctx, bci_cu.StreamWaitEvent((CUstream)stream, all[r].ev, 0));
  return BC_OK;
}

/* A rank that cannot take part in a collective still arrives, with a signature that says so:
 * the others then fail naming it instead of waiting. Returns s with this rank's own message. */
static bc_status fail_together(bc_ctx *ctx, bc_comm *c, const char *sig, bc_status s) {
  char msg[BCI_ERR_MAX];
  snprintf(msg, sizeof msg, "%s", bc_last_error(ctx));
  slot me = { .njobs = -1 };
  snprintf(me.sig, sizeof me.sig, "%.200s (failed on rank %d)", sig, c->rank);
  const slot *all;
  rendezvous(ctx, c, sig, &me, &all);
  return bci_fail(ctx, s, "%s", msg);
}

bc_status bci_local_gatherv(bc_ctx *ctx, bc_comm *c, const char *sig, bc_status prior, int njobs, const bci_gather_job *jobs,
                            void *stream) {
  const char *fn = sig;
  bc_status s = events(ctx, c);
  if (s == BC_OK && bci_cu.EventRecord(c->ready, (CUstream)stream) != CUDA_SUCCESS)
    s = bci_fail(ctx, BC_ERR_CUDA, "%s: cuEventRecord on the caller's stream failed", fn);
  if (s != BC_OK) return fail_together(ctx, c, sig, s);
  char prior_msg[BCI_ERR_MAX] = "";
  if (prior != BC_OK) snprintf(prior_msg, sizeof prior_msg, "%s", bc_last_error(ctx));
  slot me = { .phase = 1, .failed = prior != BC_OK, .ev = c->ready, .njobs = njobs, .jobs = jobs };
  snprintf(me.sig, sizeof me.sig, "%s", sig);
  const slot *all;
  s = rendezvous(ctx, c, fn, &me, &all);
  if (s != BC_OK) return s;
  /* a rank that failed earlier in the call: nobody reads its buffers, and every rank fails */
  int failed = -1;
  for (int r = 0; r < c->size && failed < 0; r++)
    if (all[r].failed) failed = r;
  if (prior != BC_OK) s = bci_fail(ctx, prior, "%s", prior_msg);
  else if (failed >= 0)
    s = bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s: rank %d failed earlier in this call (its own call returns why); no result here", fn,
                 failed);
  if (s == BC_OK) s = wait_all(ctx, c, all, stream);
  for (int j = 0; j < njobs && s == BC_OK; j++) {
    const bci_gather_job *J = &jobs[j];
    for (int r = 0; r < c->size && s == BC_OK; r++) {
      size_t len = J->len[r];
      if (!len) continue;
      unsigned char *dst = (unsigned char *)J->recv + J->off[r];
      const void *src = all[r].jobs[j].send;
      if (r == c->rank && src == dst) continue;
      CUresult e = bci_cu.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, (CUstream)stream);
      if (e != CUDA_SUCCESS)
        s = bci_fail(ctx, BC_ERR_CUDA, "%s: copying %zu bytes from rank %d failed: %s", fn, len, r, bci_cu_error_name(e));
    }
  }
  /* the second rendezvous even after a failed copy: the other ranks are waiting for it */
  if (bci_cu.EventRecord(c->done, (CUstream)stream) != CUDA_SUCCESS && s == BC_OK)
    s = bci_fail(ctx, BC_ERR_CUDA, "%s: cuEventRecord failed", fn);
  slot me2 = { .phase = 2, .ev = c->done, .njobs = njobs };
  snprintf(me2.sig, sizeof me2.sig, "%s", sig);
  bc_status s2 = rendezvous(ctx, c, fn, &me2, &all);
  if (s == BC_OK) s = s2;
  if (s2 == BC_OK) {
    bc_status s3 = wait_all(ctx, c, all, stream);
    if (s == BC_OK) s = s3;
  }
  return s;
}

bc_status bci_local_allreduce_max(bc_ctx *ctx, bc_comm *c, const char *sig, bc_status prior, float *buf, int64_t n,
                                  void *stream) {
  const bci_kernel *k;
  bc_status s = bci_kernel_get(ctx, "bc_comm_max", &k);
  /* a rank that cannot proceed still takes part in the rendezvous (with nothing to send) so
   * that the others fail instead of waiting */
  void *ws = NULL;
  size_t bytes = (size_t)n * sizeof(float);
  if (s == BC_OK) s = bci_ws_alloc(ctx, bytes * (size_t)c->size, stream, &ws);
  size_t off[BCI_COMM_MAX_LOCAL], len[BCI_COMM_MAX_LOCAL];
  for (int r = 0; r < c->size; r++) {
    off[r] = (size_t)r * bytes;
    len[r] = bytes;
  }
  if (s != BC_OK) return fail_together(ctx, c, sig, s);
  bci_gather_job J = { buf, ws, off, len };
  s = bci_local_gatherv(ctx, c, sig, prior, 1, &J, stream);
  if (s == BC_OK) {
    int64_t blocks = (n + k->launch.threads - 1) / k->launch.threads;
    unsigned gx = blocks < 1024 ? (unsigned)(blocks > 0 ? blocks : 1) : 1024;
    const float *in = ws;
    int64_t nr = c->size;
    bci_arg args[] = { BCI_ARG(in), BCI_ARG(nr), BCI_ARG(n), BCI_ARG(buf) };
    s = bci_run(ctx, NULL, k, gx, 1, 1, (unsigned)k->launch.threads, 0, stream, args, 4);
  }
  bci_ws_free(ws, stream);
  return s;
}
