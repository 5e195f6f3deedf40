"""What torch.compile's default backend (Inductor) does with tpu tensors: a clear error.

Inductor generates kernels (Triton, C++, or Pallas for Google's torch_tpu runtime, which it
binds to the device name "tpu"); it has no code generator for our device, and PyTorch offers no
hook that would send the default backend's graphs to another Dynamo backend short of replacing
`torch.compile`'s default, which breaks CPU and CUDA code in the same process. So we register
our device with Inductor as one it cannot generate code for, and the error names
`backend="tpu"`. Registration waits until Inductor's codegen registry is imported (it costs a
second to import), so `import torchtpu` stays fast.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

_REGISTRY = "torch._inductor.codegen.common"

MESSAGE = (
    "torch.compile's default backend (Inductor) cannot generate code for tpu tensors. "
    'Compile with torch.compile(model, backend="tpu"): it lowers each graph to one XLA program.'
)


class _Refusing(type):
    """Any use of the class (constructing it, asking it anything) raises the error."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(MESSAGE)

    def __getattr__(cls, name: str) -> Any:
        raise RuntimeError(MESSAGE)


class _Refuse(metaclass=_Refusing):
    """Inductor's scheduling and wrapper code generators for tpu."""


def _register(common: ModuleType) -> None:
    common.register_backend_for_device("tpu", _Refuse, _Refuse)


class _OnImport(importlib.abc.MetaPathFinder):
    """Registers with Inductor right after its codegen registry module is executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _REGISTRY:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _register(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    if _REGISTRY in sys.modules:
        _register(sys.modules[_REGISTRY])
    elif not any(isinstance(f, _OnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _OnImport())
