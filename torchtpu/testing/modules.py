"""Runs PyTorch's module suite (`common_modules.module_db`, shipped in the torch wheel) on tpu
against CPU: each ModuleInfo's module inputs, built on CPU, copied to tpu with `.to("tpu")`, in
training and eval modes: outputs, buffers after the forward (batch-norm statistics), and
gradients of the inputs and parameters in float32; outputs in bfloat16.

A ModuleInfo passes when every check it has passes. Tolerances are opinfo.py's."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .opinfo import DEFAULT_TOL, REDUCED, Result, _compare, _compare_to_exact, _short, _to, _upcast

MAX_INPUTS = 4
NO_CPU_INPUT = "no input ran on CPU"
# Modules whose forward draws random numbers in training mode: CPU and tpu have their own
# generators, so only eval mode is compared.
RANDOM_IN_TRAINING = {
    "nn.FractionalMaxPool2d",
    "nn.FractionalMaxPool3d",
    "nn.Transformer",
    "nn.TransformerEncoder",
    "nn.TransformerEncoderLayer",
    "nn.TransformerDecoderLayer",
}
# Modules that are random in every mode.
RANDOM_ALWAYS = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d"}


def module_database() -> list[Any]:
    from torch.testing._internal.common_modules import module_db

    return module_db


def _build(info: Any, module_input: Any, dtype: torch.dtype, training: bool) -> torch.nn.Module:
    c = module_input.constructor_input
    torch.manual_seed(0)
    m = info.module_cls(*c.args, **c.kwargs)
    m = m.to(dtype) if dtype != torch.float32 else m
    m.train(training)
    if info.is_lazy:  # parameters take their shapes from the first input: make them on CPU
        f = module_input.forward_input
        with torch.no_grad():
            m(*f.args, **f.kwargs)
    return m


def _to_tpu(tree: Any) -> Any:
    """Moves the tensors of `tree` to tpu; one tensor passed twice (KLDivLoss's input and
    target) stays one tensor, so that its gradient sums both uses as on CPU."""
    moved: dict[int, torch.Tensor] = {}

    def move(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in moved:
            moved[id(t)] = _to(t, "tpu")
        return moved[id(t)]

    return tree_map(move, tree)


def _cotangents(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outputs]


def _grads(module: torch.nn.Module, inputs: Any, outputs: Any, cots: list[torch.Tensor]) -> list:
    outs = [t for t in tree_flatten(outputs)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    leaves = [t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]
    if not outs or not (leaves or params):
        return []
    dev = outs[0].device
    return list(
        torch.autograd.grad(outs, leaves + params, [c.to(dev) for c in cots], allow_unused=True)
    )


def run_module(info: Any, dtype: torch.dtype, training: bool, grad: bool) -> Result:
    """Up to MAX_INPUTS of the ModuleInfo's inputs on tpu and CPU; ok if every one matches."""
    tol = DEFAULT_TOL[dtype]
    try:
        inputs = info.module_inputs_func(
            info, device="cpu", dtype=dtype, requires_grad=grad, training=training
        )[:MAX_INPUTS]
    except Exception as e:  # noqa: BLE001 (the input generator itself failed)
        return Result(False, f"inputs: {_short(e)}")
    compared = 0
    for mi in inputs:
        if mi.forward_input is None:
            continue
        f = mi.forward_input
        try:
            cpu_module = _build(info, mi, dtype, training)
            tpu_module = copy.deepcopy(cpu_module)
            exact_module = copy.deepcopy(cpu_module).float() if dtype in REDUCED else None
            torch.manual_seed(0)
            expected = cpu_module(*f.args, **f.kwargs)
        except Exception:  # noqa: BLE001, S112 (CPU rejects this input: nothing to compare)
            continue
        try:
            tpu_module = tpu_module.to("tpu")
            args, kwargs = _to_tpu((f.args, f.kwargs))
            torch.manual_seed(0)
            actual = tpu_module(*args, **kwargs)
            if dtype in REDUCED:

                def exact(m: Any = exact_module, a: Any = f.args, k: Any = f.kwargs) -> Any:
                    torch.manual_seed(0)
                    return m(*_upcast(a), **_upcast(k))

                _compare_to_exact(actual, expected, tol, exact, "float32")
            else:
                _compare(actual, expected, tol)
            _compare(list(tpu_module.buffers()), list(cpu_module.buffers()), tol)
            if grad:
                outs = [t for t in tree_flatten(expected)[0] if isinstance(t, torch.Tensor)]
                cots = _cotangents([t for t in outs if t.requires_grad])
                e_grads = _grads(cpu_module, (f.args, f.kwargs), expected, cots)
                a_grads = _grads(tpu_module, (args, kwargs), actual, cots)
                for a, e in zip(a_grads, e_grads):
                    if (a is None) != (e is None):
                        raise AssertionError("gradient presence differs from CPU")
                    if e is not None:
                        torch.testing.assert_close(
                            a.cpu(), e, atol=tol[0] * 10, rtol=tol[1] * 10, equal_nan=True
                        )
        except Exception as e:  # noqa: BLE001 (reported as the module's failure reason)
            return Result(False, _short(e))
        compared += 1
    if compared == 0:
        return Result(False, NO_CPU_INPUT)
    return Result(True)


def checks(info: Any) -> dict[str, Callable[[], Result]]:
    """The ModuleInfo's checks, by name: what runs, not yet run."""
    out: dict[str, Callable[[], Result]] = {}
    if info.name in RANDOM_ALWAYS:
        return out
    for training in (False, True):
        if training and info.name in RANDOM_IN_TRAINING:
            continue
        mode = "train" if training else "eval"
        out[f"float32_{mode}"] = lambda t=training: run_module(info, torch.float32, t, grad=True)
        # bfloat16 for every module, listed or not: a module CPU cannot run in bfloat16 says so.
        out[f"bfloat16_{mode}"] = lambda t=training: run_module(info, torch.bfloat16, t, grad=False)
    return out


def run_checks(info: Any) -> dict[str, Result]:
    """The ModuleInfo's checks, run. A bfloat16 check that CPU itself cannot run (no bfloat16
    kernel) is dropped; a module random in every mode has none (not attempted)."""
    ran = {name: run() for name, run in checks(info).items()}
    return {
        k: r for k, r in ran.items() if not (k.startswith("bfloat16") and r.reason == NO_CPU_INPUT)
    }


def run_all(
    filter_fn: Callable[[Any], bool] = lambda info: True,
) -> dict[str, dict[str, Result]]:
    """{ModuleInfo name: {check: Result}} for module_db."""
    return {info.name: run_checks(info) for info in module_database() if filter_fn(info)}


def passes(checks_of_one: dict[str, Result]) -> bool:
    return bool(checks_of_one) and all(r.ok for r in checks_of_one.values())
