/* libFuzzer driver for the 'cache' target (tests/fuzz/targets.h). */
#include "targets.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_cache_one(data, size); }
