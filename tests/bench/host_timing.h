/* host_timing.h: host-clock timing for the benchmarks that time CPU work (NVRTC compiles, lookups). */
#ifndef BC_HOST_TIMING_H
#define BC_HOST_TIMING_H
#include <stdlib.h>
#include <time.h>

static inline double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* qsort comparator for doubles, ascending */
static inline int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
#endif
