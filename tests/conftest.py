import pytest
import torch

import torchtpu  # noqa: F401  (registers the tpu device)


@pytest.fixture
def device() -> torch.device:
    return torchtpu.get_device()
