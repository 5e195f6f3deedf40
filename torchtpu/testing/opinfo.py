"""Runs OpInfo samples on tpu and on CPU and compares them, forward and gradients.

The tolerance table is the one place where we allow a difference from CPU; every entry says why.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

MAX_SAMPLES = 8

# (atol, rtol) per dtype, then per op where XLA's math differs from ATen's by design.
DEFAULT_TOL = {
    torch.float32: (1e-5, 1.3e-5),
    torch.complex64: (1e-5, 1.3e-5),
    torch.bfloat16: (1e-2, 1.6e-2),
}
OP_TOL: dict[str, tuple[float, float]] = {
    # XLA:CPU vectorizes transcendental functions with its own polynomial approximations.
    "erfinv": (1e-4, 1e-4),
    "lgamma": (1e-4, 1e-4),
    "digamma": (1e-4, 1e-4),
    "polygamma": (1e-4, 1e-4),
    "special.erfcx": (1e-4, 1e-4),
    "pow": (1e-4, 1e-5),
    "float_power": (1e-4, 1e-5),
    # Reductions sum in a different order (tree vs. sequential), so rounding differs.
    "cumsum": (1e-4, 1e-5),
    "cumprod": (1e-4, 1e-4),
    "logcumsumexp": (1e-4, 1e-5),
    "var": (1e-4, 1e-5),
    "std": (1e-4, 1e-5),
    "var_mean": (1e-4, 1e-5),
    "std_mean": (1e-4, 1e-5),
    "prod": (1e-4, 1e-4),
    "nn.functional.conv1d": (1e-4, 1e-5),
    "nn.functional.conv2d": (1e-4, 1e-5),
    "nn.functional.conv_transpose1d": (1e-4, 1e-5),
    "nn.functional.conv_transpose2d": (1e-4, 1e-5),
}

# Ops whose outputs are random: their values cannot match CPU (tested statistically elsewhere).
RANDOM_OPS = {
    "bernoulli",
    "normal",
    "uniform",
    "rand_like",
    "randn_like",
    "randint_like",
    "randint",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
    "multinomial",
    "randn",
    "rand",
    "randperm",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "nn.functional.rrelu",
    "empty",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "empty_strided",
    "empty_permuted",
    "torch.empty",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
}


@dataclass
class Result:
    ok: bool
    reason: str = ""


def _whole_storage(t: torch.Tensor) -> torch.Tensor:
    """The whole storage `t` views, as a 1-D tensor of `t`'s dtype on its device."""
    storage = t.untyped_storage()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(
        storage, 0, (storage.nbytes() // t.itemsize,)
    )


def _to(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        if x.layout == torch.strided and x.storage_offset() != 0 and device != "cpu":
            # A view into a larger storage (as_strided's partial views): the same view of the
            # whole storage, moved, as a sample made on the device would be.
            y = _whole_storage(x).to(device).as_strided(x.shape, x.stride(), x.storage_offset())
            y = y.detach()
        else:
            y = x.detach().to(device)
        return y.requires_grad_(x.requires_grad) if x.is_floating_point() or x.is_complex() else y
    return x


def _short(e: BaseException) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg[:160]}"


def _compare(actual: Any, expected: Any, tol: tuple[float, float]) -> None:
    a_leaves, _ = tree_flatten(actual)
    e_leaves, _ = tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        raise AssertionError(f"{len(a_leaves)} outputs, expected {len(e_leaves)}")
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"expected a tensor, got {type(a).__name__}")
            if a.device.type != "tpu" and e.device.type != "cpu":
                raise AssertionError(f"output on {a.device}")
            # Float results of integer inputs (torch.gradient) get their own dtype's tolerance.
            floor = DEFAULT_TOL.get(e.dtype, (0.0, 0.0))
            t = (max(tol[0], floor[0]), max(tol[1], floor[1]))
            torch.testing.assert_close(a.cpu(), e, atol=t[0], rtol=t[1], equal_nan=True)
        elif isinstance(e, float):
            torch.testing.assert_close(a, e, atol=tol[0], rtol=tol[1], equal_nan=True)
        elif a != e:
            raise AssertionError(f"{a!r} != {e!r}")


def _compare_to_exact(actual: Any, expected: Any, tol: tuple[float, float],
                      exact: Callable[[], Any], precision: str) -> None:
    """Compares a float result: it must match CPU's within tolerance, or be no farther from
    `exact()` (the same inputs on CPU in `precision`, float32 for bfloat16/float16 and float64
    for float32) than CPU's own result is. CPU is not the truth: its reduced-precision kernels
    round differently from one CPU to another (an AVX2 machine's bf16 conv_transpose was off by
    0.7 where ours was off by 0.44), and an ill-conditioned float32 result (matrix_exp of a matrix
    of norm 40) is off by 0.1 on CPU itself."""
    try:
        _compare(actual, expected, tol)
        return
    except AssertionError:
        reference = exact()
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    if len(a_leaves) != len(e_leaves):
        raise AssertionError(f"{len(a_leaves)} outputs, expected {len(e_leaves)}")
    for a, e, r in zip(a_leaves, e_leaves, tree_flatten(reference)[0]):
        float_leaf = (isinstance(e, torch.Tensor) and (e.is_floating_point() or e.is_complex()) and
                        isinstance(a, torch.Tensor) and a.shape == e.shape and a.dtype == e.dtype)
        if not float_leaf:
            _compare(a, e, tol)  # shapes, dtypes and non-float values still match exactly
            continue
        ours, cpus = _error(a.cpu(), r), _error(e, r)
        if ours > cpus + tol[0] or not _meaningful(cpus, r, reduced=precision == "float32"):
            raise AssertionError(
                f"Tensor-likes are not close! (off by {ours:.4g} from the {precision} result, "
                f"where CPU's own is off by {cpus:.4g})"
            )


def _meaningful(cpus: float, exact: torch.Tensor, reduced: bool) -> bool:
    """Whether CPU's own result is near the higher-precision one (within 5% of its largest value
    for bfloat16/float16, 1% for float32). When it is not, the higher precision chose something
    else (an eigenvector's sign), and being as far from it as CPU says nothing."""
    scale = exact.abs().double().nan_to_num(posinf=0.0).max().item() if exact.numel() else 0.0
    return cpus <= (0.05 if reduced else 0.01) * scale


def _error(x: torch.Tensor, exact: torch.Tensor) -> float:
    wide = torch.complex128 if x.is_complex() or exact.is_complex() else torch.float64
    d = (x.to(wide) - exact.to(wide)).abs()
    d[torch.isnan(x) & torch.isnan(exact)] = 0
    return d.nan_to_num(nan=float("inf")).max().item() if d.numel() else 0.0


def _upcast(x: Any, to: torch.dtype = torch.float32) -> Any:
    """x with its reduced-precision (to float32) or float32 and complex64 (to float64 and
    complex128) tensors converted."""
    source = REDUCED if to == torch.float32 else (torch.float32, torch.complex64)

    def up(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype in source:
            return t.detach().to(torch.complex128 if t.is_complex() else to)
        return t

    return tree_map(up, x)


REDUCED = (torch.bfloat16, torch.float16)


def _tolerance(name: str, dtype: torch.dtype) -> tuple[float, float]:
    base = DEFAULT_TOL.get(dtype, (0.0, 0.0))
    extra = OP_TOL.get(name, (0.0, 0.0))
    return max(base[0], extra[0]), max(base[1], extra[1])


def _differentiable_outputs(out: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(out)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def run_op(op: Any, dtype: torch.dtype = torch.float32, grad: bool = False) -> Result:
    """Runs up to MAX_SAMPLES samples of `op` on tpu and CPU; ok if every one matches."""
    tol = _tolerance(op.name, dtype)
    try:
        samples = list(
            itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=grad), MAX_SAMPLES)
        )
    except Exception as e:  # noqa: BLE001 (the sample generator itself failed)
        return Result(False, f"samples: {_short(e)}")
    compared = 0
    for sample, pinned in zip(samples, _cpu_pinned(op, dtype, grad, samples)):
        torch.manual_seed(0)
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # noqa: BLE001, S112 (CPU rejects this sample: nothing to compare)
            continue
        leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        inp, args, kwargs = tree_unflatten(
            [x if i in pinned else _to(x, "tpu") for i, x in enumerate(leaves)], spec
        )
        try:
            actual = op(inp, *args, **kwargs)
            try:
                _compare_forward(op, sample, actual, expected, dtype, tol, lambda out: out)
            except AssertionError:
                # Where the op leaves something free (an eigenvector's sign), OpInfo's
                # output_process_fn_grad removes it for PyTorch's gradient tests: the results
                # must then match with it removed.
                _compare_forward(op, sample, actual, expected, dtype, tol,
                                 sample.output_process_fn_grad)
            if grad:
                _check_grad(op, sample, expected, (inp, args, kwargs), actual, tol)
        except Exception as e:  # noqa: BLE001 (reported as the op's failure reason)
            return Result(False, _short(e))
        compared += 1
    if compared == 0:
        return Result(False, "no sample ran on CPU")
    return Result(True)


def _compare_forward(op: Any, sample: Any, actual: Any, expected: Any, dtype: torch.dtype,
                     tol: tuple[float, float], process: Callable[[Any], Any]) -> None:
    if dtype not in REDUCED and dtype not in (torch.float32, torch.complex64):
        _compare(process(actual), process(expected), tol)
        return
    to = torch.float32 if dtype in REDUCED else torch.float64
    _compare_to_exact(process(actual), process(expected), tol,
                      lambda: process(op(*_upcast((sample.input, *sample.args), to),
                                         **_upcast(sample.kwargs, to))),
                      _name(torch.complex128 if dtype == torch.complex64 else to))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _cpu_pinned(op: Any, dtype: torch.dtype, grad: bool, samples: list[Any]) -> list[set[int]]:
    """Per sample, the positions (in the flattened input, args and kwargs) of the tensors that
    the sample generator leaves on CPU whatever the device (tensor_split's indices, which must be
    on CPU): a sample made for the device under test has them on CPU too, so they stay there.
    Found by making the samples on the meta device; none where those differ in structure."""
    none = [set() for _ in samples]
    try:
        meta = list(itertools.islice(op.sample_inputs("meta", dtype, requires_grad=grad),
                                     len(samples)))
    except Exception:  # noqa: BLE001 (a generator that needs real values: nothing is pinned)
        return none
    if len(meta) != len(samples):
        return none
    pinned = []
    for m, s in zip(meta, samples):
        ours, theirs = (tree_flatten((x.input, x.args, x.kwargs))[0] for x in (m, s))
        same = len(ours) == len(theirs)
        pinned.append({i for i, x in enumerate(ours) if same and isinstance(x, torch.Tensor)
                       and x.device.type == "cpu" and isinstance(theirs[i], torch.Tensor)})
    return pinned


def _grad_leaves(x: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(x)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _check_grad(
    op: Any, sample: Any, expected: Any, tpu_inputs: Any, actual: Any, tol: tuple[float, float]
) -> None:
    # As PyTorch's gradient tests do: the sample's output_process_fn_grad makes the loss
    # independent of what the op leaves free (an eigenvector's phase, say).
    process = sample.output_process_fn_grad
    cpu_outs = _differentiable_outputs(process(expected))
    tpu_outs = _differentiable_outputs(process(actual))
    if not cpu_outs:
        return
    cpu_in = _grad_leaves((sample.input, sample.args, sample.kwargs))
    tpu_in = _grad_leaves(tpu_inputs)
    gen = torch.Generator().manual_seed(1)
    cots = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in cpu_outs]
    cpu_grads = torch.autograd.grad(cpu_outs, cpu_in, cots, allow_unused=True)
    tpu_grads = torch.autograd.grad(
        tpu_outs, tpu_in, [c.to(o.device) for c, o in zip(cots, tpu_outs)], allow_unused=True
    )
    exact: list[Any] = []
    for i, (a, e) in enumerate(zip(tpu_grads, cpu_grads)):
        if e is None or a is None:
            if (e is None) != (a is None):
                raise AssertionError("gradient presence differs from CPU")
            continue
        atol, rtol = tol[0] * 10, tol[1] * 10
        try:
            torch.testing.assert_close(a.cpu(), e, atol=atol, rtol=rtol, equal_nan=True)
        except AssertionError:
            # As in the forward: no farther from the float64 gradients than CPU's own are.
            exact = exact or _float64_grads(op, sample, process, cots)
            ours, cpus = _error(a.cpu(), exact[i]), _error(e, exact[i])
            if not (e.dtype == torch.float32 and ours <= cpus + atol
                    and _meaningful(cpus, exact[i], reduced=False)):
                raise


def _float64_grads(op: Any, sample: Any, process: Callable[[Any], Any],
                   cots: list[torch.Tensor]) -> list[Any]:
    """The gradients of `sample` computed on CPU in float64, for the same cotangents."""

    def up(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
            return t.detach().double().requires_grad_(t.requires_grad)
        return t

    inp, args, kwargs = tree_map(up, (sample.input, sample.args, sample.kwargs))
    outs = _differentiable_outputs(process(op(inp, *args, **kwargs)))
    grads = torch.autograd.grad(outs, _grad_leaves((inp, args, kwargs)),
                                [c.double() if c.dtype == torch.float32 else c for c in cots],
                                allow_unused=True)
    return list(grads)


def op_database() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def supports(op: Any, dtype: torch.dtype) -> bool:
    return dtype in op.supported_dtypes("cpu") and op.name not in RANDOM_OPS


# Besides float32 (forward and gradients), forward runs for these dtypes where CPU supports the op.
EXTRA_DTYPES = {
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
    "complex64": torch.complex64,
}


def run_all(
    filter_fn: Callable[[Any], bool] = lambda op: True, grad: bool = True
) -> dict[str, dict[str, Result]]:
    """{op key: {"forward": ..., "grad": ..., "forward_bfloat16": ..., ...}} for op_db."""
    results: dict[str, dict[str, Result]] = {}
    for op in op_database():
        if not filter_fn(op) or not supports(op, torch.float32):
            continue
        key = op.name if not op.variant_test_name else f"{op.name}.{op.variant_test_name}"
        entry = {"forward": run_op(op, torch.float32, grad=False)}
        if grad and op.supports_autograd and entry["forward"].ok:
            entry["grad"] = run_op(op, torch.float32, grad=True)
        for name, dtype in EXTRA_DTYPES.items():
            if supports(op, dtype):
                entry[f"forward_{name}"] = run_op(op, dtype, grad=False)
        results[key] = entry
    return results


@dataclass
class ErrorResult:
    """One op's `error_inputs`: how many CPU rejects as OpInfo expects, and how many of those
    tpu rejects the same way (exception type, and a message matching OpInfo's regex)."""

    expected: int = 0
    matched: int = 0
    failures: list[str] | None = None


def _to_keeping_aliases(tree: Any, device: str, pinned: set[int] = frozenset()) -> Any:
    """Moves the tensors of `tree` to `device`, but for the leaf positions in `pinned` (see
    _cpu_pinned); tensors that share a CPU storage (an out= argument that is a view of an input)
    share one storage there too, as the same views of it."""
    if device == "cpu":
        return tree
    bases: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    def move(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        storage = t.untyped_storage()
        key = (storage.data_ptr(), t.dtype)
        if key not in bases:
            try:
                whole = _whole_storage(t)
            except RuntimeError:  # a storage that cannot be viewed whole: move the tensor alone
                return _to(t, device)
            bases[key] = whole.to(device)
        y = bases[key].as_strided(t.shape, t.stride(), t.storage_offset())
        return y.requires_grad_(t.requires_grad) if t.is_floating_point() else y

    leaves, spec = tree_flatten(tree)
    return tree_unflatten([x if i in pinned else move(x) for i, x in enumerate(leaves)], spec)


def _read(out: Any) -> None:
    """Reads every tensor of `out` to the host: a check inside a fused program raises there."""
    tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, out)


def _raises_as_expected(op: Any, error_input: Any, device: str) -> str | None:
    """None when running the error input on `device` raises as OpInfo expects, else why not."""
    s = error_input.sample_input
    try:
        inp, args, kwargs = _to_keeping_aliases((s.input, s.args, s.kwargs), device)
    except Exception as e:  # noqa: BLE001 (an input tpu cannot hold: complex dtypes)
        return f"inputs: {_short(e)}"
    try:
        out = op(inp, *args, **kwargs)
        _read(out)
        if device == "tpu":
            torch.tpu.synchronize()
    except Exception as e:  # noqa: BLE001 (compared with what OpInfo expects)
        if not isinstance(e, error_input.error_type):
            return f"raised {_short(e)}, expected {error_input.error_type.__name__}"
        if not re.search(error_input.error_regex, str(e)):
            return f"message {_short(e)!r} does not match {error_input.error_regex!r}"
        return None
    return f"raised nothing, expected {error_input.error_type.__name__}"


_TWIN_VALUES = {float: (1.0, 0.5, 2.0, 0.0), int: (1, 0, 2)}


def _valid_twin(op: Any, error_input: Any) -> Any | None:
    """The error input's call with its number arguments replaced by values CPU accepts, or None
    when it has none or no such values were found. Run first on tpu, the twin fills the caches
    that key a call by its arguments' types and shapes (the Meta cache keys a float by its type,
    and an int passed as a float is one): the error input must still raise after it."""
    s = error_input.sample_input
    leaves, spec = tree_flatten((s.args, s.kwargs))
    spots = [i for i, x in enumerate(leaves) if type(x) in _TWIN_VALUES]
    if not spots or len(spots) > 3:
        return None
    for values in itertools.product(*(_TWIN_VALUES[type(leaves[i])] for i in spots)):
        twin = list(leaves)
        for i, v in zip(spots, values):
            twin[i] = v
        args, kwargs = tree_unflatten(twin, spec)
        sample = type(s)(s.input, args=args, kwargs=kwargs)
        # clones: in-place ops write their arguments
        inp, args, kwargs = tree_map(_clone, (sample.input, sample.args, sample.kwargs))
        try:
            op(inp, *args, **kwargs)
        except Exception:  # noqa: BLE001, S112 (these values are rejected too: try the next)
            continue
        return sample
    return None


def _clone(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else x


def _run_twin(op: Any, twin: Any) -> None:
    """Runs a valid twin on tpu to warm its caches; what it computes is not compared here."""
    inp, args, kwargs = _to_keeping_aliases((twin.input, twin.args, twin.kwargs), "tpu")
    try:
        out = op(inp, *args, **kwargs)
        _read(out)
    except Exception:  # noqa: BLE001, S110 (an op tpu lacks: op_db's own tests report it)
        pass


def run_error_inputs(op: Any) -> ErrorResult:
    """Runs `op.error_inputs` on CPU and on tpu (built on CPU, then moved)."""
    result = ErrorResult(failures=[])
    if op.error_inputs_func is None:
        return result
    torch.manual_seed(0)  # some error inputs are random: the same ones every run
    try:
        inputs = list(op.error_inputs("cpu"))
    except Exception as e:  # noqa: BLE001 (the generator itself failed)
        result.failures.append(f"error_inputs: {_short(e)}")
        return result
    for ei in inputs:
        if _raises_as_expected(op, ei, "cpu") is not None:
            continue  # CPU itself does not raise as OpInfo says: nothing to compare
        result.expected += 1
        twin = _valid_twin(op, ei)
        if twin is not None:
            _run_twin(op, twin)
        why = _raises_as_expected(op, ei, "tpu")
        if why is None:
            result.matched += 1
        else:
            result.failures.append(why)
    return result
