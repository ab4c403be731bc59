# runtime/build.mk: the build, driven by ./build.sh (make -f runtime/build.mk).
#
# Stages: embed the generator/templates/specs -> stage-0 CLI (no AOT kernels) -> generate and
# compile every kernel for AOT_ARCHS with NVRTC (cubins reused by content key) -> the archive is
# embedded -> libblockcast.a, libblockcast.so, bin/blockcast, tests.

B          ?= build
CUDA_HOME  ?= /usr/local/cuda
LUA_INC    ?= /usr/include/lua5.4
LUA_LIB    ?= /usr/lib/x86_64-linux-gnu/liblua5.4.a
AOT_ARCHS  ?= sm_90 sm_100a
JOBS       ?= 2
CC         ?= gcc
SAN_FLAGS  ?=
AOT_BLOB   ?= $(B)/aot/kernels.bcar

CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wno-unused-parameter -ffp-contract=off \
                -Iruntime/include -Iruntime -I$(CUDA_HOME)/include -I$(LUA_INC)
LIB_CFLAGS  = $(CFLAGS_COMMON) -fPIC -fvisibility=hidden $(SAN_FLAGS)
TEST_CFLAGS = $(CFLAGS_COMMON) -Itests $(SAN_FLAGS)
SYSLIBS     = -ldl -lm -lpthread
TEST_LDFLAGS = -rdynamic
CUDART      = $(CUDA_HOME)/lib64/libcudart_static.a -lrt

# the runtime's layers, a folder each (runtime/README.md has the map; tests/15-layers checks it)
LAYERS   = base fmt jit ref ops multi comm ctx
LIB_SRCS = $(filter-out runtime/jit/bc_lua_shim.c,$(sort $(wildcard $(LAYERS:%=runtime/%/*.c))))
LIB_OBJS = $(LIB_SRCS:runtime/%.c=$(B)/obj/%.o) $(B)/obj/jit/embed.o
# the command-line tool (on top of the library: it may use its internals)
CLI_OBJS = $(B)/obj/cli.o $(B)/obj/tune.o $(B)/obj/cli_util.o
EMBED_IN = $(sort $(filter-out gen/embed.lua,$(wildcard gen/*.lua gen/tuning/*.lua)) $(wildcard templates/*) $(wildcard specs/*.lua))
HDRS     = $(wildcard runtime/*/*.h)

TEST_SRCS  = $(sort $(wildcard tests/[0-9][0-9]-*.c))
TEST_BINS  = $(TEST_SRCS:tests/%.c=$(B)/tests/%.t)
TEST_SH    = $(sort $(wildcard tests/[0-9][0-9]-*.sh))
TEST_SHT   = $(TEST_SH:tests/%.sh=$(B)/tests/%.t)
TEST_PL    = $(sort $(wildcard tests/[0-9][0-9]-*.pl))
TEST_PLT   = $(TEST_PL:tests/%.pl=$(B)/tests/%.t)
BENCH_SRCS = $(wildcard tests/bench/*.c)
FUZZ_BINS  = $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
BENCH_BINS = $(BENCH_SRCS:tests/bench/%.c=$(B)/bench/%)

all: $(B)/lib/libblockcast.a $(B)/lib/libblockcast.so $(B)/bin/blockcast $(B)/python/.staged $(TEST_BINS) $(TEST_SHT) $(TEST_PLT) $(BENCH_BINS)

# the sanitizer tier (SAN_FLAGS set, AOT_BLOB from the main build): library and C tests only
san: $(B)/lib/libblockcast.a $(TEST_BINS) $(TEST_PLT)

# fuzz targets (CC=clang, SAN_FLAGS with fuzzer-no-link)
fuzz: $(FUZZ_BINS)

$(B)/gen $(B)/stage0 $(B)/aot $(B)/lib $(B)/bin $(B)/tests $(B)/bench $(B)/fuzz:
	@mkdir -p $@

$(B)/gen/embed.c: $(EMBED_IN) gen/embed.lua | $(B)/gen
	@lua5.4 gen/embed.lua $@ $(EMBED_IN)

# objects mirror the source folders (build/obj/<layer>/*.o), which tests/15-layers reads
$(B)/obj/%.o: runtime/%.c $(HDRS)
	@mkdir -p $(@D)
	@echo "cc $<"
	@$(CC) $(LIB_CFLAGS) -c $< -o $@
$(CLI_OBJS): runtime/cli_util.h runtime/tune.h

$(B)/obj/jit/embed.o: $(B)/gen/embed.c $(HDRS)
	@mkdir -p $(@D)
	@$(CC) $(LIB_CFLAGS) -c $< -o $@

$(B)/obj/jit/aot_empty.o: runtime/jit/aot.S.in
	@mkdir -p $(@D)
	@sed -e 's|@INCBIN@||' $< > $(B)/obj/jit/aot_empty.S
	@$(CC) -c $(B)/obj/jit/aot_empty.S -o $@

# stage 0: the CLI without AOT kernels, used to generate and compile them
$(B)/stage0/blockcast: $(LIB_OBJS) $(B)/obj/jit/aot_empty.o $(CLI_OBJS) | $(B)/stage0
	@$(CC) $(SAN_FLAGS) -o $@ $(CLI_OBJS) $(LIB_OBJS) $(B)/obj/jit/aot_empty.o $(LUA_LIB) $(SYSLIBS)

$(B)/aot/kernels.bcar: $(B)/stage0/blockcast | $(B)/aot
	@$(B)/stage0/blockcast aot --out $@ --objdir $(B)/aot/obj $(AOT_ARCHS:%=--arch %) -j $(JOBS)

$(B)/obj/jit/aot.o: runtime/jit/aot.S.in $(AOT_BLOB)
	@mkdir -p $(@D)
	@sed -e 's|@INCBIN@|	.incbin "$(abspath $(AOT_BLOB))"|' $< > $(B)/obj/jit/aot.S
	@$(CC) -c $(B)/obj/jit/aot.S -o $@

# the static library carries Lua's objects, so users link only -lblockcast -ldl -lm -lpthread
$(B)/lib/libblockcast.a: $(LIB_OBJS) $(B)/obj/jit/aot.o | $(B)/lib
	@rm -rf $(B)/lua && mkdir -p $(B)/lua && cd $(B)/lua && ar x $(LUA_LIB)
	@rm -f $@ && ar rcs $@ $(LIB_OBJS) $(B)/obj/jit/aot.o $(B)/lua/*.o
	@echo "built $@"

$(B)/lib/libblockcast.so: $(LIB_OBJS) $(B)/obj/jit/aot.o $(B)/obj/jit/bc_lua_shim.o runtime/libblockcast.map | $(B)/lib
	@$(CC) -shared -o $@ -Wl,-soname,libblockcast.so.0 -Wl,--version-script=runtime/libblockcast.map -Wl,-z,defs \
	  -Wl,--defsym=stdin=bci_lua_stdin_shim -Wl,--defsym=stdout=bci_lua_stdout_shim -Wl,--defsym=stderr=bci_lua_stderr_shim \
	  $(LIB_OBJS) $(B)/obj/jit/aot.o $(B)/obj/jit/bc_lua_shim.o $(LUA_LIB) $(SYSLIBS)
	@ln -sf libblockcast.so $(B)/lib/libblockcast.so.0
	@echo "built $@"

# the Python package with the shared library inside it, for `pip install build/python`
PY_SRCS = runtime/python/pyproject.toml $(wildcard runtime/python/blockcast/*.py runtime/python/blockcast/torch/*.py)
$(B)/python/.staged: $(PY_SRCS) $(B)/lib/libblockcast.so
	@rm -rf $(B)/python && mkdir -p $(B)/python/blockcast/lib $(B)/python/blockcast/torch
	@cp runtime/python/pyproject.toml $(B)/python/ && cp runtime/python/blockcast/*.py $(B)/python/blockcast/
	@cp runtime/python/blockcast/torch/*.py $(B)/python/blockcast/torch/
	@cp $(B)/lib/libblockcast.so $(B)/python/blockcast/lib/libblockcast.so.0
	@touch $@

$(B)/bin/blockcast: $(CLI_OBJS) $(B)/lib/libblockcast.a | $(B)/bin
	@$(CC) $(SAN_FLAGS) -o $@ $(CLI_OBJS) $(B)/lib/libblockcast.a $(SYSLIBS)
	@echo "built $@"

$(B)/tests/%.t: tests/%.c tests/tap.h tests/names.h tests/gpu.h tests/testdata.h tests/multi.h tests/fuzz/targets.h $(B)/lib/libblockcast.a | $(B)/tests
	@$(CC) $(TEST_CFLAGS) $(TEST_LDFLAGS) -o $@ $< $(B)/lib/libblockcast.a $(CUDART) $(SYSLIBS)

$(B)/tests/%.t: tests/%.sh | $(B)/tests
	@cp $< $@ && chmod +x $@

$(B)/tests/%.t: tests/%.pl | $(B)/tests
	@cp $< $@ && chmod +x $@

$(B)/bench/%: tests/bench/%.c tests/gpu.h tests/multi.h tests/bench/bench.h tests/bench/host_timing.h $(B)/lib/libblockcast.a | $(B)/bench
	@$(CC) $(TEST_CFLAGS) $(TEST_LDFLAGS) -o $@ $< $(B)/lib/libblockcast.a $(CUDART) $(SYSLIBS)

$(B)/fuzz/%: tests/fuzz/%.c tests/fuzz/targets.h $(B)/lib/libblockcast.a | $(B)/fuzz
	@$(CC) $(TEST_CFLAGS) -Itests/fuzz -fsanitize=fuzzer -o $@ $< $(B)/lib/libblockcast.a $(SYSLIBS)
	@echo "built $@"

.PHONY: all san fuzz
.DELETE_ON_ERROR:

# The GPU tier and the benchmarks linked against the shared library, for carrying to the GPU
# machine (the static binaries each hold the 13 MB AOT archive): build/dev/, rpath $ORIGIN.
# (only programs that use the public API: the others need the library's hidden symbols)
DEV_TESTS = $(B)/dev/20-gpu-fp8-tensor.t $(B)/dev/22-gpu-block.t $(B)/dev/23-gpu-delayed.t $(B)/dev/24-gpu-list.t \
            $(B)/dev/25-gpu-comm.t $(B)/dev/27-gpu-shard.t $(B)/dev/28-gpu-multi.t
DEV_BENCH = $(B)/dev/bench_block $(B)/dev/bench_fp8_tensor $(B)/dev/bench_list $(B)/dev/bench_comm $(B)/dev/bench_shard \
            $(B)/dev/bench_multi
$(B)/dev:
	@mkdir -p $@
$(B)/dev/libblockcast.so.0: $(B)/lib/libblockcast.so | $(B)/dev
	@cp $< $@
$(B)/dev/%.t: tests/%.c tests/tap.h tests/names.h tests/gpu.h tests/testdata.h tests/multi.h $(B)/dev/libblockcast.so.0
	@$(CC) $(TEST_CFLAGS) $(TEST_LDFLAGS) -o $@ $< $(B)/dev/libblockcast.so.0 -Wl,-rpath,'$$ORIGIN' $(CUDART) $(SYSLIBS)
$(B)/dev/%: tests/bench/%.c tests/gpu.h tests/multi.h tests/bench/bench.h tests/bench/host_timing.h $(B)/dev/libblockcast.so.0
	@$(CC) $(TEST_CFLAGS) $(TEST_LDFLAGS) -o $@ $< $(B)/dev/libblockcast.so.0 -Wl,-rpath,'$$ORIGIN' $(CUDART) $(SYSLIBS)
dev: $(DEV_TESTS) $(DEV_BENCH)
.PHONY: dev
