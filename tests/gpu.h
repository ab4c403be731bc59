/* tests/gpu.h: CUDA runtime helpers for the GPU tests and benchmarks (static cudart). Without
 * a usable device gpu_init_or_skip() prints "1..0 # SKIP no CUDA device" and exits. */
#ifndef BC_TEST_GPU_H
#define BC_TEST_GPU_H
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

/* a crash prints its stack (the GPU machine has no gdb outside cuda-gdb) */
static void gpu_crash_handler(int sig) {
  void *frames[64];
  int n = backtrace(frames, 64);
  static const char msg[] = "# fatal signal; stack:\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(128 + sig);
  backtrace_symbols_fd(frames, n, 2);
  _exit(128 + sig);
}

#define CK(call)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      printf("# %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));      \
      printf("Bail out! CUDA error\n");                                                           \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

static inline int gpu_available(void) {
  signal(SIGSEGV, gpu_crash_handler);
  signal(SIGBUS, gpu_crash_handler);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return 0;
  if (cudaSetDevice(0) != cudaSuccess) return 0;
  if (cudaFree(0) != cudaSuccess) return 0; /* creates the primary context */
  return 1;
}

static inline void gpu_init_or_skip(void) {
  if (!gpu_available()) {
    printf("1..0 # SKIP no CUDA device\n");
    exit(0);
  }
}

static inline void *dmalloc(size_t n) {
  void *p = NULL;
  CK(cudaMalloc(&p, n ? n : 1));
  return p;
}

static inline const char *gpu_name(void) {
  static struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown";
  return prop.name;
}
#endif
