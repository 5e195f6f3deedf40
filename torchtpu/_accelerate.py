"""Hugging Face accelerate (and so Trainer) on tpu under torchrun.

accelerate 1.16 knows distributed training on a fixed list of device types (DistributedType is a
closed enum); for tpu it reports DistributedType.NO, so under torchrun every process would train
a model of its own on tpu:0. torchtpu runs such a job as accelerate's MULTI_CPU type on the tpu
devices instead: the process group is "cpu:gloo,tpu:tpu" (init_process_group's default with
torchtpu), each rank takes tpu:LOCAL_RANK, and accelerate wraps the model in DDP without
device_ids and gathers and reduces as for any multi-process job. accelerate's FSDP is refused
(accelerate does not switch it on for MULTI_CPU). One process, and use_cpu, are left alone.

Two methods of accelerate.state.PartialState are wrapped, once `accelerate.state` is imported
(a post-import hook: importing torchtpu never imports accelerate): _prepare_backend and
set_device. Tested with accelerate 1.16.0 and transformers 5.24.0.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

import torch

REFUSED = (
    "accelerate's FSDP is not available on tpu under torchrun (torchtpu runs accelerate's "
    "multi-process jobs on tpu as its MULTI_CPU type, for which accelerate does not switch FSDP "
    "on); use torch.distributed.fsdp.fully_shard directly."
)


def _tpu_job(cpu: bool) -> bool:
    """A torchrun job (several processes) on tpu that accelerate would run as NO."""
    accelerator = torch.accelerator.current_accelerator()
    return (
        not cpu
        and int(os.environ.get("WORLD_SIZE", "1")) > 1
        and os.environ.get("LOCAL_RANK") is not None
        and accelerator is not None
        and accelerator.type == "tpu"
    )


def _guard(module: ModuleType) -> None:
    state = module.PartialState
    prepare, set_device = state._prepare_backend, state.set_device
    if getattr(prepare, "_torchtpu", False):
        return
    kinds = module.DistributedType

    @functools.wraps(prepare)
    def _prepare_backend(self: Any, cpu: bool = False, *args: Any, **kwargs: Any) -> Any:
        backend, kind = prepare(self, cpu, *args, **kwargs)
        if kind == kinds.NO and _tpu_job(cpu):
            if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
                raise RuntimeError(REFUSED)
            from .distributed import DEFAULT_BACKEND

            return backend or DEFAULT_BACKEND, kinds.MULTI_CPU
        return backend, kind

    @functools.wraps(set_device)
    def _set_device(self: Any) -> None:
        if self.device is None and self.distributed_type == kinds.MULTI_CPU and _tpu_job(self._cpu):
            self.device = torch.device("tpu", self.local_process_index % torch.tpu.device_count())
            torch.tpu.set_device(self.device.index)
            return
        set_device(self)

    _prepare_backend._torchtpu = True  # type: ignore[attr-defined]
    state._prepare_backend = _prepare_backend
    state.set_device = _set_device


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _guard(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "accelerate.state":
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    if "accelerate.state" in sys.modules:
        _guard(sys.modules["accelerate.state"])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
