/* comm/bc_transport.c: the primitives the collectives are written over, dispatched to the
 * communicator's transport (bc_nccl.c, bc_local.c), with what every transport shares: the
 * counts of collectives and bytes sent (the same for both, so a test on the local transport
 * predicts NCCL's traffic), bc_comm_get_info and bc_comm_destroy. */
#include <stdlib.h>
#include <string.h>

#include "comm/bc_comm.h"

/* An NCCL step's failure, prefixed with the call (the signature's first word), the rank and the step */
static bc_status nccl_step(bc_ctx *ctx, const bc_comm *comm, const char *sig, const char *step, bc_status s) {
  if (s == BC_OK) return s;
  char *msg = bci_strdup(bc_last_error(ctx));
  s = bci_fail(ctx, s, "%.*s: rank %d of %d, %s over NCCL: %s", (int)strcspn(sig, " "), sig, comm->rank, comm->size, step,
               msg ? msg : "out of memory keeping the message");
  free(msg);
  return s;
}

bc_status bci_comm_allreduce_max(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status prior, float *buf, int64_t n,
                                 void *stream) {
  comm->collectives++;
  comm->bytes_sent += (uint64_t)n * sizeof(float);
  if (comm->transport == BC_TRANSPORT_LOCAL) return bci_local_allreduce_max(ctx, comm, sig, prior, buf, n, stream);
  if (prior == BC_OK) return nccl_step(ctx, comm, sig, "the amax all-reduce", bci_nccl_allreduce_max(ctx, comm, buf, n, stream));
  char msg[BCI_ERR_MAX];
  snprintf(msg, sizeof msg, "%s", bc_last_error(ctx));
  (void)bci_nccl_allreduce_max(ctx, comm, buf, n, stream); /* its peers would wait for it */
  return bci_fail(ctx, prior, "%s", msg);
}

bc_status bci_comm_gatherv(bc_ctx *ctx, bc_comm *comm, const char *sig, bc_status prior, int njobs, const bci_gather_job *jobs,
                           void *stream) {
  comm->collectives++;
  for (int j = 0; j < njobs; j++) comm->bytes_sent += jobs[j].len[comm->rank];
  if (comm->transport == BC_TRANSPORT_LOCAL) return bci_local_gatherv(ctx, comm, sig, prior, njobs, jobs, stream);
  if (prior == BC_OK) return nccl_step(ctx, comm, sig, "the all-gather", bci_nccl_gatherv(ctx, comm, njobs, jobs, stream));
  char msg[BCI_ERR_MAX];
  snprintf(msg, sizeof msg, "%s", bc_last_error(ctx));
  (void)bci_nccl_gatherv(ctx, comm, njobs, jobs, stream); /* its peers would wait for it */
  return bci_fail(ctx, prior, "%s", msg);
}

bc_status bci_comm_format_ok(bc_ctx *ctx, const char *fn, const char *what, int64_t i, const bc_format *f) {
  char msg[160];
  if (f->elem.bits != 8 && f->elem.bits != 4)
    snprintf(msg, sizeof msg, "has %d-bit elements; the collectives take formats of 8- or 4-bit elements", f->elem.bits);
  else if (f->nan_scale)
    snprintf(msg, sizeof msg, "marks blocks holding NaN (nan_policy \"scale_nan\"), which the collectives' partial block amaxes do not");
  else
    return BC_OK;
  if (what) return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: %s %lld: format '%s' %s", fn, what, (long long)i, f->name, msg);
  return bci_fail(ctx, BC_ERR_UNSUPPORTED, "%s: format '%s' %s", fn, f->name, msg);
}

bc_status bci_comm_check_args(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig, void *stream) {
  if (comm->transport == BC_TRANSPORT_LOCAL) return bci_local_check(ctx, comm, fn, sig);
  return comm->check ? bci_nccl_check(ctx, comm, fn, sig, stream) : BC_OK;
}

bc_status bc_comm_get_info(bc_ctx *ctx, const bc_comm *comm, bc_comm_info *out) {
  if (!ctx) return BC_ERR_ARG;
  bci_clear_error(ctx);
  if (!comm || !out) return bci_fail(ctx, BC_ERR_ARG, "bc_comm_get_info: argument '%s' is NULL", comm ? "out" : "comm");
  *out = (bc_comm_info){ comm->transport, comm->rank, comm->size, comm->collectives, comm->bytes_sent };
  return BC_OK;
}

void *bci_comm_fork(bc_comm *comm, void *stream) {
  return bci_side_ready(&comm->side) && bci_side_fork(&comm->side, stream) == CUDA_SUCCESS ? comm->side.stream : NULL;
}

bc_status bci_comm_join(bc_ctx *ctx, bc_comm *comm, const char *fn, void *stream) {
  CUresult r = bci_side_join(&comm->side, stream);
  if (r == CUDA_SUCCESS) return BC_OK;
  return bci_fail(ctx, BC_ERR_CUDA, "%s: ordering the caller's stream after the communicator's side stream failed: %s (%d)", fn,
                  bci_cu_error_name(r), (int)r);
}

void bc_comm_destroy(bc_comm *comm) {
  if (!comm) return;
  bci_side_drop(&comm->side);
  if (comm->transport == BC_TRANSPORT_LOCAL) bci_local_destroy(comm);
  else bci_nccl_destroy(comm);
  free(comm);
}

/* Every rank enters the same collectives: a rank whose arguments failed its own checks still
 * takes part in the agreement check (local transport; NCCL with BLOCKCAST_COMM_CHECK=1) with a
 * signature saying so, so the other ranks fail naming it instead of waiting for it. */
bc_status bci_comm_agree(bc_ctx *ctx, bc_comm *comm, const char *fn, const char *sig, bc_status s, void *stream) {
  if (s == BC_OK) return bci_comm_check_args(ctx, comm, fn, sig, stream);
  if (!comm) return s;
  char *msg = bci_strdup(bc_last_error(ctx));
  char fs[BCI_COMM_SIG];
  snprintf(fs, sizeof fs, "%s: (rank %d failed its argument checks)", fn, comm->rank);
  bci_comm_check_args(ctx, comm, fn, fs, stream);
  s = bci_fail(ctx, s, "%s", msg ? msg : "out of memory keeping the message");
  free(msg);
  return s;
}
