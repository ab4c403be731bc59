#!/usr/bin/env bash
# The multi-GPU tier (issue 22) in one call on a machine of 2 or more GPUs: 28-gpu-multi (must not
# skip there: BC_MULTI_MIN_GPUS=2), the Python collectives over NCCL (runtime/python/tests/
# test_multi_gpu.py, one process per GPU) and bench_multi, each under a time limit, logs kept, a
# summary printed last.
#   tests/bench/multi_tier.sh BINDIR LOGDIR
# BINDIR: build/dev (`make -f runtime/build.mk dev`: the tests and benchmarks linked against
# libblockcast.so, small enough to carry). Exit status 0 only if 28 ran on >= 2 GPUs and passed
# and the benchmark ended well.
set -u
bin=${1:?usage: multi_tier.sh BINDIR LOGDIR}
out=${2:?usage: multi_tier.sh BINDIR LOGDIR}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > "$out/device.txt" 2>&1
nvidia-smi topo -m > "$out/topo.txt" 2>&1
start=$(date +%s)
BC_MULTI_MIN_GPUS=2 BC_MULTI_TIMEOUT=${BC_MULTI_TIMEOUT:-240} timeout -k 10 300 "$bin/28-gpu-multi.t" > "$out/28-gpu-multi.log" 2>&1
echo "rc $?" >> "$out/28-gpu-multi.log"
t28=$(($(date +%s) - start))
# the Python collectives over NCCL, one process per GPU (needs torch there)
BLOCKCAST_LIBRARY="$bin/libblockcast.so.0" PYTHONPATH=runtime/python timeout -k 10 300 python3 runtime/python/tests/test_multi_gpu.py \
  > "$out/test_multi_gpu.log" 2>&1
echo "rc $?" >> "$out/test_multi_gpu.log"
timeout -k 10 ${BENCH_LIMIT:-270} "$bin/bench_multi" ${BENCH_W:-} > "$out/bench_multi.md" 2>&1
brc=$?
echo "device: $(tr '\n' ';' < "$out/device.txt") 28: ${t28} s, total $(($(date +%s) - start)) s"
f="$out/28-gpu-multi.log"
okn=$(grep -c '^ok ' "$f"); bad=$(grep -c '^not ok' "$f"); rc=$(sed -n 's/^rc //p' "$f")
plan=$(grep -m1 -E '^1\.\.[0-9]+' "$f")
echo "28-gpu-multi: $okn ok, $bad not ok, plan ${plan:-none}, rc ${rc:-?}"
grep -E '^(not ok|Bail out)' "$f" | head -20
p="$out/test_multi_gpu.log"
pok=$(grep -c '^ok ' "$p"); pbad=$(grep -c '^not ok' "$p"); prc=$(sed -n 's/^rc //p' "$p")
echo "test_multi_gpu.py: $pok ok, $pbad not ok, rc ${prc:-?}"
grep -A3 '^not ok' "$p" | head -20
echo "bench_multi: rc $brc"
status=0
if [ "$bad" != 0 ] || [ "${rc:-1}" != 0 ] || [ -z "$plan" ] || grep -q '^1\.\.0' "$f" || [ "$brc" != 0 ]; then status=1; fi
if [ "$pbad" != 0 ] || [ "${prc:-1}" != 0 ] || [ "$pok" = 0 ]; then status=1; fi
echo "multi tier: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
