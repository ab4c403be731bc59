#!/usr/bin/env bash
# Sweep the quantize tile parameters on a GPU: each variant is a gen/tuning override compiled
# by NVRTC at run time, validated bit-exact by the bench before it is timed.
#   tests/bench/sweep_tile.sh OUTDIR "TR TC COLVEC THREADS MINBLOCKS STORE_CS(true|false)" ...
set -u
B=${BC_BUILD:-build}
out=$1; shift
mkdir -p "$out"
for v in "$@"; do
  set -- $v
  f="$out/tuning_${1}x${2}_v${3}_t${4}_m${5}_cs${6}.lua"
  sed -e "s/^quantize_tile .*/quantize_tile = { threads = $4, tile_rows = $1, tile_cols = $2, col_vec = $3, min_blocks = $5, store_cs = $6 }/" gen/tuning/sm_90.lua > "$f"
  echo "== tile ${1}x${2} col_vec $3 threads $4 min_blocks $5 store_cs $6"
  BLOCKCAST_TUNING="$f" "$B/bench/bench_fp8_tensor" --reps 20 --only cast --shapes 2 | grep -E "^\|.*cast|MISMATCH|copy of"
done
