/* libFuzzer driver for the 'aot' target (tests/fuzz/targets.h). */
#include "targets.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_aot_one(data, size); }
