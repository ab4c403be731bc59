/* base/bc_dl.c: open libcuda and libnvrtc at run time, so that the library loads and generates on a
 * machine with no driver; what needs them then returns BC_ERR_UNAVAILABLE with the reason.
 * The resolved entry points are process-wide constants once loaded (pthread_once). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "base/bc_base.h"

bci_cuda_api bci_cu;
bci_nvrtc_api bci_nvrtc;

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT, nvrtc_once = PTHREAD_ONCE_INIT;
static char cuda_err[512], nvrtc_err[1024];
static int cuda_ok, nvrtc_ok;

static void load_cuda(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(cuda_err, sizeof cuda_err, "the CUDA driver (libcuda.so.1) could not be opened: %s; GPU operations need an NVIDIA driver and a GPU", dlerror());
    return;
  }
  typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
  if (!gpa) {
    snprintf(cuda_err, sizeof cuda_err, "the CUDA driver is too old: cuGetProcAddress_v2 is missing; blockcast needs a driver for CUDA 12.0 or newer");
    return;
  }
#define SYM(field, name, ver)                                                                        \
  do {                                                                                               \
    CUdriverProcAddressQueryResult q_;                                                               \
    void *p_ = NULL;                                                                                 \
    if (gpa(name, &p_, ver, CU_GET_PROC_ADDRESS_DEFAULT, &q_) != CUDA_SUCCESS || !p_) {              \
      snprintf(cuda_err, sizeof cuda_err, "the CUDA driver lacks %s (CUDA %d.%d or newer has it); update the driver", \
               name, ver / 1000, ver % 1000 / 10);                                                   \
      return;                                                                                        \
    }                                                                                                \
    memcpy(&bci_cu.field, &p_, sizeof p_);                                                           \
  } while (0)
  SYM(Init, "cuInit", 2000);
  SYM(DriverGetVersion, "cuDriverGetVersion", 2020);
  SYM(GetErrorName, "cuGetErrorName", 6000);
  SYM(GetErrorString, "cuGetErrorString", 6000);
  SYM(CtxGetCurrent, "cuCtxGetCurrent", 4000);
  SYM(CtxGetDevice, "cuCtxGetDevice", 2000);
  SYM(DeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  SYM(LibraryLoadData, "cuLibraryLoadData", 12000);
  SYM(LibraryUnload, "cuLibraryUnload", 12000);
  SYM(LibraryGetKernel, "cuLibraryGetKernel", 12000);
  SYM(LaunchKernelEx, "cuLaunchKernelEx", 11060);
  SYM(MemsetD32Async, "cuMemsetD32Async", 3020);
  SYM(KernelSetAttribute, "cuKernelSetAttribute", 12000);
  SYM(MemAlloc, "cuMemAlloc", 3020);
  SYM(MemFree, "cuMemFree", 3020);
  SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", 3020);
  SYM(MemHostAlloc, "cuMemHostAlloc", 2020);
  SYM(MemFreeHost, "cuMemFreeHost", 2000);
  SYM(EventCreate, "cuEventCreate", 2000);
  SYM(EventRecord, "cuEventRecord", 2000);
  SYM(EventQuery, "cuEventQuery", 2000);
  SYM(EventSynchronize, "cuEventSynchronize", 2000);
  SYM(EventDestroy, "cuEventDestroy", 4000);
  SYM(StreamSynchronize, "cuStreamSynchronize", 2000);
  SYM(MemAllocAsync, "cuMemAllocAsync", 11020);
  SYM(MemFreeAsync, "cuMemFreeAsync", 11020);
  SYM(MemcpyAsync, "cuMemcpyAsync", 4000);
  SYM(StreamWaitEvent, "cuStreamWaitEvent", 3020);
  SYM(Memcpy2DAsync, "cuMemcpy2DAsync", 3020);
  SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", 3020);
  SYM(StreamIsCapturing, "cuStreamIsCapturing", 10000);
  SYM(DeviceGet, "cuDeviceGet", 2000);
  SYM(DeviceGetName, "cuDeviceGetName", 2000);
  SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  SYM(CtxSetCurrent, "cuCtxSetCurrent", 4000);
  SYM(EventElapsedTime, "cuEventElapsedTime", 2000);
  SYM(MemsetD8Async, "cuMemsetD8Async", 3020);
  SYM(StreamCreateWithPriority, "cuStreamCreateWithPriority", 5050);
  SYM(StreamDestroy, "cuStreamDestroy", 4000);
  SYM(CtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 5050);
#undef SYM
  CUresult r = bci_cu.Init(0);
  if (r != CUDA_SUCCESS) {
    snprintf(cuda_err, sizeof cuda_err, "cuInit failed: %s (%d): no usable GPU", bci_cu_error_name(r), (int)r);
    return;
  }
  cuda_ok = 1;
}

const char *bci_cu_error_name(CUresult r) {
  const char *n = "?";
  if (!bci_cu.GetErrorName || bci_cu.GetErrorName(r, &n) != CUDA_SUCCESS || !n) return "?";
  return n;
}

bc_status bci_cuda_load(bc_ctx *ctx) {
  pthread_once(&cuda_once, load_cuda);
  if (!cuda_ok) return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s", cuda_err);
  return BC_OK;
}

static void load_nvrtc(void) {
  const char *names[] = { "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so" };
  void *h = NULL;
  char tried[768] = "";
  for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  const char *home = getenv("CUDA_HOME");
  const char *dirs[] = { home, "/usr/local/cuda" };
  for (size_t d = 0; d < 2 && !h; d++) {
    if (!dirs[d]) continue;
    const char *subs[] = { "lib64", "lib", "targets/x86_64-linux/lib" };
    for (size_t s = 0; s < 3 && !h; s++) {
      char p[512];
      snprintf(p, sizeof p, "%s/%s/libnvrtc.so.13", dirs[d], subs[s]);
      h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
      size_t n = strlen(tried);
      if (!h) snprintf(tried + n, sizeof tried - n, " %s", p);
    }
  }
  if (!h) {
    snprintf(nvrtc_err, sizeof nvrtc_err, "NVRTC (libnvrtc.so.13) could not be opened from the loader path nor from:%s; install the CUDA toolkit or set CUDA_HOME", tried);
    return;
  }
#define SYM(field, name)                                                                              \
  do {                                                                                                \
    void *p_ = dlsym(h, name);                                                                        \
    if (!p_) {                                                                                        \
      snprintf(nvrtc_err, sizeof nvrtc_err, "NVRTC lacks %s; blockcast needs NVRTC 12.0 or newer", name); \
      return;                                                                                         \
    }                                                                                                 \
    memcpy(&bci_nvrtc.field, &p_, sizeof p_);                                                         \
  } while (0)
  SYM(GetErrorString, "nvrtcGetErrorString");
  SYM(Version, "nvrtcVersion");
  SYM(CreateProgram, "nvrtcCreateProgram");
  SYM(DestroyProgram, "nvrtcDestroyProgram");
  SYM(CompileProgram, "nvrtcCompileProgram");
  SYM(GetProgramLogSize, "nvrtcGetProgramLogSize");
  SYM(GetProgramLog, "nvrtcGetProgramLog");
  SYM(GetCUBINSize, "nvrtcGetCUBINSize");
  SYM(GetCUBIN, "nvrtcGetCUBIN");
  SYM(GetPTXSize, "nvrtcGetPTXSize");
  SYM(GetPTX, "nvrtcGetPTX");
  SYM(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  SYM(GetSupportedArchs, "nvrtcGetSupportedArchs");
#undef SYM
  nvrtc_ok = 1;
}

bc_status bci_nvrtc_load(bc_ctx *ctx) {
  pthread_once(&nvrtc_once, load_nvrtc);
  if (!nvrtc_ok) return bci_fail(ctx, BC_ERR_UNAVAILABLE, "%s", nvrtc_err);
  return BC_OK;
}

/* bci_cu_hold: the depth of holds, the number of the outermost hold (each new one counts up),
 * the hold the context below was asked in */
static __thread unsigned cur_depth;
static __thread uint64_t cur_hold, cur_asked;
static __thread CUcontext cur_ctx;

void bci_cu_hold(void) {
  if (cur_depth++ == 0) cur_hold++;
}

void bci_cu_release(void) {
  if (cur_depth > 0) cur_depth--;
}

CUresult bci_cu_current(CUcontext *c) {
  if (cur_depth && cur_asked == cur_hold) {
    *c = cur_ctx;
    return CUDA_SUCCESS;
  }
  CUresult r = bci_cu.CtxGetCurrent(c);
  if (r == CUDA_SUCCESS && cur_depth) {
    cur_ctx = *c;
    cur_asked = cur_hold;
  }
  return r;
}

/* The last answer of this thread, for its (context, device): every launch asks (the arch keys
 * the loaded kernels), and three attribute queries cost more than the rest of a list entry.
 * dev_cache_hold: the hold (bci_cu_hold) in which the device was last checked. */
static __thread CUcontext dev_cache_ctx;
static __thread CUdevice dev_cache_dev;
static __thread char dev_cache_arch[16];
static __thread int dev_cache_sms;
static __thread uint64_t dev_cache_hold;

bc_status bci_cuda_device(bc_ctx *ctx, char arch[16], int *sm_count) {
  bc_status s = bci_cuda_load(ctx);
  if (s != BC_OK) return s;
  CUcontext c = NULL;
  BCI_CU(ctx, bci_cu_current(&c));
  if (!c)
    return bci_fail(ctx, BC_ERR_CUDA, "no current CUDA context on this thread: call cudaSetDevice() (runtime API) or cuCtxSetCurrent() before GPU calls");
  int held = cur_depth && dev_cache_hold == cur_hold; /* checked in this hold: same context, same device */
  CUdevice dev = dev_cache_dev;
  if (!held) BCI_CU(ctx, bci_cu.CtxGetDevice(&dev));
  if (c == dev_cache_ctx && dev == dev_cache_dev && dev_cache_arch[0]) {
    if (cur_depth) dev_cache_hold = cur_hold;
    memcpy(arch, dev_cache_arch, 16);
    if (sm_count) *sm_count = dev_cache_sms;
    return BC_OK;
  }
  int major = 0, minor = 0, sms = 0;
  BCI_CU(ctx, bci_cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  BCI_CU(ctx, bci_cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  BCI_CU(ctx, bci_cu.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  /* arch-specific features (the "a" targets) exist from sm_90 on; sm_90 kernels use none. */
  if (major >= 10)
    snprintf(arch, 16, "sm_%d%da", major, minor);
  else
    snprintf(arch, 16, "sm_%d%d", major, minor);
  if (sm_count) *sm_count = sms;
  dev_cache_ctx = c;
  dev_cache_dev = dev;
  dev_cache_sms = sms;
  dev_cache_hold = cur_depth ? cur_hold : 0;
  memcpy(dev_cache_arch, arch, 16);
  return BC_OK;
}

bc_status bci_cuda_memset32(bc_ctx *ctx, void *dptr, uint32_t value, size_t count, void *stream) {
  bc_status s = bci_cuda_load(ctx);
  if (s != BC_OK) return s;
  BCI_CU(ctx, bci_cu.MemsetD32Async((CUdeviceptr)(uintptr_t)dptr, value, count, (CUstream)stream));
  return BC_OK;
}

void bci_side_drop(bci_side *sd) {
  if (sd->stream) {
    bci_cu.StreamSynchronize(sd->stream);
    bci_cu.StreamDestroy(sd->stream);
  }
  if (sd->fork) bci_cu.EventDestroy(sd->fork);
  if (sd->join) bci_cu.EventDestroy(sd->join);
  memset(sd, 0, sizeof *sd);
}

int bci_side_ready(bci_side *sd) {
  CUcontext cur = NULL;
  if (bci_cu_current(&cur) != CUDA_SUCCESS || !cur) return 0;
  if (sd->stream && sd->cu == cur) return 1;
  bci_side_drop(sd);
  int least = 0, greatest = 0;
  if (bci_cu.CtxGetStreamPriorityRange(&least, &greatest) != CUDA_SUCCESS) greatest = 0;
  if (bci_cu.StreamCreateWithPriority(&sd->stream, CU_STREAM_NON_BLOCKING, greatest) != CUDA_SUCCESS) sd->stream = NULL;
  if (!sd->stream || bci_cu.EventCreate(&sd->fork, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
      bci_cu.EventCreate(&sd->join, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    bci_side_drop(sd);
    return 0;
  }
  sd->cu = cur;
  return 1;
}

CUresult bci_side_fork(bci_side *sd, void *stream) {
  CUresult r = bci_cu.EventRecord(sd->fork, (CUstream)stream);
  return r == CUDA_SUCCESS ? bci_cu.StreamWaitEvent(sd->stream, sd->fork, 0) : r;
}

CUresult bci_side_join(bci_side *sd, void *stream) {
  CUresult r = bci_cu.EventRecord(sd->join, sd->stream);
  if (r == CUDA_SUCCESS) r = bci_cu.StreamWaitEvent((CUstream)stream, sd->join, 0);
  if (r != CUDA_SUCCESS) bci_cu.StreamSynchronize(sd->stream);
  return r;
}

bc_status bci_ws_alloc(bc_ctx *ctx, size_t bytes, void *stream, void **out) {
  *out = NULL;
  if (!bytes) return BC_OK;
  bc_status s = bci_cuda_load(ctx);
  if (s != BC_OK) return s;
  CUdeviceptr p = 0;
  CUresult r = bci_cu.MemAllocAsync(&p, bytes, (CUstream)stream);
  if (r != CUDA_SUCCESS)
    return bci_fail(ctx, BC_ERR_CUDA, "allocating a %zu-byte device workspace (cuMemAllocAsync) failed: %s", bytes,
                    bci_cu_error_name(r));
  *out = (void *)(uintptr_t)p;
  return BC_OK;
}

void bci_ws_free(void *p, void *stream) {
  if (p) bci_cu.MemFreeAsync((CUdeviceptr)(uintptr_t)p, (CUstream)stream);
}
