import pytest
import torch

import torchtpu


@pytest.fixture
def device() -> torch.device:
    return torchtpu.get_device()
