#!/usr/bin/env bash
# 29-python-multi-gpu: the Python collectives over real NCCL (runtime/python/tests/test_multi_gpu.py),
# one process per GPU; skips with fewer than 2 GPUs (CI) or without torch.
. tests/python.sh
if ! { [ -n "${BC_PYTHON:-}" ] || python3 -c "import torch" 2>/dev/null || /usr/bin/python3 -c "import torch" 2>/dev/null; }; then
  echo "1..0 # SKIP torch is not installed"; exit 0
fi
bc_python_tier torch "torch (install python3-torch, or set BC_PYTHON)" runtime/python/tests/test_multi_gpu.py
