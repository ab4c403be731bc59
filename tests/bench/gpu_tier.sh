#!/usr/bin/env bash
# The GPU tier in one call on the GPU machine: 21-gpu-cvt-selftest, 23-gpu-delayed, 20-gpu-fp8-tensor,
# 25-gpu-comm, 22-gpu-block (split over 5 processes by format) and 24-gpu-list (3 processes), each
# log kept, a summary printed last.
#   tests/bench/gpu_tier.sh BINDIR LOGDIR
# BINDIR holds the test binaries: build/dev (made by `make -f runtime/build.mk dev`: the tests
# linked against libblockcast.so) plus build/tests/21-gpu-cvt-selftest.t (static: it uses the
# library's hidden symbols). Exit status 0 only if every test ran and passed.
set -u
bin=${1:?usage: gpu_tier.sh BINDIR LOGDIR}
out=${2:?usage: gpu_tier.sh BINDIR LOGDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt" 2>&1
groups=(fp8_block_1x128,fp8_block_128x128 mxfp8_e4m3,mxfp8_e5m2 mxfp4,nvfp4_2d nvfp4 mxfp6_e3m2,mxfp6_e2m3)
start=$(date +%s)
pids=()
for i in "${!groups[@]}"; do
  (BC_TEST_FORMATS=${groups[$i]} "$bin/22-gpu-block.t" > "$out/22-gpu-block.$((i + 1)).log" 2>&1; echo "rc $?" >> "$out/22-gpu-block.$((i + 1)).log") &
  pids+=($!)
done
lgroups=(fp8_e4m3_tensor,fp8_e5m2_tensor,fp8_block_1x128,fp8_block_128x128,mxfp8_e4m3 mxfp8_e5m2,mxfp4,nvfp4_2d,nvfp4 mxfp6_e3m2,mxfp6_e2m3)
for i in "${!lgroups[@]}"; do
  (BC_TEST_FORMATS=${lgroups[$i]} "$bin/24-gpu-list.t" > "$out/24-gpu-list.$((i + 1)).log" 2>&1; echo "rc $?" >> "$out/24-gpu-list.$((i + 1)).log") &
  pids+=($!)
done
("$bin/21-gpu-cvt-selftest.t" > "$out/21-gpu-cvt-selftest.log" 2>&1; echo "rc $?" >> "$out/21-gpu-cvt-selftest.log"
 "$bin/23-gpu-delayed.t" > "$out/23-gpu-delayed.log" 2>&1; echo "rc $?" >> "$out/23-gpu-delayed.log"
 "$bin/20-gpu-fp8-tensor.t" > "$out/20-gpu-fp8-tensor.log" 2>&1; echo "rc $?" >> "$out/20-gpu-fp8-tensor.log"
 "$bin/25-gpu-comm.t" > "$out/25-gpu-comm.log" 2>&1; echo "rc $?" >> "$out/25-gpu-comm.log") &
pids+=($!)
wait "${pids[@]}"
status=0
echo "device: $(cat "$out/device.txt"); $(($(date +%s) - start)) s"
for f in "$out"/2*.log; do
  okn=$(grep -c '^ok ' "$f"); bad=$(grep -c '^not ok' "$f"); rc=$(sed -n 's/^rc //p' "$f")
  plan=$(grep -m1 -E '^1\.\.[0-9]+' "$f")
  echo "$(basename "$f"): $okn ok, $bad not ok, plan ${plan:-none}, rc ${rc:-?}"
  if [ "$bad" != 0 ] || [ "${rc:-1}" != 0 ] || [ -z "$plan" ] || grep -q '^1\.\.0' "$f"; then status=1; fi
done
echo "gpu tier: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
