/* comm/bc_comm.h: collectives over a communicator (bc_comm) with two transports, NCCL
 * (bc_nccl.c: libnccl.so.2 opened at run time) and local (bc_local.c: W ranks as threads of one
 * process), behind the few primitives below; the algorithms (bc_collective.c: amax all-reduce,
 * quantize with a communicator, the quantized all-gather) are written once over them. Stands on
 * multi/, ops/, jit/, fmt/ and base/. Nothing here is public. */
#ifndef BC_COMM_H
#define BC_COMM_H

#include "multi/bc_multi.h"

#define BCI_COMM_MAX_LOCAL 64
#define BCI_COMM_SIG 256 /* bytes of a call's signature (the agreement check) */

struct bci_hub; /* bc_local.c: the rendezvous of a local communicator's ranks */

/* How an NCCL all-gather's pieces travel (bc_nccl.c, bci_nccl_gatherv): auto chooses; the others
 * are BLOCKCAST_GATHER=collective / sendrecv, set when the communicator is made. */
enum { BCI_GATHER_AUTO = 0, BCI_GATHER_COLLECTIVE = 1, BCI_GATHER_SENDRECV = 2 };

struct bc_comm {
  bc_transport transport;
  int rank, size;
  uint64_t collectives, bytes_sent;
  /* NCCL (bc_nccl.c) */
  void *nccl;    /* ncclComm_t */
  int owns_nccl; /* made by bc_comm_create_nccl (destroyed with the bc_comm), not wrapped */
  int check;     /* BLOCKCAST_COMM_CHECK=1 at creation: the agreement check of each call */
  int gather;    /* BLOCKCAST_GATHER at creation: BCI_GATHER_* (how bci_nccl_gatherv moves a piece) */
  int one_host;  /* every rank on this host: 1 yes, 0 no, -1 not asked yet (asked once, when needed) */
  /* local (bc_local.c) */
  struct bci_hub *hub;
  CUcontext cu;               /* the rank's CUDA context when its events were made */
  CUevent ready, done;        /* this rank's: its inputs are ready / its reads are done */
  /* both transports: a stream of the context's greatest priority for a call's short kernels and
   * its collective, beside the large kernels it leaves on the caller's stream (bci_comm_fork) */
  bci_side side;
};

/* One piece of an all-gather: each rank r contributes len[r] bytes (this rank: `send`, device
 * memory), which land at recv + off[r] on every rank (recv: this rank's device buffer). off and
 * len have comm->size entries and are the same on every rank. A rank's own piece is copied too,
 * unless send == recv + off[rank] (in place). */
typedef struct bci_gather_job {
  const void *send;
  void *recv;
  const size_t *off, *len;
} bci_gather_job;

/* ---- the primitives (bc_transport.c dispatches to the transport) ----
 * sig: the call's signature (what every rank must agree on), NUL-terminated, < BCI_COMM_SIG.
 * prior: this rank's status so far in the call. A rank that failed still takes part (no rank is
 * left waiting) and gets its own status back; on the local transport the other ranks then skip
 * the copies and fail too, naming it (NCCL has no such exchange: its other ranks receive what
 * the failed rank's buffers hold). Counted here: collectives and bytes_sent (the same for both
 * transports). */
/* buf[0 .. n) = MAX over the ranks, in place */
BCI_HIDDEN bc_status bci_comm_allreduce_max(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status prior, float *buf, int64_t n,
                                            void *stream);
/* the jobs of one call as one group (NCCL: one ncclGroupStart/End) */
BCI_HIDDEN bc_status bci_comm_gatherv(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status prior, int njobs,
                                      const bci_gather_job *jobs, void *stream);
/* the argument check of a call with no communication of its own before its first collective
 * (local: free, at the first rendezvous; NCCL: only with comm->check) */
/* The collectives' kernels (comm_*, shard_*) pack 8- and 4-bit codes and take block amaxes that
 * ignore NaN: formats of other element widths or with nan_policy "scale_nan" are refused, naming
 * fn, the entry (what, i; what NULL: no entry) and the format. */
BCI_HIDDEN bc_status bci_comm_format_ok(bc_ctx *ctx, const char *fn, const char *what, int64_t i, const bc_format *f);
BCI_HIDDEN bc_status bci_comm_check_args(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig, void *stream);

/* the agreement check of a call whose own argument checks gave s: a rank that failed takes part
 * with a signature saying so, and gets its own status (and message) back */
BCI_HIDDEN bc_status bci_comm_agree(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig, bc_status s, void *stream);

/* The rank's side stream in the current CUDA context, ordered after `stream` (made once, remade
 * when the context changes): a call forks its short kernels and its collective onto it, and
 * bci_comm_join orders `stream` after them. NULL when it cannot be made (the call then runs
 * everything on `stream`, one kernel after the other). A communicator serves one thread at a
 * time (its rank's), so the stream and its events are the call's alone. */
BCI_HIDDEN void *bci_comm_fork(bc_comm *comm, void *stream);
/* `stream` waits for what the call put on the side stream; a failure to order it synchronizes
 * the side stream and is reported (fn names the call) */
BCI_HIDDEN bc_status bci_comm_join(bc_ctx *ctx, bc_comm *comm, const char *fn, void *stream);

/* ---- NCCL (bc_nccl.c) ---- */
BCI_HIDDEN bc_status bci_nccl_allreduce_max(bc_ctx *ctx, bc_comm *comm, float *buf, int64_t n, void *stream);
BCI_HIDDEN bc_status bci_nccl_gatherv(bc_ctx *ctx, bc_comm *comm, int njobs, const bci_gather_job *jobs, void *stream);
/* all-gather of the signatures and comparison (synchronizes the stream) */
BCI_HIDDEN bc_status bci_nccl_check(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig, void *stream);
BCI_HIDDEN void bci_nccl_destroy(bc_comm *comm);

/* ---- local (bc_local.c) ---- */
BCI_HIDDEN bc_status bci_local_allreduce_max(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status prior, float *buf, int64_t n,
                                             void *stream);
BCI_HIDDEN bc_status bci_local_gatherv(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status prior, int njobs,
                                       const bci_gather_job *jobs, void *stream);
BCI_HIDDEN bc_status bci_local_check(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig);
BCI_HIDDEN void bci_local_destroy(bc_comm *comm);

#endif
