"""tpu tensors between processes (torch.multiprocessing queues, DataLoader workers started with
'spawn'): they travel by value, as a host copy rebuilt on the same tpu index on the other side.
PyTorch's own reduction shares CPU memory through file descriptors and CUDA memory through IPC
handles; neither exists for PJRT buffers, and without this its feeder thread fails on a tpu
tensor ("_share_fd_: only available on CPU") while the receiver waits forever."""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
from torch.multiprocessing import reductions


def _rebuild(host: torch.Tensor, index: int, requires_grad: bool, parameter: bool) -> Any:
    t = host.to(torch.device("tpu", index))
    if parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def _reduce(tensor: torch.Tensor) -> Any:
    if tensor.device.type != "tpu":
        return reductions.reduce_tensor(tensor)
    parameter = isinstance(tensor, torch.nn.Parameter)
    host = tensor.detach().cpu()
    return (_rebuild, (host, tensor.device.index, tensor.requires_grad, parameter))


def install() -> None:
    """Registers the by-value reduction for every tensor class PyTorch registers its own for."""
    for cls in (torch.Tensor, torch.nn.Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, _reduce)
