"""PyTorch's own distributed suite (torch.testing._internal.distributed.distributed_test,
DistributedTest._DistTestBase, shipped in the torch wheel) instantiated for backend "tpu" with 2
ranks, one process each (the Gloo host transport on XLA:CPU). The tensors the suite builds with
its `_build_tensor` helper live on tpu, so that they reach the tpu backend.

python pytorch_suite.py [-k pattern]  (run by test_pytorch_suite.py)
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ.setdefault("BACKEND", "tpu")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="torchtpu_dist_")

import torch
from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed import distributed_test as suite

import torchtpu  # noqa: F401

_cpu_build_tensor = suite._build_tensor


def _build_tensor(size, value=None, dtype=torch.float, device_id=None):
    return _cpu_build_tensor(size, value, dtype).to("tpu")


suite._build_tensor = _build_tensor


class TestDistBackendWithSpawn(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    sys.exit(run_tests())
