"""PyTorch's own distributed suite (torch.testing._internal.distributed.distributed_test,
DistributedTest._DistTestBase, shipped in the torch wheel) instantiated for backend "tpu" with 2
ranks, one process each (the Gloo host transport on XLA:CPU). The tensors the suite builds with
its `_build_tensor` helper live on tpu, so that they reach the tpu backend.

python pytorch_suite.py [-k pattern ...]            (unittest's own runner)
python pytorch_suite.py --report out.json [names]   (one outcome per test: test_pytorch_suite.py)
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
_cpu_build_multidim_tensor = suite._build_multidim_tensor


def _build_tensor(size, value=None, dtype=torch.float, device_id=None):
    return _cpu_build_tensor(size, value, dtype).to("tpu")


def _build_multidim_tensor(dim, dim_size, value=None, dtype=torch.float):
    return _cpu_build_multidim_tensor(dim, dim_size, value, dtype).to("tpu")


suite._build_tensor = _build_tensor
suite._build_multidim_tensor = _build_multidim_tensor


class TestDistBackendWithSpawn(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


def report(path: str, names: list[str]) -> None:
    """Runs the named tests (all when empty) and writes {test: "pass"|"fail"|"skip: why"}."""
    import json
    import re
    import unittest

    loader = unittest.TestLoader()
    every = loader.getTestCaseNames(TestDistBackendWithSpawn)
    chosen = [n for n in every if not names or n in names]
    outcomes: dict[str, str] = {}

    class Result(unittest.TestResult):
        def addSuccess(self, test):
            outcomes[test._testMethodName] = "pass"

        def addFailure(self, test, err):
            # The child's exception line ("RuntimeError: ...") says most; else the first line.
            lines = [ln.strip() for ln in str(err[1]).splitlines() if ln.strip()]
            errs = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception)\b", ln)]
            outcomes[test._testMethodName] = "fail: " + (errs[-1] if errs else lines[0])[:300]

        addError = addFailure

        def addSkip(self, test, reason):
            outcomes[test._testMethodName] = "skip: " + reason

        def addExpectedFailure(self, test, err):
            outcomes[test._testMethodName] = "fail: expected by the suite"

    suite_ = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in chosen)
    suite_.run(Result())
    with open(path, "w") as f:
        json.dump(outcomes, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--report":
        report(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(run_tests())
