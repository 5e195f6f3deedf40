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
    """TORCHTPU_TEST_SHARD=k/n keeps the tests whose index within their file is k modulo n:
    shards 0/2 and 1/2 together are the whole suite, and every shard runs every file. make test
    runs shard 0/2 in fused mode and 1/2 in strict mode, and 0/20 on its second PJRT plugin."""
    shard = os.environ.get("TORCHTPU_TEST_SHARD")
    if not shard:
        return
    k, n = (int(x) for x in shard.split("/"))
    if not 0 <= k < n:
        raise pytest.UsageError(f"TORCHTPU_TEST_SHARD={shard}: want k/n with 0 <= k < n")
    seen: Counter[str] = Counter()
    kept, dropped = [], []
    for item in items:
        path = item.nodeid.split("::")[0]
        (kept if seen[path] % n == k else dropped).append(item)
        seen[path] += 1
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept
