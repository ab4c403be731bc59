#!/usr/bin/env bash
# 26-python-torch: blockcast.torch's CPU tier (runtime/python/tests/test_torch_cpu.py): recipes,
# Linear's forward and backward against the explicit reference through the CPU reference, delayed
# scaling, state_dict, swap_linear, errors. Runs with $BC_PYTHON, else the first python3 that has
# torch (`./build.sh test` installs Debian's python3-torch).
B=${BC_BUILD:-build}
if [ ! -f "$B/lib/libblockcast.so" ]; then
  echo "1..0 # SKIP no shared library in $B (this tier builds the static library only)"; exit 0
fi
py=${BC_PYTHON:-}
if [ -z "$py" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import numpy, torch' 2>/dev/null; then py=$p; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "1..1"; echo "not ok 1 - a python3 with numpy and torch (install python3-torch, or set BC_PYTHON)"; exit 1
fi
unset BLOCKCAST_LIBRARY
BC_BUILD="$B" exec "$py" runtime/python/tests/test_torch_cpu.py
