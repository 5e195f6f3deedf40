import os
from collections import Counter

import pytest
import torch

import torchtpu


@pytest.fixture
def device() -> torch.device:
    return torchtpu.get_device()


@pytest.fixture(autouse=True)
def _pending_ops_stay_in_their_test():
    """Each test starts with an empty fused-mode trace: ops a test leaves pending (values it
    keeps alive without reading) are run at its end, not fused into the next test's programs."""
    yield
    if torchtpu._C._initialized():
        torch.tpu.synchronize()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """TORCHTPU_TEST_EVERY=N keeps the 1st, (N+1)th, ... test of each file: a subset that still
    runs every file (make test runs it on its second PJRT plugin)."""
    every = int(os.environ.get("TORCHTPU_TEST_EVERY", "1"))
    if every <= 1:
        return
    seen: Counter[str] = Counter()
    kept, dropped = [], []
    for item in items:
        path = item.nodeid.split("::")[0]
        (kept if seen[path] % every == 0 else dropped).append(item)
        seen[path] += 1
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
