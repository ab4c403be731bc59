#!/usr/bin/env bash
# 16-python: the Python binding's CPU tier (runtime/python/tests/test_cpu.py): formats, layouts,
# the CPU reference through numpy arrays (and CPU torch tensors where torch is installed), errors.
# Runs with $BC_PYTHON, else the first python3 that has numpy (build.sh installs python3-numpy).
B=${BC_BUILD:-build}
if [ ! -f "$B/lib/libblockcast.so" ]; then
  echo "1..0 # SKIP no shared library in $B (this tier builds the static library only)"; exit 0
fi
py=${BC_PYTHON:-}
if [ -z "$py" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "1..1"; echo "not ok 1 - a python3 with numpy (install python3-numpy, or set BC_PYTHON)"; exit 1
fi
unset BLOCKCAST_LIBRARY
BC_BUILD="$B" exec "$py" runtime/python/tests/test_cpu.py
