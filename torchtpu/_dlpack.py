"""DLPack and tpu tensors. A tpu tensor's memory belongs to the PJRT runtime: its data pointer
is a handle, not an address another library may read, and PJRT buffers are values that later
ops replace rather than mutate, so an exported capsule could not alias the tensor as DLPack
promises. Every export entry point therefore raises the same clear error for tpu tensors, where
PyTorch alone would hand out a capsule of the handle (whose import hangs) from `to_dlpack` while
`__dlpack_device__` raises "Unknown device type". Other devices are untouched."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

_WHY = (
    "tpu tensors cannot be exported through DLPack: their memory belongs to the PJRT runtime "
    "and is not addressable by other libraries. Copy the tensor to the host first: tensor.cpu()"
)


def _refusing(export: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(export)
    def wrapper(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "tpu":
            raise BufferError(_WHY)
        return export(tensor, *args, **kwargs)

    return wrapper


def install() -> None:
    """Wraps to_dlpack, Tensor.__dlpack__ and Tensor.__dlpack_device__ (once)."""
    if getattr(torch.Tensor.__dlpack__, "__wrapped__", None) is not None:
        return
    torch.Tensor.__dlpack__ = _refusing(torch.Tensor.__dlpack__)  # type: ignore[method-assign]
    torch.Tensor.__dlpack_device__ = _refusing(  # type: ignore[method-assign]
        torch.Tensor.__dlpack_device__
    )
    to_dlpack = _refusing(torch.utils.dlpack.to_dlpack)
    torch.utils.dlpack.to_dlpack = to_dlpack
    torch.to_dlpack = to_dlpack  # type: ignore[attr-defined]
