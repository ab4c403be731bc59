#!/usr/bin/env bash
# 26-python-torch: blockcast.torch's CPU tier (runtime/python/tests/test_torch_cpu.py): recipes,
# Linear's forward and backward against the explicit reference through the CPU reference, delayed
# scaling, state_dict, swap_linear, errors. Runs with $BC_PYTHON, else the first python3 that has
# torch (`./build.sh test` installs Debian's python3-torch).
. tests/python.sh
bc_python_tier "numpy, torch" "numpy and torch (install python3-torch, or set BC_PYTHON)" runtime/python/tests/test_torch_cpu.py
