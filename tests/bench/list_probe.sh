#!/usr/bin/env bash
# Where the large tensors' list cost goes (issue 15; tests/bench/NOTES.md, "The list's lookup"):
# one call on the GPU machine, every ratio against the single kernel in the same run.
#   tests/bench/list_probe.sh BINDIR OUTDIR
# BINDIR holds bench_list and libblockcast.so.0 (build/dev). Runs
#   1. bench_list rows 13-16 (the 16 large tensors) and 21-24 (a list of one: the single tensor
#      through the list call, no search, only the item's fields);
#   2. rows 4, 6, 14, 22 again with the MXFP8 and fp8_block_1x128 rowwise kernels at
#      min_blocks = 5 (a copy of gen/tuning/sm_90.lua; their list variants, which take the
#      kernel's entry, spill 20 / 48 bytes at the tuned 6 and 0 / 4 at 5; compiled by NVRTC).
set -u
bin=${1:?usage: list_probe.sh BINDIR OUTDIR}
out=${2:?usage: list_probe.sh BINDIR OUTDIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt" 2>&1 || true
sed -E '/^  bc_quantize_(mxfp8_e4m3|fp8_block_1x128)__bf16__row = /s/min_blocks = 6/min_blocks = 5/' \
  "$here/gen/tuning/sm_90.lua" > "$out/min5.lua"
sed_ok=$(grep -c 'bf16__row = .*min_blocks = 5' "$out/min5.lua")
[ "$sed_ok" = 2 ] || { echo "list_probe: the two tuning entries were not found in gen/tuning/sm_90.lua" >&2; exit 1; }
# each run to the end even if another fails (bench_list exits 1 where a list's output differs
# from the loop's: that line is in its table)
"$bin/bench_list" --reps 10 --case 13,14,15,16,21,22,23,24 > "$out/split.md" 2>&1 || echo "list_probe: split: bench_list rc $?"
"$bin/bench_list" --reps 10 --case 4,6,14,22 > "$out/min6.md" 2>&1 || echo "list_probe: min6: bench_list rc $?"
BLOCKCAST_TUNING="$out/min5.lua" "$bin/bench_list" --reps 10 --case 4,6,14,22 > "$out/min5.md" 2>&1 || echo "list_probe: min5: bench_list rc $?"
for f in split min6 min5; do
  echo "## $f ($(head -1 "$out/$f.md" | sed 's/^# //'))"
  grep -v '^#\|^$\|---\|^| family' "$out/$f.md" | cut -d'|' -f2,3,7,9,10
done
