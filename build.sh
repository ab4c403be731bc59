#!/usr/bin/env bash
# blockcast's one entry point.
#   ./build.sh          install missing Debian packages (as root), generate, compile, build
#   ./build.sh test     build if needed, then run the TAP suite with prove, then the CPU tier again
#                       built with AddressSanitizer + UndefinedBehaviorSanitizer (build/asan)
#   ./build.sh fuzz S   build the libFuzzer targets (clang, build/fuzz) and run each for S seconds
# Environment: CUDA_HOME (default /usr/local/cuda), JOBS (default: nproc), BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")"

cmd=${1:-build}
case "$cmd" in
  build|test) ;;
  fuzz)
    secs=${2:-}
    case "$secs" in
      ''|*[!0-9]*) echo "build.sh: fuzz needs a whole number of seconds per target, e.g. ./build.sh fuzz 30" >&2; exit 2 ;;
    esac ;;
  -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
  *) echo "build.sh: unknown command '$cmd'; expected nothing (build), 'test' or 'fuzz SECONDS'" >&2; exit 2 ;;
esac

# ---- dependencies ----------------------------------------------------------------------------
pkgs=(lua5.4 liblua5.4-dev make gcc libc6-dev perl binutils python3 python3-numpy)
[ "$cmd" = fuzz ] && pkgs+=(clang libclang-rt-14-dev)
[ "$cmd" = test ] && pkgs+=(python3-torch)  # blockcast.torch's CPU tier (tests/26-python-torch.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "build.sh: missing Debian packages; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
for h in cuda.h nvrtc.h; do
  if [ ! -f "$CUDA_HOME/include/$h" ]; then
    echo "build.sh: $CUDA_HOME/include/$h not found; install the CUDA toolkit or set CUDA_HOME" >&2
    exit 1
  fi
done
if [ ! -f "$CUDA_HOME/lib64/libcudart_static.a" ]; then
  echo "build.sh: $CUDA_HOME/lib64/libcudart_static.a not found (the GPU tests link it); set CUDA_HOME" >&2
  exit 1
fi
nccl_h=""
for d in "$CUDA_HOME/include" /usr/include /usr/local/include; do
  [ -f "$d/nccl.h" ] && { nccl_h="$d/nccl.h"; break; }
done
export CUDA_HOME

# ---- build -----------------------------------------------------------------------------------
# development overrides must not leak into the ahead-of-time kernels or the tests' expectations
unset BLOCKCAST_TUNING BLOCKCAST_SPEC_PATH BLOCKCAST_FAST_COMPILE
B=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
if [ ! -f "$B/.configured" ]; then
  echo "cuda: $CUDA_HOME; nccl.h: ${nccl_h:-not found (the collectives will be unavailable)}"
  mkdir -p "$B" && touch "$B/.configured"
fi
mk() { make --no-print-directory -f runtime/build.mk -j"$JOBS" CUDA_HOME="$CUDA_HOME" JOBS="$JOBS" "$@"; }
mk B="$B" all
[ "$cmd" = build ] && { echo "build: done ($B/lib/libblockcast.{a,so}, $B/bin/blockcast)"; exit 0; }

SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# intercept_tls_get_addr=0: LeakSanitizer's stop-the-world tracer can crash at exit ("Tracer caught
# signal 11 ... LeakSanitizer has encountered a fatal error", exit 99 with every test passed) reading
# the dynamic TLS of threads that have ended; 04-cache's threads compile through the dlopen'ed NVRTC,
# whose TLS is dynamic (a CI run on 3e0592b failed so). GCC 12's runtime predates LLVM's fix
# (google/sanitizers#1353, reviews.llvm.org/D147459). Our own code links statically (static TLS, still
# scanned); a block held only in a library's dynamic TLS would be reported, not hidden.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# ---- fuzz ------------------------------------------------------------------------------------
if [ "$cmd" = fuzz ]; then
  F="$B/fuzz"
  mk B="$F" CC=clang SAN_FLAGS="$SAN -fsanitize=fuzzer-no-link" AOT_BLOB="$B/aot/kernels.bcar" fuzz
  # the targets run $JOBS at a time (each on one core), then report in order
  fuzz_one() {
    local t=$1 work="$F/corpus/$1" art="$F/crashes/$1" rc=0
    mkdir -p "$work" "$art"
    "$F/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$art/" "$work" "tests/fuzz/corpus/$t" $([ $t = spec ] && echo specs) > "$F/fuzz_$t.log" 2>&1 || rc=$?
    echo $rc > "$F/fuzz_$t.rc"
  }
  targets="spec args aot cache"
  running=0
  for t in $targets; do
    echo "fuzz $t: ${secs}s (corpus tests/fuzz/corpus/$t, new inputs in $F/corpus/$t)"
    rm -f "$F/fuzz_$t.rc"
    fuzz_one $t &
    running=$((running + 1))
    if [ $running -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
  done
  wait
  status=0
  for t in $targets; do
    if [ "$(cat "$F/fuzz_$t.rc" 2>/dev/null)" != 0 ]; then
      echo "fuzz $t: FAILED; the input is in $F/crashes/$t/ (add it to tests/fuzz/corpus/$t as a regression); log: $F/fuzz_$t.log" >&2
      tail -30 "$F/fuzz_$t.log" >&2
      status=1
    else
      echo "fuzz $t: $(grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$F/fuzz_$t.log" | tr '\n' ' ')"
    fi
  done
  exit $status
fi

# ---- test ------------------------------------------------------------------------------------
export BC_BUILD="$B"
prove --timer -j "$JOBS" "$B"/tests/*.t

# the CPU tier again under AddressSanitizer + UndefinedBehaviorSanitizer (leak checking on)
A="$B/asan"
mk B="$A" SAN_FLAGS="$SAN" AOT_BLOB="$B/aot/kernels.bcar" san
echo "sanitizer tier ($A): ASan + UBSan + LeakSanitizer"
# (02-nvrtc: every 8th kernel of its sample here; the JIT path's host code is the same for all, and
# NVRTC under ASan's allocator took 7 of CI's 20 minutes for the whole sample)
BC_BUILD="$A" BC_TEST_SAMPLE=8 prove --timer -j "$JOBS" "$A"/tests/*.t
