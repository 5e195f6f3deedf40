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
