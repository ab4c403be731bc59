/* libFuzzer driver for the 'spec' target (tests/fuzz/targets.h). */
#define BC_FUZZ_LUA_COVERAGE 1
#include "targets.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_spec_one(data, size); }
