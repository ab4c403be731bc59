/* bc_dl.h: the CUDA driver and NVRTC entry points, resolved at run time (bc_dl.c). */
#ifndef BC_DL_H
#define BC_DL_H
#include <cuda.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>

/* Each entry point is requested from cuGetProcAddress at the exact version whose prototype
 * cudaTypedefs.h gives (PFN_<name>_v<version>), so a driver that also has a newer variant
 * (cuCtxGetDevice_v2 takes a context in CUDA 13) still hands back the one we call. */
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

extern bci_cuda_api bci_cu __attribute__((visibility("hidden")));
extern bci_nvrtc_api bci_nvrtc __attribute__((visibility("hidden")));

/* Map a failed driver call to BC_ERR_CUDA with the statement and the driver's error name. */
#define BCI_CU(ctx, call)                                                                              \
  do {                                                                                                 \
    CUresult bci_r_ = (call);                                                                          \
    if (bci_r_ != CUDA_SUCCESS) {                                                                      \
      const char *bci_n_ = "?", *bci_m_ = "?";                                                         \
      if (bci_cu.GetErrorName) bci_cu.GetErrorName(bci_r_, &bci_n_);                                   \
      if (bci_cu.GetErrorString) bci_cu.GetErrorString(bci_r_, &bci_m_);                               \
      return bci_fail((ctx), BC_ERR_CUDA, "%s failed: %s (%d): %s", #call, bci_n_, (int)bci_r_, bci_m_); \
    }                                                                                                  \
  } while (0)
#endif
