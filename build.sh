#!/usr/bin/env bash
# blockcast's one entry point.
#   ./build.sh          install missing Debian packages (as root), generate, compile, build
#   ./build.sh test     build if needed, then run the TAP suite with prove
# Environment: CUDA_HOME (default /usr/local/cuda), JOBS (default: nproc), BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")"

cmd=${1:-build}
case "$cmd" in
  build|test) ;;
  -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
  *) echo "build.sh: unknown command '$cmd'; expected nothing (build) or 'test'" >&2; exit 2 ;;
esac

# ---- dependencies ----------------------------------------------------------------------------
pkgs=(lua5.4 liblua5.4-dev make gcc libc6-dev perl)
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
B=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
if [ ! -f "$B/.configured" ]; then
  echo "cuda: $CUDA_HOME; nccl.h: ${nccl_h:-not found (the collectives will be unavailable)}"
  mkdir -p "$B" && touch "$B/.configured"
fi
make --no-print-directory -f runtime/build.mk -j"$JOBS" B="$B" CUDA_HOME="$CUDA_HOME" JOBS="$JOBS" all
[ "$cmd" = build ] && { echo "build: done ($B/lib/libblockcast.{a,so}, $B/bin/blockcast)"; exit 0; }

# ---- test ------------------------------------------------------------------------------------
export BC_BUILD="$B"
prove --timer -j "$JOBS" "$B"/tests/*.t
