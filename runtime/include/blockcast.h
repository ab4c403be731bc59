/* blockcast.h: the public C API of blockcast, the only header a user includes.
 *
 * A context (bc_ctx) is passed first to every call. Formats are immutable values owned by the
 * context, obtained by name (built-in specs) or by spec path. Tensors are plain descriptors of
 * memory the caller owns. Every call returns a bc_status and, on failure, leaves a message in
 * the context (bc_last_error) that says what was wrong and what would be right. The library
 * never prints, exits or aborts on bad input.
 *
 * The library loads without a GPU driver: libcuda and libnvrtc are opened at run time; calls
 * that need them return BC_ERR_UNAVAILABLE with a message when they are missing. GPU calls run
 * on the caller's current CUDA context and the stream passed in (NULL: the default stream).
 */
#ifndef BLOCKCAST_H
#define BLOCKCAST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BC_API __attribute__((visibility("default")))
#else
#define BC_API
#endif

#define BC_VERSION_MAJOR 0
#define BC_VERSION_MINOR 1
#define BC_VERSION_PATCH 0

typedef enum bc_status {
  BC_OK = 0,
  BC_ERR_ARG,          /* a bad argument: the message names it and what is accepted */
  BC_ERR_SPEC,         /* a spec file failed to load or validate: file:line, field, expected, found */
  BC_ERR_UNSUPPORTED,  /* a valid request this version or format cannot do */
  BC_ERR_NOMEM,        /* host memory */
  BC_ERR_CUDA,         /* a CUDA driver call failed: the call and the driver's error */
  BC_ERR_NVRTC,        /* NVRTC failed to compile: log, options, source excerpt */
  BC_ERR_NCCL,         /* an NCCL call failed */
  BC_ERR_UNAVAILABLE,  /* a needed library or device is missing (no driver, no GPU, no NVRTC) */
  BC_ERR_INTERNAL      /* a bug in blockcast: please report the message */
} bc_status;

/* Name of a status ("BC_ERR_ARG"); never NULL. */
BC_API const char *bc_status_string(bc_status s);

typedef enum bc_dtype {
  BC_FP32 = 0,
  BC_BF16 = 1,
  BC_FP16 = 2
} bc_dtype;

BC_API const char *bc_dtype_name(bc_dtype t);
BC_API size_t bc_dtype_size(bc_dtype t); /* 0 for an unknown dtype */

typedef struct bc_ctx bc_ctx;
typedef struct bc_format bc_format;

/* ---- context ------------------------------------------------------------------------------ */

/* Create a context: loads the embedded generator and the built-in specs. On failure *out is
 * NULL; a message, if any, goes to errbuf (may be NULL) of errbuf_size bytes. */
BC_API bc_status bc_ctx_create(bc_ctx **out, char *errbuf, size_t errbuf_size);
BC_API void bc_ctx_destroy(bc_ctx *ctx);

/* The message of the last failed call on ctx made by this thread ("" if none): each thread
 * reads its own (a context may be shared by threads). Valid until this thread's next call. */
BC_API const char *bc_last_error(const bc_ctx *ctx);

/* A log callback for notices that are not errors (e.g. a collective taking a slower path);
 * the library never prints. Called on the thread of the call, outside the library's locks;
 * fn NULL turns it off. */
typedef enum bc_log_level {
  BC_LOG_INFO = 0,
  BC_LOG_WARN = 1
} bc_log_level;
typedef void (*bc_log_fn)(void *user, bc_log_level level, const char *message);
BC_API void bc_set_log(bc_ctx *ctx, bc_log_fn fn, void *user);

/* ---- formats ------------------------------------------------------------------------------ */

/* A built-in or already loaded format by name ("fp8_e4m3_tensor"). */
BC_API bc_status bc_format_get(bc_ctx *ctx, const char *name, const bc_format **out);
/* Load a format spec file (validated; kernels are generated and compiled when first used). */
BC_API bc_status bc_format_load(bc_ctx *ctx, const char *spec_path, const bc_format **out);
/* Load every spec of a path: a spec file, or a directory (its *.lua files, sorted by name).
 * bc_ctx_create does this for each entry of $BLOCKCAST_SPEC_PATH (colon-separated). */
BC_API bc_status bc_spec_path_add(bc_ctx *ctx, const char *path);
/* Number of formats known to ctx and the i-th one (load order). */
BC_API size_t bc_format_count(const bc_ctx *ctx);
BC_API const bc_format *bc_format_at(const bc_ctx *ctx, size_t i);

typedef enum bc_block_kind {
  BC_BLOCK_TENSOR = 0, /* one scale for the whole tensor */
  BC_BLOCK_1D = 1,     /* 1 x N blocks along a row (N x 1 for the columnwise direction) */
  BC_BLOCK_2D = 2      /* N x N blocks, one scale shared by both directions */
} bc_block_kind;

typedef struct bc_format_info {
  const char *name;
  const char *description;
  const char *spec_file;
  const char *element;       /* "e4m3" */
  int element_bits;
  bc_block_kind block;
  float element_max;         /* largest finite element value */
  int has_rowwise, has_columnwise;
  int columnwise_transposed; /* columnwise data is [cols, rows] */
  int block_rows, block_cols; /* rowwise block shape in elements (0 x 0 for per-tensor) */
  const char *scale_type;    /* "fp32", "e8m0", "ue4m3": the type of the scale_inv entries */
  const char *scale_rule;    /* "amax", "rceil", "floor", "two_level" */
  int scale_bytes;           /* bytes per scale_inv entry */
  int two_level;             /* a per-tensor fp32 scale (from q->amax) on top of the block scales */
  int stochastic_rounding;   /* the spec allows stochastic rounding (bc_qtensor.stochastic_rounding) */
  int element_pack;          /* elements per packing group: data rows hold a multiple (8-bit 1, 4-bit 2, 6-bit 4) */
  int element_pack_bytes;    /* bytes of a packing group (1; 3 for 6-bit elements) */
  const char *nan_policy;    /* "satfinite": NaN inputs encode as the element's NaN code, else its nan_encode
                                (+max unless the element says otherwise);
                                "scale_nan": also, a block holding a NaN gets the scale type's NaN */
} bc_format_info;

BC_API bc_status bc_format_get_info(bc_ctx *ctx, const bc_format *fmt, bc_format_info *info);

/* ---- tensors ------------------------------------------------------------------------------ */

/* A high-precision 2D tensor [rows, cols] in device memory: element (r, c) is at
 * data + (r * row_stride + c) * bc_dtype_size(dtype). row_stride >= cols (0 means cols).
 * Leading dims are flattened into rows by the caller. */
typedef struct bc_tensor {
  void *data;
  bc_dtype dtype;
  int64_t rows, cols;
  int64_t row_stride;
} bc_tensor;

/* A quantized tensor of logical shape [rows, cols]. A direction is present when its data
 * pointer is set: quantize writes every present direction in one read of the input.
 * bc_qtensor_layout gives the exact shape and byte size of every buffer.
 *   rowwise_data        [rows, cols] codes, row-major (4-bit elements: two per byte, the order
 *                       given by the spec; element 2j in the low nibble for the built-in specs)
 *   columnwise_data     transposed [cols, rows], or [rows, cols] when the spec says so (MXFP8)
 *   *_scale_inv         per-tensor formats: fp32[1] each (written by quantize).
 *                       block formats: one entry per block (fp32, e8m0 or ue4m3 bytes) in the
 *                       spec's layout, padding written as zeros; or in the 128x4 GEMM swizzle
 *                       when scale_swizzled is set.
 *   amax, scale         per-tensor formats: fp32[1] each, device memory; bc_quantize writes
 *                       both (current scaling), bc_quantize_cast reads scale.
 *                       two-level formats (NVFP4): amax is the global amax, fp32[1]: bc_quantize
 *                       writes it, bc_quantize_cast and bc_dequantize read it; scale is unused.
 *                       other block formats: both unused (scales are computed per block).
 *   stochastic_rounding formats whose spec allows it: round stochastically with Philox4x32-10
 *                       keyed by (sr_seed, sr_offset) and each element's index, so the bits do
 *                       not depend on the launch configuration. */
typedef struct bc_qtensor {
  const bc_format *format;
  int64_t rows, cols;
  void *rowwise_data;
  void *rowwise_scale_inv;
  void *columnwise_data;
  void *columnwise_scale_inv;
  float *amax;
  float *scale;
  int scale_swizzled;
  int stochastic_rounding;
  uint64_t sr_seed, sr_offset;
} bc_qtensor;

typedef enum bc_direction {
  BC_ROWWISE = 1,
  BC_COLUMNWISE = 2
} bc_direction;

/* Bytes of a direction's data / scale_inv buffer for a format and shape (0 if the format has
 * no such direction). */
BC_API bc_status bc_qtensor_sizes(bc_ctx *ctx, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir,
                           size_t *data_bytes, size_t *scale_inv_bytes);

/* The exact buffers of one direction of a quantized tensor. Data is a [data_rows, data_cols]
 * matrix of elements, row-major, data_bytes in all. Scales: a stored [scale_rows, scale_cols]
 * matrix of scale_elem_bytes entries (scale_bytes in all), of which the blocks use
 * [scale_valid_rows, scale_valid_cols] (the rest is padding, written as zeros); with
 * scale_swizzled the same entries in the 128x4 GEMM swizzle (scale_rows a multiple of 128,
 * scale_cols of 4). Per-tensor formats: one fp32 entry. A shape the format cannot hold (an odd
 * row length for 4-bit elements) is BC_ERR_ARG naming the dimension and the multiple needed. */
typedef struct bc_qlayout {
  int64_t data_rows, data_cols;
  size_t data_bytes;
  int64_t scale_rows, scale_cols;
  int64_t scale_valid_rows, scale_valid_cols;
  size_t scale_elem_bytes, scale_bytes;
} bc_qlayout;

BC_API bc_status bc_qtensor_layout(bc_ctx *ctx, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir,
                                   int scale_swizzled, bc_qlayout *out);

/* Convert the scale_inv tensor of one direction of a [rows, cols] quantized tensor between the
 * compact layout and the 128x4 GEMM swizzle: from_swizzled 0 reads compact and writes swizzled,
 * 1 the reverse. src and dst are device buffers of the sizes bc_qtensor_layout gives; they must
 * not overlap. Padding is written as zeros. */
BC_API bc_status bc_scale_swizzle(bc_ctx *ctx, const bc_format *fmt, int64_t rows, int64_t cols, bc_direction dir,
                                  const void *src, int from_swizzled, void *dst, void *stream);

/* ---- operations (asynchronous on `stream`, a CUstream / cudaStream_t; NULL = default) ------- */

/* amax = max |x| over the tensor (NaN ignored) into device fp32[1] `amax`. */
BC_API bc_status bc_amax(bc_ctx *ctx, const bc_tensor *x, float *amax, void *stream);

/* amax over a range of x's elements: [start, start + len) of x flattened row by row (element
 * (r, c) is number r * cols + c; rows may be strided), NaN ignored; len 0 gives 0. The partial
 * amax of a shard of a flattened weight (ZeRO / FSDP), before an all-reduce. */
BC_API bc_status bc_amax_range(bc_ctx *ctx, const bc_tensor *x, int64_t start, int64_t len, float *amax, void *stream);

/* scale and scale_inv (device fp32[1] each; scale_inv may be NULL) from a device amax by the
 * format's scale rule. */
BC_API bc_status bc_compute_scale(bc_ctx *ctx, const bc_format *fmt, const float *amax, float *scale, float *scale_inv,
                           void *stream);

/* Per-tensor formats, current scaling: amax of x -> q->amax, scale -> q->scale, then cast into
 * every present direction of q (one read of x for both directions).
 * Block formats: block amax, block scales and the cast of every present direction in one read
 * of x; two-level formats (NVFP4) first write the global amax of x to q->amax. */
BC_API bc_status bc_quantize(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q, void *stream);

/* Cast only, with the scale already in q->scale (delayed scaling, or a scale computed from an
 * all-reduced amax). Two-level formats: with the global amax already in q->amax (e.g. all-reduced
 * over a communicator). Other block formats: the same as bc_quantize. */
BC_API bc_status bc_quantize_cast(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q, void *stream);

/* Dequantize one direction of q into out. Its shape is the direction's data shape: [rows, cols]
 * for rowwise, [cols, rows] for transposed columnwise data (bc_qtensor_layout: data_rows x
 * data_cols elements). */
BC_API bc_status bc_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out, void *stream);

/* ---- lists of tensors --------------------------------------------------------------------- */

typedef enum bc_amax_algo {
  BC_AMAX_MAX = 0,         /* the largest amax of the history (a NaN in it wins, as torch.max) */
  BC_AMAX_MOST_RECENT = 1  /* the amax of the step just done (history row 0) */
} bc_amax_algo;

/* Delayed scaling of n tensors of one per-tensor-scaled format in one launch, by
 * TransformerEngine's rule. history: device fp32 [history_len, n], row-major; row 0 holds the amax
 * of the step just done (e.g. written by bc_amax into &history[i]). For each tensor i:
 *   a = the amax the algo picks from column i;
 *   a > 0 and finite: scale[i] = (element_max / a) / 2^margin (fp32, each division rounded once;
 *   an Inf result becomes FLT_MAX; a spec with pow2 keeps sign and exponent); otherwise scale[i]
 *   keeps its value; scale_inv[i] = 1 / scale[i] (scale_inv may be NULL);
 *   then the history rolls: row j takes row j + 1, row history_len - 1 takes the old row 0, and
 *   row 0 is zeroed for the next step's amax.
 * scale and scale_inv: device fp32[n]. 0 <= margin <= 126; history_len >= 1; n >= 0 (0: nothing). */
BC_API bc_status bc_delayed_scale_update(bc_ctx *ctx, const bc_format *fmt, int64_t n, int history_len, float *history,
                                         float *scale, float *scale_inv, int margin, bc_amax_algo algo, void *stream);

/* Lists: the operations above on n tensors at once, one launch per kernel however many tensors
 * (each tensor gets the blocks its own launch would have, so the results are bit-identical to
 * n single calls, and one large tensor and thousands of small ones share the GPU). A tensor's
 * launches keep their order (a per-tensor quantize is zero -> amax -> scale -> cast; all
 * tensors' amaxes run before any scale). Entries are plain arrays of n descriptors; mixed
 * shapes, strides, dtypes and formats are fine; entries with 0 rows or 0 cols are skipped
 * (bc_amax_list writes 0 for them). Every entry is checked before anything is launched: a bad
 * one fails the call, launches nothing and names its index ("tensor 17: ..."); outputs that
 * overlap between entries are refused. n = 0 does nothing.
 * Per call: the launches' item tables (the arguments and grid of every tensor, ~100-200 bytes
 * each) are built in a pinned buffer of the context, copied on `stream` to a stream-ordered
 * device allocation (cuMemAllocAsync) and freed there after the launches; no host
 * synchronization (a call waits only when 16 earlier calls' copies are all still pending).
 * One context may be used from several threads: list calls take the context's list lock. */

/* amax[i] = max |x[i]| (device fp32[n]: one array, e.g. for one all-reduce of the list). */
BC_API bc_status bc_amax_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, float *amax, void *stream);
/* amax[i] = bc_amax_range of x[i] over [start[i], start[i] + len[i]) (host int64[n] arrays). */
BC_API bc_status bc_amax_range_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, const int64_t *start, const int64_t *len,
                                    float *amax, void *stream);
/* scale[i], scale_inv[i] (may be NULL) from amax[i] by fmt's rule; device fp32[n] each. */
BC_API bc_status bc_compute_scale_list(bc_ctx *ctx, const bc_format *fmt, int64_t n, const float *amax, float *scale,
                                       float *scale_inv, void *stream);
/* bc_quantize / bc_quantize_cast of x[i] into q[i], each q[i] with its own format and buffers. */
BC_API bc_status bc_quantize_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, bc_qtensor *q, void *stream);
BC_API bc_status bc_quantize_cast_list(bc_ctx *ctx, int64_t n, const bc_tensor *x, bc_qtensor *q, void *stream);
/* bc_dequantize of direction dir of q[i] into out[i]. */
BC_API bc_status bc_dequantize_list(bc_ctx *ctx, int64_t n, const bc_qtensor *q, bc_direction dir, const bc_tensor *out,
                                    void *stream);
/* bc_scale_swizzle of each job (all in the same direction of conversion). */
typedef struct bc_swizzle_job {
  const bc_format *format;
  int64_t rows, cols;
  bc_direction dir;
  const void *src;
  void *dst;
} bc_swizzle_job;
BC_API bc_status bc_scale_swizzle_list(bc_ctx *ctx, int64_t n, const bc_swizzle_job *jobs, int from_swizzled, void *stream);

/* Grouped (mixture of experts): x is [sum(group_rows), cols], split along its rows into groups
 * of any size (0 and 1 included); group g is quantized as a tensor of its own [group_rows[g],
 * cols] (its own amax, scales) into one set of buffers, at the offsets bc_grouped_layout gives:
 *   rowwise data       groups one after another: the same bytes as the whole tensor's rowwise
 *                      data ([sum, cols], row-major);
 *   columnwise data    each group's [cols, group_rows[g]] (transposed formats) or
 *                      [group_rows[g], cols] block, one after another;
 *   block scale_inv    each group's own scale matrix, as bc_qtensor_layout gives it for its
 *                      shape (padding included), one after another; with scale_swizzled each
 *                      group's matrix is the 128x4 GEMM swizzle padded to whole 128 x 4 tiles,
 *                      the padded-per-group layout grouped GEMMs read;
 *   per-tensor formats scale_inv, amax and scale are fp32[groups] (entry g for group g);
 *   NVFP4 (two-level)  amax is fp32[groups]: the global amax of each group.
 * offsets is bc_group_offsets[groups + 1]: offsets[g] the byte offsets of group g in each
 * buffer of the directions asked (a mask: BC_ROWWISE, BC_COLUMNWISE or both; the others stay
 * 0), offsets[groups] the total sizes to allocate. A group whose shape the format cannot hold
 * (odd rows for 4-bit columnwise data) fails naming the group. */
typedef struct bc_group_offsets {
  size_t rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv;
} bc_group_offsets;
BC_API bc_status bc_grouped_layout(bc_ctx *ctx, const bc_format *fmt, int64_t groups, const int64_t *group_rows, int64_t cols,
                                   int directions, int scale_swizzled, bc_group_offsets *offsets);
/* q: rows = sum(group_rows), cols, the base pointers of the buffers above (the directions whose
 * data pointer is set, laid out as bc_grouped_layout gives for them); each group reads
 * q->amax + g / q->scale + g and stochastic rounding uses sr_offset + g. An empty group writes
 * nothing (not even its amax / scale entries). */
BC_API bc_status bc_quantize_grouped(bc_ctx *ctx, const bc_tensor *x, int64_t groups, const int64_t *group_rows,
                                     const bc_qtensor *q, void *stream);

/* ---- collectives ------------------------------------------------------------------------- */

/* A communicator: the ranks a collective runs over, passed to each call that communicates (a
 * format never stores one, so forward and backward may use different groups). Two transports,
 * same API, same results, same bytes counted:
 *   NCCL   libnccl.so.2, opened at run time (BC_ERR_UNAVAILABLE without it; everything else
 *          still works): one process (or thread) per GPU, made from a bc_comm_id, or wrapping
 *          an ncclComm_t the caller already has.
 *   local  W ranks in one process, one thread each, on one or several GPUs (several ranks may
 *          share one): each collective is a host rendezvous of the W threads, then device
 *          copies on each rank's stream ordered by events. For testing pipelines on one GPU,
 *          and for a rank count NCCL cannot put on one device.
 * Collectives are asynchronous on the caller's stream, as kernels are: no call waits for the
 * GPU (the local transport's threads wait for each other on the host, not for the GPU), except
 * once per NCCL communicator with BLOCKCAST_GATHER=auto: its first all-gather of large pieces
 * asks whether every rank is on one host and waits for the answer (not under stream capture:
 * README.md, "Collectives"). Every
 * rank of a communicator makes the same collective calls in the same order with agreeing
 * arguments; the local transport checks the agreement at each rendezvous (a mismatch fails
 * every rank with a message naming both), NCCL checks it when BLOCKCAST_COMM_CHECK=1 (a small
 * metadata all-gather that synchronizes the host: for debugging). A local rank that waits
 * longer than $BLOCKCAST_COMM_TIMEOUT seconds (default 600) for the others fails, and the
 * communicator is then unusable (every later call fails saying why). A rank that fails during
 * a call still takes part in the call's collectives: over the local transport its peers then
 * fail too, naming it; over NCCL they cannot know (they receive what its buffers hold), and a
 * rank that returns before a collective leaves its NCCL peers waiting, as NCCL itself does.
 * The local transport is tested with every rank on one GPU. */
typedef struct bc_comm bc_comm;

#define BC_COMM_ID_BYTES 128
/* NCCL's unique id (ncclUniqueId): made by one rank, handed to the others out of band. */
typedef struct bc_comm_id {
  unsigned char bytes[BC_COMM_ID_BYTES];
} bc_comm_id;

BC_API bc_status bc_comm_id_create(bc_ctx *ctx, bc_comm_id *id);
/* As 256 lowercase hex digits + NUL (an environment variable's value), and back. */
BC_API bc_status bc_comm_id_to_string(bc_ctx *ctx, const bc_comm_id *id, char out[2 * BC_COMM_ID_BYTES + 1]);
BC_API bc_status bc_comm_id_from_string(bc_ctx *ctx, const char *hex, bc_comm_id *id);

/* NCCL communicator of nranks ranks; this process is `rank`, on the current CUDA device. Its
 * all-gathers move their pieces as $BLOCKCAST_GATHER says when it is made (here, by
 * bc_comm_bootstrap or bc_comm_wrap_nccl; the same on every rank): auto (default), collective
 * (ncclAllGather) or sendrecv (grouped ncclSend / ncclRecv); README.md says when auto takes which. */
BC_API bc_status bc_comm_create_nccl(bc_ctx *ctx, const bc_comm_id *id, int nranks, int rank, bc_comm **out);
/* Bootstrap without MPI: `where` is "env:NAME" (the id's hex in environment variable NAME, e.g.
 * made by `blockcast comm-id`) or a file path (rank 0 makes an id and writes it there atomically;
 * the other ranks wait up to timeout_s seconds for the file). Then bc_comm_create_nccl. */
BC_API bc_status bc_comm_bootstrap(bc_ctx *ctx, const char *where, int nranks, int rank, double timeout_s, bc_comm **out);
/* Wrap the caller's ncclComm_t (passed as void *); bc_comm_destroy leaves it to the caller. A
 * blocking communicator (NCCL's default; one made with config.blocking = 0 answers ncclInProgress,
 * which is reported as a failure). Every rank wraps it alike: a wrapper's first all-gather of
 * large pieces asks its ranks a question (BLOCKCAST_GATHER=auto), so a rank that made a new
 * wrapper where the others kept theirs would ask alone. */
BC_API bc_status bc_comm_wrap_nccl(bc_ctx *ctx, void *nccl_comm, bc_comm **out);
/* Local transport: comms[0 .. nranks) (1 <= nranks <= 64), comms[r] for the thread of rank r. */
BC_API bc_status bc_comm_create_local(bc_ctx *ctx, int nranks, bc_comm **comms);
/* Each rank destroys its own; NULL is fine. Not while a call on it is in flight on the host. */
BC_API void bc_comm_destroy(bc_comm *comm);

typedef enum bc_transport {
  BC_TRANSPORT_NCCL = 1,
  BC_TRANSPORT_LOCAL = 2
} bc_transport;

typedef struct bc_comm_info {
  bc_transport transport;
  int rank, size;
  uint64_t collectives; /* collective operations issued by this rank */
  uint64_t bytes_sent;  /* bytes this rank contributed: an all-gather's send buffer (once, not
                           per receiver), an all-reduce's buffer; what bc_all_gather_bytes and
                           the table in README.md count */
} bc_comm_info;
BC_API bc_status bc_comm_get_info(bc_ctx *ctx, const bc_comm *comm, bc_comm_info *out);

/* amax[0 .. n) = MAX over the ranks, in place (device fp32[n]): one collective for a list. */
BC_API bc_status bc_amax_allreduce(bc_ctx *ctx, bc_comm *comm, float *amax, int64_t n, void *stream);

/* bc_quantize with the amax reduced over comm: per-tensor formats (current scaling) amax of x ->
 * all-reduce MAX -> scale -> cast; two-level formats (NVFP4) the global amax likewise; other
 * block formats need no communication (the same as bc_quantize). The list form makes one
 * all-reduce for the whole list, and one launch per kernel. Each rank's result is what
 * bc_quantize writes for the tensor whose amax is the group's. */
BC_API bc_status bc_quantize_comm(bc_ctx *ctx, bc_comm *comm, const bc_tensor *x, bc_qtensor *q, void *stream);
BC_API bc_status bc_quantize_list_comm(bc_ctx *ctx, bc_comm *comm, int64_t n, const bc_tensor *x, bc_qtensor *q,
                                       void *stream);

/* The sharded cast of master weights (ZeRO / FSDP). Each rank holds a shard of every weight:
 * elements [start, start + len) of the weight flattened row by row (any start and len; len 0:
 * the rank holds nothing of it and still takes part), in fp32, bf16 or fp16. bc_shard_cast casts
 * the shards of a list of weights: the partial amaxes (per tensor, and per block of the block
 * bands the shard cuts) -> ONE all-reduce MAX for the whole list -> scales -> the cast of every
 * shard into its place in q[i], the WHOLE weight's buffers ([rows, cols], the layout of
 * bc_qtensor_layout, compact or swizzled scales); a constant number of launches per call,
 * however many weights. It writes only what the rank owns: the codes of its elements (in every
 * direction asked), the block scales of the blocks whose first element it holds (for formats with
 * a scale per row, of the row's part of the block), and nothing else of the data and scale
 * buffers (a byte shared with another rank's 4-bit element is read, its nibble replaced, written
 * back). Per-tensor and two-level formats: every rank writes the same amax (and scale, and per
 * tensor the rowwise scale_inv) from the group's amax; with given_scale, q->scale holds the scale
 * (delayed scaling) and q->amax receives the group's amax.
 * The gather is the caller's (the step before it is this call, the step after it bc_shard_finish).
 * Exact for any partition: with the data and block-scale buffers zeroed before the cast, a
 * byte-wise sum over the ranks (ncclAllReduce, ncclUint8, ncclSum: an OR here, as the ranks' bits
 * are disjoint) gives every rank the buffers bc_quantize of the whole weight writes (not the
 * per-tensor scale_inv, amax and scale: every rank already holds the group's, do not sum them). (An all-gather
 * of byte ranges works for 8-bit rowwise data, rank r's bytes [start, start + len); 4-bit data
 * and block scales need the sum.) Per-tensor and 2D-block formats cast rowwise only (their
 * columnwise data is the transpose of the rowwise data): after the gather, bc_shard_finish builds
 * it; 1D formats cast both directions here. */
typedef struct bc_shard {
  const void *data;  /* device: the shard's len elements */
  bc_dtype dtype;    /* BC_FP32, BC_BF16 or BC_FP16 */
  int64_t start, len;
  int given_scale;   /* per-tensor formats: 1 = q->scale is given (delayed scaling) */
} bc_shard;
BC_API bc_status bc_shard_cast(bc_ctx *ctx, bc_comm *comm, int64_t n, const bc_shard *shards, bc_qtensor *q, void *stream);
/* After the gather, the columnwise copy of per-tensor and 2D-block formats from the gathered
 * rowwise data and scales of q[i] (whole weights; entries of 1D formats, or without
 * columnwise_data, are skipped): the transposed data (4-bit repacked) and the columnwise scales
 * (per tensor: the same scale_inv; 2D: the block grid transposed); a constant number of launches
 * for the list. With bc_shard_cast, every direction is bit-identical to bc_quantize of the whole
 * weight. */
BC_API bc_status bc_shard_finish(bc_ctx *ctx, int64_t n, const bc_qtensor *q, void *stream);

/* Quantized all-gather along the first dimension (sequence parallelism). Rank r holds rows
 * [sum(rows[0 .. r)), sum(rows[0 .. r])) of a [sum(rows), cols] tensor: x is that local part
 * ([rows[rank], cols], any dtype and row stride; rows[r] may be 0 and may differ). out is the
 * whole tensor's quantized form with the directions asked (data pointers set), in the layout of
 * bc_qtensor_layout (scales compact or swizzled). On every rank out is bit-identical to
 * bc_quantize of the whole tensor on one GPU; per-tensor and two-level formats take the amax of
 * the whole tensor (reduced over comm; out->amax and out->scale are written as bc_quantize
 * writes them). Any split is exact: where a block straddles ranks, the ranks exchange the
 * partial amaxes of their boundary blocks and quantize those blocks with their true scales;
 * only quantized data, scales and those amaxes travel. Columnwise data that follows from the
 * gathered rowwise data (per-tensor and 2D-block formats) is built locally, not sent.
 * rows: [size] row counts, the same on every rank; x has the same dtype on every rank. Up to 64
 * ranks; no stochastic rounding; per-tensor and 2D-block formats need transposed columnwise
 * data (their columnwise copy is a transpose of the rowwise one). */
BC_API bc_status bc_all_gather(bc_ctx *ctx, bc_comm *comm, const bc_tensor *x, const int64_t *rows, bc_qtensor *out,
                               void *stream);

/* The all-gather of an already quantized input: xq is this rank's rows quantized as a tensor of
 * their own (out's format; per-tensor and NVFP4 with the group's amax, as bc_quantize_comm makes
 * them: their scale and amax are taken from xq), with the directions out asks (per-tensor and
 * 2D-block formats: the rowwise one; their columnwise copy is built locally). Where no block of
 * a gathered direction straddles ranks, the pieces are gathered as they are and out is
 * bit-identical to bc_quantize of the whole tensor. Where blocks straddle ranks, a rank's
 * blocks are not the whole tensor's: xq's rowwise data is dequantized (fp32) and gathered as
 * bc_all_gather does, so out is the exact quantization of the gathered dequantized values (the
 * log callback is told once per context). xq may be this rank's own rows of out (its rowwise data
 * at out's row sum(rows[0 .. rank)), its compact block scales at their place in out's when the
 * ranks' rows are whole multiples of the scale padding, e.g. 128 for the MX formats): the gather
 * is then in place and the rank's own piece does not move; xq's amax, scale and scale_inv words
 * may be out's too (nothing is then copied). Per-tensor formats: out's scale and
 * scale_inv are xq's; a rank without rows computes them from the group's amax as
 * bc_quantize_comm does, so with a scale of the caller's own (delayed scaling, bc_quantize_cast)
 * every rank needs rows (not checked: a rank cannot see the others' scales). out's
 * stochastic_rounding must be clear (xq's codes travel as they were rounded). xq->scale_swizzled
 * is the same on every rank, a rank without rows included (it sizes every rank's scale piece). */
BC_API bc_status bc_all_gather_quantized(bc_ctx *ctx, bc_comm *comm, const bc_qtensor *xq, const int64_t *rows, bc_qtensor *out,
                                         void *stream);

/* The bytes rank `rank` sends in bc_all_gather of a [sum(rows), cols] tensor with `directions`
 * (a mask of bc_direction), as the transport counts them (bc_comm_info.bytes_sent): the
 * amax (4, per-tensor and two-level formats), the boundary partial amaxes (8 per block of a
 * block row, when some rank's rows cut block rows), the rank's rows of rowwise data (also for
 * the columnwise copy of per-tensor and 2D-block formats) and of MXFP8's row-major columnwise
 * data, and its block-aligned slab's block scales (up to the last valid entry) and transposed
 * columnwise data. README.md has a table. */
BC_API bc_status bc_all_gather_bytes(bc_ctx *ctx, const bc_format *fmt, int nranks, const int64_t *rows, int64_t cols,
                                     int directions, int rank, uint64_t *bytes);

/* ---- kernels ------------------------------------------------------------------------------ */

/* Names of every kernel for `arch` ("sm_90"; NULL: all), sorted; format NULL: all formats, ""
 * the format-independent ones. Calls fn(name, user) for each. */
BC_API bc_status bc_kernel_names(bc_ctx *ctx, const char *arch, const char *format,
                          void (*fn)(const char *name, void *user), void *user);

/* CUDA C source of a kernel for an arch; *out is malloc'ed, the caller frees it. */
BC_API bc_status bc_kernel_source(bc_ctx *ctx, const char *kernel, const char *arch, char **out, size_t *len);

/* A kernel's image for an arch (no GPU needed): from the disk cache, else compiled with NVRTC
 * and stored in the cache. A cubin for sm_XX, PTX text for compute_XX. *cubin is malloc'ed. */
BC_API bc_status bc_kernel_compile(bc_ctx *ctx, const char *kernel, const char *arch, void **cubin, size_t *len);

typedef struct bc_stats {
  uint64_t nvrtc_compiles;   /* NVRTC compilations made by this context */
  uint64_t aot_hits;         /* kernels found in the ahead-of-time set */
  uint64_t kernels_loaded;   /* kernels loaded into the CUDA context */
  uint64_t cache_hits;       /* kernels read from the disk cache */
  uint64_t cache_misses;     /* kernels not in the disk cache (then compiled) */
  uint64_t cache_writes;     /* kernels written to the disk cache */
  uint64_t cache_bad;        /* cache files that failed verification (treated as misses, replaced) */
  uint64_t launches;         /* kernels launched by this context's calls */
} bc_stats;

BC_API void bc_get_stats(const bc_ctx *ctx, bc_stats *out);

/* ---- CPU reference (plain C, written from the rules; no GPU) ------------------------------ */

/* Encode one fp32 value with a format's element (round to nearest even, saturating, NaN to the
 * element's NaN code) and decode a code to fp32. */
BC_API bc_status bc_ref_encode(bc_ctx *ctx, const bc_format *fmt, float x, uint8_t *code);
BC_API bc_status bc_ref_decode(bc_ctx *ctx, const bc_format *fmt, uint8_t code, float *x);
/* scale_from_amax of the format's rule: scale and scale_inv. */
BC_API bc_status bc_ref_scale(bc_ctx *ctx, const bc_format *fmt, float amax, float *scale, float *scale_inv);
/* Host-memory versions of the operations: same descriptors, host pointers. */
BC_API bc_status bc_ref_amax(bc_ctx *ctx, const bc_tensor *x, float *amax);
BC_API bc_status bc_ref_quantize_cast(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q);
BC_API bc_status bc_ref_quantize(bc_ctx *ctx, const bc_tensor *x, bc_qtensor *q);
BC_API bc_status bc_ref_dequantize(bc_ctx *ctx, const bc_qtensor *q, bc_direction dir, const bc_tensor *out);
/* bc_quantize_grouped on host memory (same layout). */
BC_API bc_status bc_ref_quantize_grouped(bc_ctx *ctx, const bc_tensor *x, int64_t groups, const int64_t *group_rows,
                                         const bc_qtensor *q);
BC_API bc_status bc_ref_delayed_scale_update(bc_ctx *ctx, const bc_format *fmt, int64_t n, int history_len,
                                             float *history, float *scale, float *scale_inv, int margin,
                                             bc_amax_algo algo);

#ifdef __cplusplus
}
#endif
#endif /* BLOCKCAST_H */
