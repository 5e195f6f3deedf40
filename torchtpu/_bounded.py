"""Bounded dynamic shapes for compiled graphs: one program for every size within a bound.

A graph Dynamo traced with symbolic sizes (`torch._dynamo.mark_dynamic(t, dim, min=, max=)`,
or `torch.compile(..., dynamic=True)`) is captured once per *bound*: each dynamic input is padded
to the bound along its dynamic dims, and inside the program `torchtpu::set_dimension_size` marks
how many entries are real (a 0-d size tensor, a program input). XLA's dynamic padder then makes
reductions, matmuls, softmax and the rest count only the real entries. Outputs come back padded
and are narrowed to the sizes the graph's symbolic shapes give for this call.

A symbol's bound is its `max=` when it has one, else the next power of two (at least 16), so a
loop over lengths compiles once per power of two (a capture for up to twice a bound serves it:
torchtpu/_dynamo.py). XLA packs a dynamic dim's real entries first whenever a value is reshaped,
so a graph is handled here only when no reshape would move them: each view either keeps every
dynamic dim outermost in memory or regroups only static dims around dynamic dims it keeps whole,
and results are set back to their padded extent before they are stored (unmark_outputs). Other
graphs, and those whose results would depend on where the padding sits (a size that is
not a product of symbols and integers, as a `cat` along a dynamic dim gives; flips, sorts,
negative or symbolic indices along a dynamic dim; in-place writes to a dynamic input) are
captured at their first shape; from their second (in fused mode) they run op by op, and fused
mode's bounded programs (csrc/eager/bounded.h) serve the sizes after.

Random ops draw for the padded shape, so a bounded graph's dropout masks differ from eager's for
the same seed (with the same distribution).
"""

from __future__ import annotations

import collections
import functools
import operator
import os
import sys
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

_MIN_BOUND = 16

# Ops whose results depend on where the padding sits, when they see a dynamic size.
_POSITIONAL = {
    "flip",
    "roll",
    "sort",
    "argsort",
    "msort",
    "topk",
    "kthvalue",
    "median",
    "mode",
    "unique",
    "searchsorted",
    "as_strided",
    "unfold",
    "index_put",
    "index_put_",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "_unsafe_index_put",
    "index_copy",
    "index_fill",
    "diagonal",
    "tril",
    "triu",
    "cumsum",
    "cumprod",
    "logcumsumexp",
    "cummax",
    "cummin",
    "constant_pad_nd",
    "reflection_pad1d",
    "reflection_pad2d",
    "replication_pad1d",
    "replication_pad2d",
    "nonzero",
    "masked_select",
}


# Ops that read a value back to the host mid-graph: the ops after them would run in another
# program, where the padded dims are no longer marked.
_FLUSHES = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::item"}


def _expr(v: Any) -> sympy.Expr | None:
    """The sympy expression of a size (None for a plain int)."""
    return v.node.expr if isinstance(v, torch.SymInt) else None


def _monomial(e: sympy.Expr) -> bool:
    """An integer times a product of symbols: the padded size is a bound of the same form."""
    if e.is_Integer or e.is_Symbol:
        return True
    if e.is_Mul:
        return all(a.is_Integer or a.is_Symbol for a in e.args)
    return False


def _packs_in_place(v: Any) -> bool:
    """Whether XLA's packing of a dynamic size leaves the padded layout as it is.

    Storages are flat: a value is reshaped to 1-D and back whenever it is stored or viewed, and a
    reshape packs a dynamic dim's real entries first. That is the padded layout itself only when
    the dynamic dim is the outermost dim in memory that is not 1 (one dynamic dim per tensor)."""
    if not isinstance(v, torch.Tensor):
        return True
    dyn = [d for d, n in enumerate(v.shape) if isinstance(n, torch.SymInt)]
    if not dyn:
        return True
    if len(dyn) > 1:
        return False
    big = 1 << 20  # any large size orders the strides as every real size would

    def value(x: Any) -> int:
        return (
            int(_expr(x).subs({f: big for f in _expr(x).free_symbols}))
            if isinstance(x, torch.SymInt)
            else int(x)
        )

    strides = [value(st) for st in v.stride()]
    d = dyn[0]
    if strides[d] == 0:
        return True  # broadcast along the dynamic dim: nothing of it is stored
    return all(int(v.shape[k]) == 1 for k in range(v.dim()) if k != d and strides[k] > strides[d])


# Views that only reorder, insert or drop dims of size 1, or cut a prefix: a strided view of the
# padded value (or of XLA's, which keeps each dim's padding) means the same entries.
_STRIDED_VIEWS = {
    "permute", "transpose", "t", "expand", "unsqueeze", "squeeze", "slice", "select", "narrow",
    "alias", "detach", "split", "split_with_sizes", "unbind", "chunk", "movedim", "swapaxes",
    "numpy_T", "mT", "adjoint",
}  # fmt: skip


def _name(n: torch.fx.Node) -> str:
    return n.target._schema.name.split("::")[-1]


def _is_view(n: torch.fx.Node) -> bool:
    schema = n.target._schema
    return not schema.is_mutable and any(r.alias_info is not None for r in schema.returns)


def reshapes(n: torch.fx.Node) -> bool:
    """Whether n is a view that regroups dims (view, reshape, as_strided, ...): XLA packs a
    dynamic dim's real entries first when it reshapes, which moves them unless that dim is the
    outermost in memory."""
    return _is_view(n) and _name(n) not in _STRIDED_VIEWS


# Ops whose lowering rules keep each dim where it is (no reshape across a dynamic dim), tested
# against CPU with a dynamic dim that is not outermost in memory (tests/test_bounded.py). Others
# may flatten it inside their rule (embedding's gather flattens its indices), which XLA packs.
_KEEPS_INNER_DIMS = {
    "sum", "mean", "amax", "amin", "all", "any", "var", "std", "var_mean", "logsumexp",
    "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "bmm", "mm", "native_layer_norm", "native_layer_norm_backward", "clone", "_to_copy",
    "full_like", "zeros_like", "ones_like", "empty_like",
}  # fmt: skip


def _keeps_inner_dims(n: torch.fx.Node) -> bool:
    """Whether n keeps a dynamic dim that is not outermost in memory where it is: a strided
    view, a view that regroups only static dims around it, an elementwise op or one above."""
    if _is_view(n):
        return not reshapes(n) or _keeps_dynamic_dim(n)
    return torch.Tag.pointwise in n.target.tags or _name(n) in _KEEPS_INNER_DIMS


def _keeps_dynamic_dim(n: torch.fx.Node) -> bool:
    """Whether a reshape leaves XLA nothing to pack: its operand and result are laid out as
    their padded extents would be, or it regroups only static dims between dynamic dims that it
    keeps whole and in order ([b, s, h] to [b, s, heads, h / heads], [b * heads, s, t] to
    [b, heads, s, t])."""
    x, y = n.args[0].meta.get("val"), n.meta.get("val")
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        return False
    if _packs_in_place(x) and _packs_in_place(y):
        return True
    if _sizes(x.shape) == _sizes(y.shape) and _sizes(x.stride()) == _sizes(y.stride()):
        return True  # the same view again
    if not (x.is_contiguous() and y.is_contiguous()):
        return False

    def runs(v: torch.Tensor) -> tuple[list[sympy.Expr], list[int]]:
        """The dynamic dims' sizes in order, and the products of the static runs around them."""
        dyn, static, run = [], [], 1
        for sz in v.shape:
            if (e := _expr(sz)) is None:
                run *= int(sz)
            else:
                dyn.append(e)
                static.append(run)
                run = 1
        return dyn, static + [run]

    return runs(x) == runs(y)


def _sizes(sizes: Any) -> list[Any]:
    """Sizes or strides as expressions and ints, compared without guarding on a symbol."""
    return [_expr(n) if isinstance(n, torch.SymInt) else int(n) for n in sizes]


def _tensor_exprs(v: Any) -> list[sympy.Expr]:
    if not isinstance(v, torch.Tensor):
        return []
    return [e for s in v.shape if (e := _expr(s)) is not None]


@dataclass
class Plan:
    """Where a graph's symbols come from and what its outputs' sizes are."""

    symbols: list[sympy.Symbol]
    # Where each symbol's value is read: (input, dim or None for a SymInt, the integer the
    # symbol is multiplied by there).
    sources: dict[sympy.Symbol, tuple[int, int | None, int]]
    # Per input: its dynamic dims, each as (symbol, integer factor): 17*s for [17*s, h].
    inputs: list[dict[int, tuple[sympy.Symbol, int]]]
    ints: dict[int, tuple[sympy.Symbol, int]]  # the SymInt inputs, as (symbol, factor)
    ranges: dict[sympy.Symbol, int | None]  # each symbol's max, when it has one
    outputs: list[Any]  # per output: its fake value (sizes as SymInts)
    # Ops that take a symbolic size as a value (mean's backward divides by it): the argument
    # positions (index or keyword) that get a 0-d tensor computed from the real sizes.
    value_args: dict[torch.fx.Node, list[int | str]]


def _refused(n: torch.fx.Node, why: str) -> None:
    """No plan: TORCHTPU_FUSED_DEBUG=1 prints the node that refused it and why."""
    if os.environ.get("TORCHTPU_FUSED_DEBUG"):
        where = (n.meta.get("stack_trace") or "").strip().splitlines()[-1:]
        print(
            f"torchtpu: a compiled graph runs per shape, not bounded: {n.format_node()}: {why}"
            + (f" ({where[0].strip()})" if where else ""),
            file=sys.stderr,
        )


def plan(gm: torch.fx.GraphModule) -> Plan | None:
    """A plan when the graph has symbolic sizes and padding cannot change its results."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    symbols: list[sympy.Symbol] = []
    value_args: dict[torch.fx.Node, list[int | str]] = {}
    sources: dict[sympy.Symbol, tuple[int, int | None, int]] = {}
    inputs: list[dict[int, tuple[sympy.Symbol, int]]] = []
    ints: dict[int, tuple[sympy.Symbol, int]] = {}
    for k, n in enumerate(placeholders):
        v = n.meta.get("val")
        dims: dict[int, tuple[sympy.Symbol, int]] = {}
        found = [(None, _expr(v))] if isinstance(v, torch.SymInt) else []
        if isinstance(v, torch.Tensor):
            found = [(d, e) for d, sz in enumerate(v.shape) if (e := _expr(sz)) is not None]
            if found and v.device.type != "tpu":
                return _refused(n, "a host input of a symbolic size")
        for d, e in found:
            # A backward graph takes [17*s, h] activations where the forward viewed [s, 17, h]:
            # an integer times one symbol, read back by dividing.
            factor, sym = e.as_coeff_Mul()
            if not sym.is_Symbol or not factor.is_Integer or factor < 1:
                return _refused(n, f"an input of size {e}, not a symbol times an integer")
            if d is not None:
                dims[d] = (sym, int(factor))
            else:
                ints[k] = (sym, int(factor))
            if sym not in sources or sources[sym][2] != 1:
                sources[sym] = (k, d, int(factor))  # a plain symbol where there is one
            if sym not in symbols:
                symbols.append(sym)
        inputs.append(dims)
    if not symbols:
        return None
    for n in gm.graph.nodes:
        vals = n.meta.get("val")
        vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        if not all(_monomial(e) for v in vals for e in _tensor_exprs(v)):
            return _refused(n, "a size that is not a product of symbols and integers")
        if any(isinstance(v, torch.Tensor) and v.device.type != "tpu" for v in vals):
            return _refused(n, "a host part: not one device program")
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        inner = vals + [a.meta.get("val") for a in n.all_input_nodes]
        if not all(_packs_in_place(v) for v in inner) and not _keeps_inner_dims(n):
            return _refused(n, "an op that may reshape a dynamic dim not outermost in memory")
        if n.target._schema.name in _FLUSHES or n.target.namespace == "_c10d_functional":
            # The rest of the graph would run apart from its set_dimension_size.
            return _refused(n, "a value read back, or a collective")
        as_values = _value_positions(n)
        if as_values is None:
            return _refused(n, "a symbolic number the device cannot compute")
        if as_values:
            value_args[n] = as_values
        ins = [a.meta.get("val") for a in n.all_input_nodes]
        dynamic_in = [a for a in ins if _tensor_exprs(a)]
        if not dynamic_in:
            continue
        name = _name(n)
        if name in _POSITIONAL:
            return _refused(n, "its result depends on where the padding sits")
        if name in ("select", "slice", "narrow") and not _prefix_index(n):
            return _refused(n, "an index that is not counted from the start")
        if n.target._schema.is_mutable:
            # Writing into a padded copy would not reach the caller's tensor.
            return _refused(n, "an in-place write to a dynamic input")
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in output.args[0]]
    shape_env = _shape_env(gm)
    ranges = {}
    for s in symbols:
        r = shape_env.var_to_range.get(s) if shape_env is not None else None
        ranges[s] = _finite(r.upper) if r is not None else None
    return Plan(symbols, sources, inputs, ints, ranges, outs, value_args)


_SIZE_TYPES = ("int", "SymInt", "List[int]", "List[SymInt]", "Optional[int]", "Optional[SymInt]")


def _value_positions(n: torch.fx.Node) -> list[int | str] | None:
    """Where an op takes a symbolic number as a value rather than as a size; None when such a
    value cannot be computed on the device."""
    out: list[int | str] = []
    for i, a in enumerate(n.target._schema.arguments):
        where: int | str = a.name if a.kwarg_only or i >= len(n.args) else i
        v = n.kwargs.get(a.name) if isinstance(where, str) else n.args[i]
        if not isinstance(v, torch.fx.Node):
            continue
        val = v.meta.get("val")
        if not isinstance(val, (torch.SymInt, torch.SymFloat)) or str(a.type) in _SIZE_TYPES:
            continue
        if str(a.type) not in (
            "Scalar",
            "number",
            "Tensor",
            "float",
            "Optional[Scalar]",
            "Optional[number]",
            "Optional[float]",
        ):
            return None
        if not _evaluable(val.node.expr):
            return None
        out.append(where)
    return out


# torch's sympy functions for size arithmetic, by name: how to compute each on tensors.
_FUNCTIONS = {
    "FloatTrueDiv": lambda a, b: a / b,
    "IntTrueDiv": lambda a, b: a / b,
    "FloorDiv": lambda a, b: a // b,
    "ToFloat": lambda a: (
        a.to(torch.get_default_dtype()) if isinstance(a, torch.Tensor) else float(a)
    ),
}


def _evaluable(e: sympy.Expr) -> bool:
    if e.is_Symbol or e.is_Number:
        return True
    if e.is_Add or e.is_Mul or type(e).__name__ in _FUNCTIONS:
        return all(_evaluable(a) for a in e.args)
    if e.is_Pow:
        return _evaluable(e.args[0]) and e.args[1].is_Number
    return False


def value_tensor(e: sympy.Expr, sizes: dict[sympy.Symbol, torch.Tensor]) -> Any:
    """A symbolic number's value in this call, computed on the device from the size tensors."""
    if e.is_Symbol:
        return sizes[e].to(torch.int64)
    if e.is_Integer:
        return int(e)
    if e.is_Number:
        return float(e)
    parts = [value_tensor(a, sizes) for a in e.args]
    if type(e).__name__ in _FUNCTIONS:
        return _FUNCTIONS[type(e).__name__](*parts)
    if e.is_Add:
        return functools.reduce(operator.add, parts)
    if e.is_Mul:
        return functools.reduce(operator.mul, parts)
    base, exp = parts
    if isinstance(base, torch.Tensor) and exp < 0:
        base = base.to(torch.get_default_dtype())
    return base**exp


def call_with_values(
    n: torch.fx.Node, args: tuple, kwargs: dict, positions: list[int | str], sizes: dict
) -> Any:
    """Runs n's op with its symbolic value arguments as 0-d tensors of the real values (the
    op's Tensor overload where it was called with a Scalar)."""
    args, kwargs = list(args), dict(kwargs)
    for p in positions:
        source = n.args[p] if isinstance(p, int) else n.kwargs[p]
        v = value_tensor(source.meta["val"].node.expr, sizes)
        if isinstance(p, int):
            args[p] = v
        else:
            kwargs[p] = v
    op = n.target
    name = op._overloadname
    if "Scalar" in name:
        op = getattr(op.overloadpacket, name.replace("Scalar", "Tensor"), op)
    return op(*args, **kwargs)


def _finite(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None  # int_oo: no bound


def _prefix_index(n: torch.fx.Node) -> bool:
    """select/slice/narrow along a dynamic dim with non-negative integer positions only (a
    negative or symbolic position would count from the padded end)."""
    x = n.args[0].meta.get("val")
    dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)
    if not isinstance(dim, int):
        return False
    if _expr(x.shape[dim]) is None:
        return True
    positions = list(n.args[2:]) + [
        v for k, v in n.kwargs.items() if k in ("index", "start", "end", "length")
    ]
    for p in positions:
        if p is None:
            continue
        if isinstance(p, torch.fx.Node):
            p = p.meta.get("val")
        if isinstance(p, torch.SymInt):
            # Only the whole extent, x[:, :n] with n the dim's own size.
            if _expr(p) != _expr(x.shape[dim]):
                return False
        elif not isinstance(p, int) or p < 0:
            return False
    return True


def _shape_env(gm: torch.fx.GraphModule) -> Any:
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor) and hasattr(v, "fake_mode"):
            return v.fake_mode.shape_env
        if isinstance(v, torch.SymInt):
            return v.node.shape_env
    return None


def values(p: Plan, inputs: list[Any]) -> dict[sympy.Symbol, int]:
    """The symbols' values in this call."""
    out = {}
    for s in p.symbols:
        k, d, factor = p.sources[s]
        out[s] = (int(inputs[k]) if d is None else int(inputs[k].shape[d])) // factor
    return out


def bounds(p: Plan, vals: dict[sympy.Symbol, int]) -> dict[sympy.Symbol, int]:
    """The padded size of each symbol: its max, else the next power of two."""
    out = {}
    for s, v in vals.items():
        hi = p.ranges[s]
        if hi is not None and v <= hi:
            out[s] = hi
        else:
            out[s] = max(_MIN_BOUND, 1 << max(v - 1, 0).bit_length())
    return out


def _eval(e: Any, env: dict[sympy.Symbol, int]) -> int:
    if isinstance(e, torch.SymInt):
        return int(_expr(e).xreplace(env))
    return int(e)


def pad_inputs(p: Plan, inputs: list[Any], bnd: dict[sympy.Symbol, int]) -> list[Any]:
    """The call's inputs with dynamic dims padded to their bounds and SymInts set to the bounds.

    A tensor whose storage already holds its padded extent (an output of an earlier call, which
    is a narrowed view of a padded buffer) is widened in place; another goes through the host.
    """
    out = list(inputs)
    for k, (s, factor) in p.ints.items():
        out[k] = bnd[s] * factor
    for k, dims in enumerate(p.inputs):
        if dims:
            x = inputs[k]
            sizes = [
                bnd[dims[d][0]] * dims[d][1] if d in dims else n for d, n in enumerate(x.shape)
            ]
            out[k] = _widen(x, sizes)
    return out


# Host-padded copies of recent inputs, for the next graph of the same step (the backward takes
# the forward's inputs again, as other tensor objects over the same storage). Keyed by the
# storage, the view and the version counter, so a write to the input misses. Each entry holds a
# weak reference to its storage: a storage freed since is a miss, and the reference keeps the
# storage's address from being reused (data pointers are: a new batch allocated where the last
# one was, with its shape, was given the last batch's padded copy).
_padded: collections.OrderedDict[tuple, tuple[StorageWeakRef, torch.Tensor]] = (
    collections.OrderedDict()
)
_PADDED_KEPT = 8


def _widen(x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    strides = list(x.stride())
    if _fits(x, sizes, strides):
        return x.as_strided(sizes, strides, x.storage_offset())
    storage = x.untyped_storage()
    key = (storage._cdata, x.storage_offset(), x.dtype, tuple(x.shape), tuple(strides), x._version,
           tuple(sizes))  # fmt: skip
    entry = _padded.get(key)
    if entry is not None and not entry[0].expired():
        _padded.move_to_end(key)
        return entry[1]
    host = x.detach().cpu()
    padded = host.new_zeros(sizes)
    padded[tuple(slice(0, n) for n in host.shape)] = host
    padded = padded.to(x.device)
    _padded[key] = (StorageWeakRef(storage), padded)
    _padded.move_to_end(key)
    if len(_padded) > _PADDED_KEPT:
        _padded.popitem(last=False)
    return padded


def _fits(x: torch.Tensor, sizes: list[int], strides: list[int]) -> bool:
    """Whether x's storage holds the padded extent, without overlap, from x's own offset."""
    if any(st <= 0 for st, n in zip(strides, sizes) if n > 1):
        return False
    span = 1
    for d in sorted(range(len(sizes)), key=lambda d: strides[d]):
        if sizes[d] > 1 and strides[d] < span:
            return False
        span = max(span, strides[d] * sizes[d])
    last = x.storage_offset() + sum((n - 1) * st for n, st in zip(sizes, strides))
    return last < x.untyped_storage().nbytes() // x.element_size()


def size_tensors(p: Plan, vals: dict, device: torch.device) -> list[torch.Tensor]:
    return [torch.tensor(vals[s], dtype=torch.int32).to(device) for s in p.symbols]


def _set_sizes(t: torch.Tensor, sizes: dict[int, torch.Tensor]) -> torch.Tensor:
    """Inside a capture: t with the size of each dim d set to the 0-d int32 sizes[d]."""
    for d, size in sizes.items():
        t = torch.ops.torchtpu.set_dimension_size(t, d, size)
    return t


def mark(p: Plan, padded: list[Any], sizes: list[torch.Tensor]) -> list[Any]:
    """Inside a capture: the padded inputs marked with their real sizes."""
    out = list(padded)
    index = {s: i for i, s in enumerate(p.symbols)}
    for k, dims in enumerate(p.inputs):
        real = {d: sizes[index[s]] * f if f != 1 else sizes[index[s]] for d, (s, f) in dims.items()}
        out[k] = _set_sizes(out[k], real)
    return out


def narrow_outputs(p: Plan, outs: list[Any], vals: dict) -> list[Any]:
    """The padded outputs cut to this call's sizes (views of the padded buffers)."""
    res = list(outs)
    for i, fake in enumerate(p.outputs):
        if isinstance(fake, torch.SymInt):
            res[i] = _eval(fake, vals)
        elif isinstance(fake, torch.Tensor) and isinstance(res[i], torch.Tensor):
            t = res[i]
            for d, s in enumerate(fake.shape):
                if isinstance(s, torch.SymInt):
                    t = t.narrow(d, 0, _eval(s, vals))
            res[i] = t
    return res


def remark(fake: Any, t: Any, sizes: dict[sympy.Symbol, torch.Tensor]) -> Any:
    """Inside a capture: a reshaped value's sizes set again, every dim. XLA infers which dim of
    a reshape's result is dynamic, and when a dynamic dim is split ([17*s, h] to [s, 17, h])
    it can pick another than the one that is: sums came out right (the padded rows were zeros)
    and means divided by a wrong count."""
    if not isinstance(fake, torch.Tensor) or not isinstance(t, torch.Tensor):
        return t
    exprs = {d: e for d, n in enumerate(fake.shape) if (e := _expr(n)) is not None}
    return _set_sizes(t, {d: value_tensor(e, sizes).to(torch.int32) for d, e in exprs.items()})


def unmark_outputs(p: Plan, outs: list[Any], size: torch.Tensor) -> list[Any]:
    """Inside a capture: each output's dynamic dims set back to their padded extent. A program
    stores its results flat, and XLA packs a dynamic dim's real entries first when it reshapes:
    at the full extent there is nothing to pack, so every result keeps the padded layout that
    narrow_outputs cuts (also where the dynamic dim is not outermost in memory). `size` is
    any of the capture's size tensors (for its type and device)."""
    res = list(outs)
    for i, fake in enumerate(p.outputs):
        if isinstance(fake, torch.Tensor) and isinstance(res[i], torch.Tensor):
            dims = [d for d, n in enumerate(fake.shape) if isinstance(n, torch.SymInt)]
            full = {d: torch.full_like(size, res[i].shape[d]) for d in dims if res[i].shape[d] > 1}
            res[i] = _set_sizes(res[i], full)
    return res
