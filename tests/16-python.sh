#!/usr/bin/env bash
# 16-python: the Python binding's CPU tier (runtime/python/tests/test_cpu.py): formats, layouts,
# the CPU reference through numpy arrays (and CPU torch tensors where torch is installed), errors.
# Runs with $BC_PYTHON, else the first python3 that has numpy (build.sh installs python3-numpy).
. tests/python.sh
bc_python_tier numpy "numpy (install python3-numpy, or set BC_PYTHON)" runtime/python/tests/test_cpu.py
