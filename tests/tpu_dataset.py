"""A dataset whose items are made on tpu (for DataLoader workers in test_threads.py)."""

import torch
from torch.utils.data import Dataset


class TpuRows(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((3,), float(i), device="tpu") * 2
