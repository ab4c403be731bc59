/* comm/bc_side.c: a communicator's side stream (bc_comm.h: bci_comm_fork, bci_comm_join), in a
 * file of its own so that the transports (bc_nccl.c: a rank's own piece copied beside an
 * exchange) and the operations (bc_shard.c) both stand on it without calling each other. */
#include "comm/bc_comm.h"

void *bci_comm_fork(bc_comm *comm, void *stream) {
  if (!bci_side_ready(&comm->side) || bci_cu.EventRecord(comm->side.fork, (CUstream)stream) != CUDA_SUCCESS ||
      bci_cu.StreamWaitEvent(comm->side.stream, comm->side.fork, 0) != CUDA_SUCCESS)
    return NULL;
  return comm->side.stream;
}

bc_status bci_comm_join(bc_ctx *ctx, bc_comm *comm, const char *fn, void *stream) {
  CUresult r = bci_cu.EventRecord(comm->side.join, comm->side.stream);
  if (r == CUDA_SUCCESS) r = bci_cu.StreamWaitEvent((CUstream)stream, comm->side.join, 0);
  if (r == CUDA_SUCCESS) return BC_OK;
  bci_cu.StreamSynchronize(comm->side.stream);
  return bci_fail(ctx, BC_ERR_CUDA, "%s: ordering the caller's stream after the communicator's side stream failed: %s (%d)", fn,
                  bci_cu_error_name(r), (int)r);
}
