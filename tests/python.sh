# tests/python.sh: sourced by the Python tiers (16-python.sh, 26-python-torch.sh).
# bc_python_tier MODULES WHAT SCRIPT: runs SCRIPT (TAP) with $BC_PYTHON, else with the first
# python3 that imports MODULES ("numpy, torch"); WHAT names them in the failure ("numpy and torch
# (install python3-torch, or set BC_PYTHON)"). Skips without the shared library in $BC_BUILD.
bc_python_tier() {
  B=${BC_BUILD:-build}
  if [ ! -f "$B/lib/libblockcast.so" ]; then
    echo "1..0 # SKIP no shared library in $B (this tier builds the static library only)"; exit 0
  fi
  py=${BC_PYTHON:-}
  if [ -z "$py" ]; then
    for p in python3 /usr/bin/python3; do
      if command -v "$p" >/dev/null && "$p" -c "import $1" 2>/dev/null; then py=$p; break; fi
    done
  fi
  if [ -z "$py" ]; then
    echo "1..1"; echo "not ok 1 - a python3 with $2"; exit 1
  fi
  unset BLOCKCAST_LIBRARY
  BC_BUILD="$B" exec "$py" "$3"
}
