/* base/bc_base.h: the floor every other layer stands on. Error reporting, the context struct,
 * file helpers, SHA-256 and the CUDA driver / NVRTC entry points opened at run time. Files here
 * call nothing of the runtime outside base/ (tests/15-layers checks it; the map is in
 * runtime/README.md). Nothing here is public. */
#ifndef BC_BASE_H
#define BC_BASE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>

#include "blockcast.h"

#define BCI_HIDDEN __attribute__((visibility("hidden")))

static inline int bci_aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

/* floor(t / d) for every t < 2^31 as (t * m) >> s (templates/common.cuh: bc_udiv31), for
 * 1 <= d < 2^31: l = ceil(log2 d), m = ceil(2^(31 + l) / d) (< 2^32), s = 31 + l. Exact because
 * m d - 2^(31 + l) < d <= 2^l (Granlund and Montgomery, 1994, theorem 4.2 with N = 31). A kernel
 * finds its tile's row this way instead of by a 64-bit division. */
static inline void bci_udiv31(uint32_t d, uint32_t *m, uint32_t *s) {
  int l = 0;
  while (l < 31 && (1u << l) < d) l++;
  *m = (uint32_t)(((1ull << (31 + l)) + d - 1) / d);
  *s = (uint32_t)(31 + l);
}

/* ---- the context ----
 * Defined here so that every layer can fail into it and read what it owns; the fields belong to
 * the layer named beside them, which alone writes them. Created and destroyed in ctx/. */
struct lua_State;
struct bci_kmap_entry;
struct bci_aot_entry;
struct bci_list_state;

#define BCI_ERR_MAX 8192

struct bc_ctx {
  uint64_t id;                    /* ctx: unique in the process (keys per-thread caches) */
  pthread_mutex_t lock;           /* ctx: guards the Lua state, the formats and the kernel map */
  struct lua_State *L;            /* jit/bc_lua.c: the generator */
  size_t lua_mem, lua_mem_limit;  /* jit/bc_lua.c */
  bc_format **formats;            /* fmt/bc_format.c: the registry */
  size_t nformats, cap_formats;
  struct bci_kmap_entry *kmap;    /* jit/bc_kernel.c: loaded kernels, open addressing, key "name@arch" */
  size_t kmap_cap, kmap_n;
  struct bci_aot_entry *aot;      /* jit/bc_aot.c: the AOT index */
  size_t naot;
  int aot_indexed;
  bc_stats stats;                 /* counted by jit/ */
  struct bci_list_state *list;    /* multi/bc_list.c: the reusable buffers of list calls */
  bc_log_fn log;                  /* ctx: the caller's log callback (bc_set_log), or NULL */
  void *log_user;
  unsigned log_once;              /* base: the BCI_LOG_ONCE_* notices already given */
  char *tuning_text, *tuning_path; /* jit/bc_kernel.c: this context's tuning override (blockcast tune), or NULL */
  uint64_t kgen;                  /* jit/bc_kernel.c: bumped when loaded kernels are dropped (per-thread caches) */
};

/* ---- errors (bc_error.c) ---- */
/* Set ctx's message and return s. */
BCI_HIDDEN bc_status bci_fail(bc_ctx *ctx, bc_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
BCI_HIDDEN void bci_clear_error(bc_ctx *ctx);
/* A notice to the caller's log callback (none set: nothing). With once != 0 (a BCI_LOG_ONCE_*
 * bit), only the first such notice of the context is given. */
enum { BCI_LOG_ONCE_GATHER_FALLBACK = 1 };
BCI_HIDDEN void bci_log(bc_ctx *ctx, bc_log_level level, unsigned once, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The message of an inner failure, prefixed with the call and the entry it was for:
 * "fn: noun i: <message>" (a leading "fn: " of the message itself is not repeated). */
BCI_HIDDEN bc_status bci_fail_entry(bc_ctx *ctx, bc_status s, const char *fn, const char *noun, int64_t i);

/* ---- files and strings (bc_fs.c) ---- */
BCI_HIDDEN char *bci_strdup(const char *s);
/* a then b into path via a unique temp file + rename (no torn files); 0 or -1 */
BCI_HIDDEN int bci_write_atomic(const char *path, const void *a, size_t an, const void *b, size_t bn);
/* mkdir -p; 0 or -1 (errno set) */
BCI_HIDDEN int bci_mkdir_p(const char *path);
/* the whole file (NUL-terminated, at most 64 MiB) into *out (malloc'ed) */
BCI_HIDDEN bc_status bci_read_file(bc_ctx *ctx, const char *path, char **out, size_t *len);

/* ---- sha256 (bc_sha256.c) ---- */
typedef struct bci_sha256 {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t fill;
} bci_sha256;
BCI_HIDDEN void bci_sha256_init(bci_sha256 *s);
BCI_HIDDEN void bci_sha256_update(bci_sha256 *s, const void *data, size_t n);
BCI_HIDDEN void bci_sha256_final(bci_sha256 *s, unsigned char out[32]);
BCI_HIDDEN void bci_sha256_hex(const void *data, size_t n, char out[65]);
/* Which compression runs: mode 0 forces the portable code, 1 the SHA extensions where the CPU
 * has them, -1 asks; returns 1 while the SHA extensions are in use (tests compare the paths). */
BCI_HIDDEN int bci_sha256_accel(int mode);

/* ---- CUDA driver and NVRTC, opened at run time (bc_dl.c) ----
 * Each entry point is requested from cuGetProcAddress at the exact version whose prototype
 * cudaTypedefs.h gives (PFN_<name>_v<version>), so a driver that also has a newer variant
 * (cuCtxGetDevice_v2 takes a context in CUDA 13) still hands back the one we call. */
BCI_HIDDEN bc_status bci_cuda_load(bc_ctx *ctx);
BCI_HIDDEN bc_status bci_nvrtc_load(bc_ctx *ctx);
/* The driver's name of a result ("CUDA_ERROR_OUT_OF_MEMORY"), "?" where it has none, for messages. */
BCI_HIDDEN const char *bci_cu_error_name(CUresult r);
/* The calling thread's current CUDA context (cuCtxGetCurrent). Between bci_cu_hold() and
 * bci_cu_release() (a list call: one thread, nothing in it changes the current context) the
 * driver is asked once and the answer reused, as is bci_cuda_device's device check: a list entry
 * otherwise asked 3 to 6 times. The library loads the driver before the first call. */
BCI_HIDDEN CUresult bci_cu_current(CUcontext *c);
BCI_HIDDEN void bci_cu_hold(void);
BCI_HIDDEN void bci_cu_release(void);
/* Current device's arch ("sm_90") and SM count; fails without a context. */
BCI_HIDDEN bc_status bci_cuda_device(bc_ctx *ctx, char arch[16], int *sm_count);
BCI_HIDDEN bc_status bci_cuda_memset32(bc_ctx *ctx, void *dptr, uint32_t value, size_t count, void *stream);
/* A side stream of the context's greatest priority and its fork / join events, made in the
 * current CUDA context (remade when it changes): the lists' stages (multi/bc_list.c) and
 * bc_shard_cast (comm/) run short kernels on one beside the large ones of the caller's stream. */
typedef struct bci_side {
  CUstream stream;
  CUevent fork, join;
  CUcontext cu;
} bci_side;
/* 1 when sd is ready in the current context, 0 when it cannot be made (run on one stream) */
BCI_HIDDEN int bci_side_ready(bci_side *sd);
/* synchronizes and destroys what sd holds */
BCI_HIDDEN void bci_side_drop(bci_side *sd);
/* sd's stream (ready) ordered after `stream`'s work so far, and `stream` after sd's stream's
 * work (a failed join synchronizes sd's stream, so nothing is left unordered): the failing
 * driver call's result, or CUDA_SUCCESS */
BCI_HIDDEN CUresult bci_side_fork(bci_side *sd, void *stream);
BCI_HIDDEN CUresult bci_side_join(bci_side *sd, void *stream);
/* a stream-ordered device workspace (cuMemAllocAsync; 0 bytes: NULL) and its release on a stream */
BCI_HIDDEN bc_status bci_ws_alloc(bc_ctx *ctx, size_t bytes, void *stream, void **out);
BCI_HIDDEN void bci_ws_free(void *p, void *stream);

typedef struct bci_cuda_api {
  PFN_cuInit_v2000 Init;
  PFN_cuDriverGetVersion_v2020 DriverGetVersion;
  PFN_cuGetErrorName_v6000 GetErrorName;
  PFN_cuGetErrorString_v6000 GetErrorString;
  PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
  PFN_cuCtxGetDevice_v2000 CtxGetDevice;
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
  PFN_cuLibraryLoadData_v12000 LibraryLoadData;
  PFN_cuLibraryUnload_v12000 LibraryUnload;
  PFN_cuLibraryGetKernel_v12000 LibraryGetKernel;
  PFN_cuLaunchKernelEx_v11060 LaunchKernelEx;
  PFN_cuMemsetD32Async_v3020 MemsetD32Async;
  PFN_cuKernelSetAttribute_v12000 KernelSetAttribute;
  /* lists (multi/bc_list.c): item tables in pinned memory, copied to a device buffer */
  PFN_cuMemAlloc_v3020 MemAlloc;
  PFN_cuMemFree_v3020 MemFree;
  PFN_cuMemcpyHtoDAsync_v3020 MemcpyHtoDAsync;
  PFN_cuMemHostAlloc_v2020 MemHostAlloc;
  PFN_cuMemFreeHost_v2000 MemFreeHost;
  PFN_cuEventCreate_v2000 EventCreate;
  PFN_cuEventRecord_v2000 EventRecord;
  PFN_cuEventQuery_v2000 EventQuery;
  PFN_cuEventSynchronize_v2000 EventSynchronize;
  PFN_cuEventDestroy_v4000 EventDestroy;
  PFN_cuStreamSynchronize_v2000 StreamSynchronize;
  /* collectives (comm/): stream-ordered workspaces, device copies and cross-stream order */
  PFN_cuMemAllocAsync_v11020 MemAllocAsync;
  PFN_cuMemFreeAsync_v11020 MemFreeAsync;
  PFN_cuMemcpyAsync_v4000 MemcpyAsync;
  PFN_cuStreamWaitEvent_v3020 StreamWaitEvent;
  PFN_cuMemcpy2DAsync_v3020 Memcpy2DAsync;
  PFN_cuMemcpyDtoHAsync_v3020 MemcpyDtoHAsync;
  PFN_cuStreamIsCapturing_v10000 StreamIsCapturing;
  /* blockcast tune (runtime/tune.c): its own device context and timing */
  PFN_cuDeviceGet_v2000 DeviceGet;
  PFN_cuDeviceGetName_v2000 DeviceGetName;
  PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
  PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
  PFN_cuEventElapsedTime_v2000 EventElapsedTime;
  PFN_cuMemsetD8Async_v3020 MemsetD8Async;
  /* lists: a side stream for a stage's smaller groups (multi/bc_list.c) */
  PFN_cuStreamCreateWithPriority_v5050 StreamCreateWithPriority;
  PFN_cuStreamDestroy_v4000 StreamDestroy;
  PFN_cuCtxGetStreamPriorityRange_v5050 CtxGetStreamPriorityRange;
} bci_cuda_api;

typedef struct bci_nvrtc_api {
  __typeof__(nvrtcGetErrorString) *GetErrorString;
  __typeof__(nvrtcVersion) *Version;
  __typeof__(nvrtcCreateProgram) *CreateProgram;
  __typeof__(nvrtcDestroyProgram) *DestroyProgram;
  __typeof__(nvrtcCompileProgram) *CompileProgram;
  __typeof__(nvrtcGetProgramLogSize) *GetProgramLogSize;
  __typeof__(nvrtcGetProgramLog) *GetProgramLog;
  __typeof__(nvrtcGetCUBINSize) *GetCUBINSize;
  __typeof__(nvrtcGetCUBIN) *GetCUBIN;
  __typeof__(nvrtcGetPTXSize) *GetPTXSize;
  __typeof__(nvrtcGetPTX) *GetPTX;
  __typeof__(nvrtcGetNumSupportedArchs) *GetNumSupportedArchs;
  __typeof__(nvrtcGetSupportedArchs) *GetSupportedArchs;
} bci_nvrtc_api;

extern BCI_HIDDEN bci_cuda_api bci_cu;
extern BCI_HIDDEN bci_nvrtc_api bci_nvrtc;

/* Map a failed driver call to BC_ERR_CUDA with the statement and the driver's error name. */
#define BCI_CU(ctx, call)                                                                              \
  do {                                                                                                 \
    CUresult bci_r_ = (call);                                                                          \
    if (bci_r_ != CUDA_SUCCESS) {                                                                      \
      const char *bci_m_ = "?";                                                                        \
      if (bci_cu.GetErrorString) bci_cu.GetErrorString(bci_r_, &bci_m_);                               \
      return bci_fail((ctx), BC_ERR_CUDA, "%s failed: %s (%d): %s", #call, bci_cu_error_name(bci_r_),   \
                      (int)bci_r_, bci_m_);                                                            \
    }                                                                                                  \
  } while (0)
#endif
