#!/usr/bin/env bash
# Sweep the block quantize tile parameters on a GPU: each variant is a gen/tuning override
# compiled by NVRTC at run time and validated bit-exact by bench_block before it is timed.
#   tests/bench/sweep_block.sh OUTDIR "FORMAT ..." "THREADS TR TC MINBLOCKS" ...
# Runs from the repository root, or with BC_BENCH=path/to/bench_block.
set -u
bench=${BC_BENCH:-build/bench/bench_block}
out=$1; fmts=$2; shift 2
mkdir -p "$out"
for v in "$@"; do
  set -- $v
  f="$out/tuning_t$1_${2}x$3_m$4.lua"
  sed -e "s/^quantize_block .*/quantize_block    = { threads = $1, tile_rows = $2, tile_cols = $3, min_blocks = $4 }/" \
    gen/tuning/sm_90.lua > "$f"
  echo "== quantize_block threads $1 tile ${2}x$3 min_blocks $4"
  for fm in $fmts; do
    BLOCKCAST_TUNING="$f" "$bench" --format "$fm" --reps 10 --size 16384 --quantize-only | grep -E "^\| .*quantize|MISMATCH"
  done
done
