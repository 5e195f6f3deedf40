#!/usr/bin/env bash
# `make gpu-check`: on a machine with an NVIDIA GPU and the JAX CUDA PJRT plugin
# (pip install torchtpu[cuda]), build torchtpu against the torch already installed, run the
# device, error, autocast, op (every 10th OpInfo test) and model tests on XLA:GPU, then the Llama
# train step four ways (ours compiled and fused, PyTorch CUDA eager, Inductor on CUDA) in one
# table. Uses the Python on PATH (PYTHON=... to choose); it needs pybind11, scikit-build-core,
# cmake, ninja, pytest, pytest-xdist, expecttest and transformers. The PJRT header comes from
# xla-cpu-pjrt when it is installed, else from PJRT_INCLUDE_DIR (the folder holding
# xla/pjrt/c/pjrt_c_api.h).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU on this machine (/dev/nvidia0 is missing)"
  exit 2
fi
if ! $PY -c '
import importlib.util, sys
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
sys.exit(0 if found("jax_plugins.xla_cuda13") or found("jax_plugins.xla_cuda12") else 1)'; then
  echo "gpu-check: no JAX CUDA PJRT plugin: pip install torchtpu[cuda]"
  exit 2
fi

echo "== build against $($PY -c 'import torch; print("torch", torch.__version__)') =="
if [ -n "${PJRT_INCLUDE_DIR:-}" ]; then
  export SKBUILD_CMAKE_DEFINE="PJRT_INCLUDE_DIR=$PJRT_INCLUDE_DIR"
fi
TORCH_DEVICE_BACKEND_AUTOLOAD=0 $PY -m pip install -q --no-build-isolation --no-deps -e . || exit 1

export TORCHTPU_PLATFORM=cuda
$PY -m torchtpu.info || exit 1
status=0
echo "== device, error, autocast and model tests on XLA:GPU =="
$PY -m pytest -q tests/test_device.py tests/test_errors.py tests/test_autocast.py \
  tests/test_fused.py tests/models/test_hf_models.py || status=1
echo "== OpInfo, every 10th test, on XLA:GPU =="
TORCHTPU_TEST_SHARD=0/10 $PY -m pytest -q -n 4 tests/test_opinfo.py || status=1
echo "== the Llama train step beside PyTorch CUDA eager and Inductor on the same GPU =="
$PY benchmarks/compile_llama.py --peer cuda --batch 32 --seq 256 || status=1
exit $status
