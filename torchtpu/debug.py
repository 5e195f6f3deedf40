"""The CPU-shadow numerics checker: `with torchtpu.debug.shadow():` (or TORCHTPU_SHADOW=1 for a
whole program) runs every ATen op on tpu tensors a second time on CPU, on shadow copies, and
compares each result as it is produced. The first op whose result differs from CPU's beyond
its dtype's tolerance (or puts NaN/inf elsewhere) raises ShadowMismatch (or warns), naming the
op, the user's line that issued it, the shapes and the largest error.

Shadows follow the tpu tensors through views and in-place updates: each tpu storage has one CPU
shadow storage, and a tensor's shadow is the view of it with the tensor's dtype, sizes, strides
and offset, so CPU's own view and in-place semantics keep the two in step. A storage first seen
inside the checker is copied from the device. Random ops (dropout, randn) and uninitialized
allocations cannot be compared: their shadows are copied from the tpu results. After each
op, each shadow takes the tpu value it was compared with, so every op is checked on the
inputs the tpu op had: a report names the op where an error arises, not one downstream where
rounding differences grew.

What it costs: every op waits for its result (fused mode then runs one program per op) and
runs on CPU too. The tpu values are the same as without the checker.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["ShadowMismatch", "shadow"]

# Default (rtol, atol) per dtype: an element may differ by rtol * |CPU's value| + atol * (the
# largest |value| of CPU's result). atol is relative to the result's scale because gradients are
# small: an absolute floor would hide a wrong one. XLA and CPU round differently (fused
# multiply-adds, summation order): a float32 matmul differs by about 1e-6 of its largest value.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1e-4, 1e-4),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_UNDEFINED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def _scores(q, k, bias, is_causal, scale):
    if k.shape[-3] != q.shape[-3]:  # grouped-query heads
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if bias is not None:
        s = s.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else s + bias
    return s


def _grouped(v, q):
    return (
        v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3) if v.shape[-3] != q.shape[-3] else v
    )


def _sdpa(
    q, k, v, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None
):
    """CPU reference for the tpu attention kernel (CPU has none): output and logsumexp."""
    if dropout_p > 0:
        return None
    s = _scores(q, k, attn_bias, is_causal, scale)
    lse = s.logsumexp(-1)
    out = (s - lse[..., None]).exp() @ _grouped(v, q)
    return out, lse, None, None, None, None, None, None, None


def _sdpa_backward(g, q, k, v, attn_bias, mask, out, lse, *rest, scale=None):
    """CPU reference for the kernel's backward: softmax attention's gradients, summed over the
    query heads that share a key head."""
    dropout_p, is_causal = rest[4], rest[5]
    if dropout_p > 0:
        return None
    bias = attn_bias if attn_bias is not None and attn_bias.numel() else None
    s = _scores(q, k, bias, is_causal, scale)
    p = (s - s.logsumexp(-1, keepdim=True)).exp()
    vg = _grouped(v, q)
    dp = g @ vg.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    sc = q.shape[-1] ** -0.5 if scale is None else scale
    kg = _grouped(k, q)
    dq = ds @ kg * sc
    dk = ds.transpose(-2, -1) @ q * sc
    dv = p.transpose(-2, -1) @ g
    if k.shape[-3] != q.shape[-3]:
        n = q.shape[-3] // k.shape[-3]
        dk = dk.unflatten(-3, (k.shape[-3], n)).sum(-3)
        dv = dv.unflatten(-3, (v.shape[-3], n)).sum(-3)
    return dq if mask[0] else None, dk if mask[1] else None, dv if mask[2] else None, None


_REFERENCES = {
    "aten::_scaled_dot_product_fused_attention_overrideable": _sdpa,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _sdpa_backward,
}


class ShadowMismatch(RuntimeError):
    """A tpu op's result differs from the same op's result on CPU."""


def _user_line() -> str | None:
    for frame in reversed(traceback.extract_stack()):
        path = os.path.abspath(frame.filename)
        if not path.startswith((_HERE, _TORCH)) and "<frozen" not in path:
            return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return None


def _where() -> str:
    """The user's line; in a backward pass (autograd's thread has none), the node it runs."""
    line = _user_line()
    node = torch._C._current_autograd_node()
    if node is not None:
        inside = f"in the backward pass, computing {node.name()}"
        return f"{inside} (backward called at {line})" if line else inside
    return f"at {line}" if line else "at an unknown line"


def _is_tpu(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "tpu"


class _Shadows(TorchDispatchMode):
    def __init__(self, action: str, tolerances: dict[torch.dtype, tuple[float, float]]) -> None:
        super().__init__()
        if action not in ("raise", "warn"):
            raise ValueError(f"action must be 'raise' or 'warn', not {action!r}")
        self.action = action
        self.tolerances = {**TOLERANCES, **tolerances}
        self.storages: dict[int, tuple[StorageWeakRef, torch.Tensor]] = {}
        self.checked = 0
        self.unchecked: dict[str, int] = {}  # ops CPU has no kernel for: not compared
        self.mismatches: list[str] = []

    # Shadows.
    def _storage(self, t: torch.Tensor) -> torch.Tensor:
        """The flat CPU shadow of t's storage (created from the device when first seen)."""
        st = t.untyped_storage()
        entry = self.storages.get(st._cdata)
        if entry is not None and not entry[0].expired() and entry[1].nbytes == st.nbytes():
            return entry[1]
        if len(self.storages) > 4096:
            self.storages = {k: v for k, v in self.storages.items() if not v[0].expired()}
        cpu = torch.empty(st.nbytes(), dtype=torch.uint8)
        if st.nbytes():
            cpu.copy_(self._bytes_of(t, st))
        self.storages[st._cdata] = (StorageWeakRef(st), cpu)
        return cpu

    @staticmethod
    def _bytes_of(t: torch.Tensor, st: torch.UntypedStorage) -> torch.Tensor:
        """The bytes of a tpu storage, read through a flat view of t's dtype."""
        item = t.element_size()
        whole = torch.empty(0, dtype=t.dtype, device=t.device)
        whole.set_(st, 0, (st.nbytes() // item,), (1,))
        return whole.cpu().view(torch.uint8)

    def _view(self, t: torch.Tensor, data: torch.Tensor) -> torch.Tensor:
        out = torch.empty(0, dtype=t.dtype)
        return out.set_(data.untyped_storage(), t.storage_offset(), t.shape, t.stride())

    def shadow_of(self, t: torch.Tensor) -> torch.Tensor:
        return self._view(t, self._storage(t))

    def _resync(self, t: torch.Tensor) -> None:
        """The shadow of t's storage becomes a copy of the device's values."""
        st = t.untyped_storage()
        cpu = torch.empty(st.nbytes(), dtype=torch.uint8)
        if st.nbytes():
            cpu.copy_(self._bytes_of(t, st))
        self.storages[st._cdata] = (StorageWeakRef(st), cpu)

    def _adopt(self, t: torch.Tensor, c: torch.Tensor) -> None:
        """A new tpu result's storage takes the CPU result's storage as its shadow, when the
        two are laid out alike; otherwise a copy of the device's values."""
        st = t.untyped_storage()
        entry = self.storages.get(st._cdata)
        if entry is not None and not entry[0].expired():
            return  # a view of a storage already shadowed: the CPU op wrote through its view
        cs = c.untyped_storage()
        if (
            cs.nbytes() == st.nbytes()
            and c.stride() == t.stride()
            and c.storage_offset() == t.storage_offset()
            and c.dtype == t.dtype
        ):
            data = torch.empty(0, dtype=torch.uint8).set_(cs, 0, (cs.nbytes(),), (1,))
            self.storages[st._cdata] = (StorageWeakRef(st), data)
        else:
            self._resync(t)

    def _follow(self, t: torch.Tensor, got: torch.Tensor) -> None:
        """t's shadow takes the device's values (read for the comparison): the next op is
        compared on the inputs the tpu op had, so an error is reported where it arises and
        not where rounding differences from earlier ops grow large."""
        view = self.shadow_of(t)
        try:
            view.copy_(got)
        except RuntimeError:  # an overlapping view (expand): take the whole storage
            self._resync(t)

    # Comparison.
    def _differs(self, got: torch.Tensor, want: torch.Tensor) -> str | None:
        want = want.detach()
        if got.shape != want.shape:
            return f"shape {tuple(got.shape)} on tpu, {tuple(want.shape)} on CPU"
        if got.dtype != want.dtype:
            return f"dtype {got.dtype} on tpu, {want.dtype} on CPU"
        if got.numel() == 0:
            return None
        if not (got.is_floating_point() or got.is_complex()):
            bad = got != want
            if bad.any():
                return f"{int(bad.sum())} of {got.numel()} elements differ"
            return None
        g, w = (
            got.to(torch.complex128 if got.is_complex() else torch.float64),
            want.to(torch.complex128 if want.is_complex() else torch.float64),
        )
        if not torch.equal(g.isnan(), w.isnan()):
            return "NaN at different positions"
        inf = g.isinf() | w.isinf()
        if not torch.equal(g[inf], w[inf]):
            return "inf at different positions"
        ok = ~(g.isnan() | inf)
        err = (g[ok] - w[ok]).abs()
        if err.numel() == 0:
            return None
        rtol, atol = self.tolerances.get(got.dtype, (0.0, 0.0))
        scale = w[ok].abs()
        bound = atol * scale.max() + rtol * scale
        if bool((err > bound).any()):
            k = int((err - bound).argmax())
            return (
                f"largest error {err.max().item():.3g} (tolerance {bound[k].item():.3g} at the "
                f"worst element: tpu {g[ok][k].item():.6g}, CPU {w[ok][k].item():.6g}; "
                f"rtol {rtol:g}, atol {atol:g})"
            )
        return None

    def _report(self, func: Any, args: Any, what: str) -> None:
        shapes = [tuple(a.shape) for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)]
        if len(shapes) > 8:
            shapes = [*shapes[:8], f"... {len(shapes)} tensors"]
        message = (
            f"tpu and CPU disagree on {func._schema.name}.{func._overloadname} "
            f"issued {_where()}, inputs of shapes {shapes}: {what}"
        )
        self.mismatches.append(message)
        if self.action == "raise":
            raise ShadowMismatch(message)
        warnings.warn(message, stacklevel=2)

    # Dispatch.
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        flat_in = tree_flatten((args, kwargs))[0]
        if not any(_is_tpu(x) for x in flat_in):
            return func(*args, **kwargs)
        name = func._schema.name.split("::")[-1]
        written = [
            args[i] if i < len(args) else kwargs.get(a.name)
            for i, a in enumerate(func._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        written = [w for w in tree_flatten(written)[0] if _is_tpu(w)]
        if torch.Tag.nondeterministic_seeded in func.tags or name in _UNDEFINED:
            out = func(*args, **kwargs)
            for t in [*written, *(o for o in tree_flatten(out)[0] if _is_tpu(o))]:
                self._resync(t)
            return out

        def to_cpu(x: Any) -> Any:
            if _is_tpu(x):
                return self.shadow_of(x)
            if isinstance(x, torch.device) and x.type == "tpu":
                return torch.device("cpu")
            return x

        cpu_args, cpu_kwargs = tree_map(to_cpu, (args, kwargs))
        out = func(*args, **kwargs)  # raises as it would without the checker
        self.checked += 1
        reference = _REFERENCES.get(func._schema.name)
        try:
            cpu_out = (reference or func)(*cpu_args, **cpu_kwargs)
            if reference is not None and cpu_out is None:  # it cannot say (attention dropout)
                raise NotImplementedError
        except Exception as e:  # noqa: BLE001 (any CPU failure is the finding)
            for t in [*written, *(o for o in tree_flatten(out)[0] if _is_tpu(o))]:
                self._resync(t)
            if isinstance(e, NotImplementedError):  # an op only accelerators have (SDPA's)
                self.checked -= 1
                self.unchecked[str(func)] = self.unchecked.get(str(func), 0) + 1
                return out
            self._report(func, args, f"CPU raised {type(e).__name__}: {e}")
            return out
        problems = []
        flat_out = tree_flatten(out)[0]
        flat_cpu = list(cpu_out) if reference else tree_flatten(cpu_out)[0]
        pairs = list(zip(flat_out, flat_cpu, strict=False))
        exact: list[Any] | None = None
        for i, (t, c) in enumerate(pairs):
            if c is None:  # not compared (philox state, a gradient not asked for)
                if _is_tpu(t):
                    self._resync(t)
                continue
            if isinstance(t, torch.Tensor) and isinstance(c, torch.Tensor):
                got = t.detach().cpu()
                why = self._differs(got, c)
                if why and reference is None and _low_precision(got):
                    if exact is None:
                        exact = _in_float64(func, cpu_args, cpu_kwargs)
                    e = exact[i] if i < len(exact) else None
                    if isinstance(e, torch.Tensor) and self._differs(got, e.to(got.dtype)) is None:
                        why = None  # CPU's own rounding differs: tpu is as close to the exact value
                if why:
                    problems.append((t, why))
                if _is_tpu(t):
                    self._adopt(t, c)
                    self._follow(t, got)
            elif isinstance(t, (int, float, complex, bool)) and t != c:
                ok = isinstance(t, float) and abs(t - c) <= 1e-5 * max(1.0, abs(c))
                if not ok:
                    problems.append((None, f"{t!r} on tpu, {c!r} on CPU"))
        outs = {id(t) for t, _ in pairs}
        for w in written:
            if id(w) not in outs:
                got = w.detach().cpu()
                why = self._differs(got, self.shadow_of(w))
                if why:
                    problems.append((w, f"written argument: {why}"))
                self._follow(w, got)
        if problems:
            self._report(func, args, "; ".join(why for _, why in problems[:3]))
        return out


def _low_precision(t: torch.Tensor) -> bool:
    return t.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.complex64)


def _in_float64(func: Any, args: Any, kwargs: Any) -> list[Any]:
    """The op's results computed in float64 (complex128) from the same inputs: the arbiter when
    tpu and CPU differ. CPU's float32 kernels accumulate in float32 too (a norm over 4M gradient
    elements is 6e-4 off), and tpu being as close to the exact value is no mismatch."""

    def up(x: Any) -> Any:  # copies, so that an in-place op leaves the shadows alone
        if isinstance(x, torch.Tensor) and _low_precision(x):
            return x.to(torch.complex128 if x.is_complex() else torch.float64)
        return x.clone() if isinstance(x, torch.Tensor) else x

    try:
        args, kwargs = tree_map(up, (args, kwargs))
        return tree_flatten(func(*args, **kwargs))[0]
    except Exception:  # noqa: BLE001 (no float64 kernel, or dtype rules differ: no arbiter)
        return []


@contextlib.contextmanager
def shadow(
    action: str = "raise", tolerances: dict[torch.dtype, tuple[float, float]] | None = None
) -> Iterator[_Shadows]:
    """Checks every tpu op against CPU while the block runs: `action` 'raise' raises
    ShadowMismatch at the first op that differs, 'warn' warns for each and goes on. `tolerances`
    maps dtypes to (rtol, atol), over TOLERANCES. Yields the checker: `.checked` (ops compared),
    `.unchecked` (ops CPU has no kernel for, by name: their results are copied to the shadows)
    and `.mismatches` (the messages)."""
    mode = _Shadows(action, tolerances or {})
    with mode:
        yield mode


_global: Any = None


def _from_env() -> None:
    """TORCHTPU_SHADOW=1 (raise) or =warn: the checker for the whole program."""
    global _global
    v = os.environ.get("TORCHTPU_SHADOW", "")
    if v in ("", "0") or _global is not None:
        return
    _global = shadow("warn" if v == "warn" else "raise")
    _global.__enter__()
    print("torchtpu: TORCHTPU_SHADOW is on: every tpu op is checked against CPU", file=sys.stderr)
