"""A guard for Hugging Face accelerate (and so Trainer) under torchrun.

accelerate 1.16 knows distributed training on a fixed list of device types; for tpu it reports
DistributedType.NO, so under torchrun every process would train a model of its own on tpu:0 and
end with different weights, with no error. Until accelerate can be taught the device, the state
it builds in such a job raises instead, saying so. One process, and use_cpu, are unaffected.

The check wraps `PartialState._prepare_backend` once `accelerate.state` is imported (a
post-import hook: importing torchtpu never imports accelerate).
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

MESSAGE = (
    "accelerate does not support distributed training on tpu devices yet: in this torchrun job "
    "(WORLD_SIZE={world}) it would run each process as a separate single-device job, and every "
    "rank would train its own model. Launch one process, or write the loop with "
    "torch.nn.parallel.DistributedDataParallel and init_process_group() (see torchtpu's README, "
    "'Distributed')."
)


def _guard(module: ModuleType) -> None:
    state = module.PartialState
    prepare = state._prepare_backend
    if getattr(prepare, "_torchtpu_guard", False):
        return

    @functools.wraps(prepare)
    def _prepare_backend(self: Any, cpu: bool = False, *args: Any, **kwargs: Any) -> Any:
        backend, kind = prepare(self, cpu, *args, **kwargs)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        accelerator = torch.accelerator.current_accelerator()
        if (
            str(kind) in ("NO", "DistributedType.NO")
            and world > 1
            and not cpu
            and accelerator is not None
            and accelerator.type == "tpu"
        ):
            raise RuntimeError(MESSAGE.format(world=world))
        return backend, kind

    _prepare_backend._torchtpu_guard = True  # type: ignore[attr-defined]
    state._prepare_backend = _prepare_backend


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
