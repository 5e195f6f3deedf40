"""The "tpu" torch.compile backend (found by Dynamo through the torch_dynamo_backends entry point).

AOTAutograd turns Dynamo's graph into functional ATen graphs (forward, backward, inference).
Each graph is lowered by running it once through the eager kernels while the device *captures*:
every op is recorded, nothing is cut, so the graph goes through exactly the steps an eager op
takes (rule lookup, Meta shapes, reading inputs through views, lowering, writing results back)
and becomes one XLA program. Later calls run that program directly on their inputs: parameters
and buffers are program inputs, mutated inputs are written back, random ops draw from the
device generator as eager does, and the executable sits in the persistent cache like any other.

A graph that computes on the host (a CPU tensor op, a value read back in the middle) cannot be
one device program: it runs op by op through the eager kernels instead, with the same results.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from . import _C, _bounded

# Captures kept per graph (one per input layout: strides, storage offsets, aliasing).
_MAX_PROGRAMS = 8


class _Interpreter(torch.fx.Interpreter):
    """Runs a graph node by node; an error names the user's line the node came from."""

    def run_node(self, n: torch.fx.Node) -> Any:
        return self._noted(n, lambda: super(_Interpreter, self).run_node(n))

    @staticmethod
    def _noted(n: torch.fx.Node, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except Exception as e:
            trace = (n.meta.get("stack_trace") or "").strip()
            if trace and not getattr(e, "_tpu_noted", False):
                last = trace.splitlines()[-2:] if "File" in trace else [trace]
                e.add_note("(compiled graph, from user code)\n" + "\n".join(last))
                e._tpu_noted = True  # type: ignore[attr-defined]
            raise


class _BoundedInterpreter(_Interpreter):
    """Runs a graph on padded inputs inside a capture, with symbolic numbers it takes as values
    computed from the real sizes (see _bounded)."""

    def __init__(self, gm: torch.fx.GraphModule, plan: _bounded.Plan, sizes: list[Any]) -> None:
        super().__init__(gm)
        self.plan = plan
        self.sizes = dict(zip(plan.symbols, sizes))

    def run_node(self, n: torch.fx.Node) -> Any:
        if n in self.plan.value_args:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            positions = self.plan.value_args[n]
            return self._noted(
                n, lambda: _bounded.call_with_values(n, args, kwargs, positions, self.sizes)
            )
        out = super().run_node(n)
        if isinstance(n.target, torch._ops.OpOverload) and _bounded.reshapes(n):
            # XLA may take another dim of a reshape's result as the dynamic one (_bounded.remark)
            out = _bounded.remark(n.meta.get("val"), out, self.sizes)
        if n.op == "output":
            any_size = next(iter(self.sizes.values()))
            out = type(out)(_bounded.unmark_outputs(self.plan, list(out), any_size))
        return out


def _values(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        return [x for item in v for x in _values(item)]
    return [v]


def _is_symbolic(v: Any) -> bool:
    return isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _split_host(
    gm: torch.fx.GraphModule,
) -> tuple[torch.fx.GraphModule | None, torch.fx.GraphModule, list[tuple[str, int]]] | None:
    """Splits off the graph's host part: ops on CPU tensors computed from the graph's inputs and
    constants alone (an optimizer's step counts and bias corrections, a constant's copy). They run
    in Python on each call, and their values enter the device part as inputs.

    Returns (host graph or None, device graph, where each output comes from), or None when the
    graph cannot be one device program: a host op reads a device value, or sizes are symbolic.
    """
    where: dict[torch.fx.Node, str] = {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            where[node] = "input"
            continue
        if node.op != "call_function":
            continue
        vals = _values(node.meta.get("val"))
        if any(_is_symbolic(v) for v in vals):
            return None
        if node.target is torch.ops.aten._local_scalar_dense.default:
            return None
        devices = {v.device.type for v in vals if isinstance(v, torch.Tensor)}
        sources = {where[n] for n in node.all_input_nodes}
        if devices == {"tpu"} or (not devices and "device" in sources):
            where[node] = "device"
        elif "tpu" not in devices and "device" not in sources:
            where[node] = "host"
        else:
            return None  # mixes devices, or computes on the host from a device value
    host_nodes = [n for n in gm.graph.nodes if where.get(n) == "host"]
    if not host_nodes:
        return None, gm, []

    # The host values the device part or the outputs use.
    exported = [
        n for n in host_nodes if any(where.get(u) == "device" or u.op == "output" for u in n.users)
    ]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]

    host = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder" or n.op == "get_attr" or where.get(n) == "host":
            env[n] = host.node_copy(n, lambda x: env[x])
    host.output(tuple(env[n] for n in exported))

    dev = torch.fx.Graph()
    env = {}
    for n in placeholders:
        env[n] = dev.node_copy(n, lambda x: env[x])
    for k, n in enumerate(exported):
        env[n] = dev.placeholder(f"host_value_{k}")
        env[n].meta = dict(n.meta)
    for n in gm.graph.nodes:
        if n.op == "get_attr" or where.get(n) == "device":
            env[n] = dev.node_copy(n, lambda x: env[x])
    # Outputs come from the host part, or from the device part's outputs.
    output = next(n for n in gm.graph.nodes if n.op == "output")
    sources: list[tuple[str, int]] = []
    dev_outs = []
    for x in _values(output.args[0]):
        if isinstance(x, torch.fx.Node) and where.get(x) == "host":
            sources.append(("host", exported.index(x)))
        else:
            sources.append(("device", len(dev_outs)))
            dev_outs.append(env[x] if isinstance(x, torch.fx.Node) else x)
    dev.output(tuple(dev_outs))
    return torch.fx.GraphModule(gm, host), torch.fx.GraphModule(gm, dev), sources


def _hinted(example_inputs: Sequence[Any]) -> bool:
    """Whether an input has a dim of a size marked dynamic (torchtpu.mark_dynamic) that Dynamo
    traced as static: a prefill whose marked prompt reached the graph through a slice. Such a
    graph runs op by op in fused mode, whose programs are bounded in that size, instead of being
    captured for this one size, until a call finds no such dim (the mark is gone). A weight's dim
    equal to the marked size counts too."""
    hints = set(_C._size_hints())
    return bool(hints) and any(
        type(d) is int and d in hints
        for x in example_inputs
        if isinstance(x, torch.Tensor)
        for d in x.shape
    )


def _symbolic(example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo traced a size as symbolic: the graph serves more than one shape."""
    return any(
        isinstance(x, torch.SymInt)
        or (isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in x.shape))
        for x in example_inputs
    )


def _shape_key(inputs: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs)


def _graph_device(example_inputs: Sequence[Any]) -> int | None:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return x.device.index or 0
    return None


class CompiledGraph:
    """One AOTAutograd graph on tpu: captured into one program per input layout, then replayed."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
        # AOTAutograd passes the inputs as one list, which we may release early. An instance
        # attribute, so that Dynamo's wrapper around the backward (functools.wraps) carries it.
        self._boxed_call = True
        self.gm = gm
        self.device = _graph_device(example_inputs)
        # Symbolic sizes: one program per bound (see _bounded).
        self.bounded = _bounded.plan(gm) if self.device is not None else None
        # A static graph that takes a marked size runs op by op while the mark lives (_hinted).
        self.hinted = self.device is not None and self.bounded is None and _hinted(example_inputs)
        self._split(self.device is not None and self.bounded is None and not self.hinted)
        # A symbolic graph the bounded plan refuses is captured per shape, until a second shape
        # shows the sizes do vary: then it runs op by op in fused mode, whose bounded programs
        # serve every later size (a Linear on [batch, length, hidden], batch > 1).
        self.shapes: set[tuple[Any, ...]] | None = (
            set()
            if self.bounded is None and self.replayable and _symbolic(example_inputs)
            else None
        )
        self.programs: list[Any] = []
        self.bounded_programs: dict[tuple[int, ...], list[Any]] = {}
        self.captures = 0
        self.replays = 0

    def _split(self, capture: bool) -> None:
        split = _split_host(self.gm) if capture else None
        self.replayable = split is not None
        self.host, self.dev, self.sources = split if split is not None else (None, self.gm, [])

    def __call__(self, *args: Any) -> Any:
        # Boxed (one list, which we may release early) or, behind Dynamo's wrappers, unboxed.
        if len(args) == 1 and isinstance(args[0], list):
            inputs = list(args[0])
            args[0].clear()
        else:
            inputs = list(args)
        if self.hinted and not _hinted(inputs):
            self.hinted = False
            self._split(True)
        if self.bounded is not None:
            return self._run_bounded(self.bounded, inputs)
        if self.shapes is not None and self.replayable:
            self.shapes.add(_shape_key(inputs))
            if len(self.shapes) > 1 and _C.get_mode() == "fused" and _C._bounded():
                self.replayable = False
                self.programs.clear()
        if not self.replayable:
            return _Interpreter(self.gm).run(*inputs)
        host = list(self.host(*inputs)) if self.host is not None else []
        outs = self._run_device(inputs + host)
        if not self.sources:
            return outs
        return [host[i] if where == "host" else outs[i] for where, i in self.sources]

    def _run_device(self, inputs: list[Any]) -> Any:
        outs = self._replay_or_capture(
            self.programs, inputs, lambda: _Interpreter(self.dev).run(*inputs)
        )
        return _Interpreter(self.dev).run(*inputs) if outs is None else outs

    def _run_bounded(self, plan: _bounded.Plan, inputs: list[Any]) -> Any:
        vals = _bounded.values(plan, inputs)
        bounds = _bounded.bounds(plan, vals)
        key = tuple(bounds[s] for s in plan.symbols)
        if key not in self.bounded_programs:
            # A program captured for up to twice these bounds serves them: padding to twice the
            # size costs far less than one more capture and compile.
            wider = [
                k
                for k, progs in self.bounded_programs.items()
                if progs and all(b <= w <= 2 * b for b, w in zip(key, k))
            ]
            if wider:
                key = min(wider)
                bounds = dict(zip(plan.symbols, key))
        programs = self.bounded_programs.setdefault(key, [])
        padded = _bounded.pad_inputs(plan, inputs, bounds)
        sizes = _bounded.size_tensors(plan, vals, torch.device("tpu", self.device))
        outs = self._replay_or_capture(
            programs,
            padded + sizes,
            lambda: _BoundedInterpreter(self.dev, plan, sizes).run(
                *_bounded.mark(plan, padded, sizes)
            ),
        )
        if outs is None:
            return _Interpreter(self.gm).run(*inputs)
        return _bounded.narrow_outputs(plan, list(outs), vals)

    def _replay_or_capture(
        self, programs: list[Any], inputs: list[Any], run_graph: Callable[[], Any]
    ) -> Any:
        """Runs the program captured for these inputs' layout, capturing it first if there is
        none yet: the graph's outputs, or None past the limit of captures (the caller runs the
        graph op by op). `run_graph` runs the graph inside a capture."""
        for prog in programs:
            out = prog.run(inputs)
            if out is not None:
                self.replays += 1
                return out
        if len(programs) >= _MAX_PROGRAMS:
            return None
        _C._begin_graph_capture(self.device, inputs)
        try:
            outs = run_graph()
        except BaseException:
            _C._abort_graph_capture()
            raise
        prog = _C._end_graph_capture(_values(outs))
        self.captures += 1
        if prog is None:
            # It read a value back, or computed on the host: op by op from now on.
            programs.clear()
            self.replayable = False
            self.bounded = None
        else:
            programs.insert(0, prog)
        return outs


# The graphs compiled in this process, oldest first; weak, so that Dynamo's caches decide how
# long a graph lives.
_compiled: list[weakref.ref[CompiledGraph]] = []


def compiled_graphs() -> list[CompiledGraph]:
    """The compiled graphs still alive, oldest first: each has `captures` and `replays` counts."""
    alive = [g for r in _compiled if (g := r()) is not None]
    _compiled[:] = [weakref.ref(g) for g in alive]
    return alive


def _compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> CompiledGraph:
    g = CompiledGraph(gm, example_inputs)
    _compiled.append(weakref.ref(g))
    return g


@functools.cache
def _decompositions() -> dict[Any, Callable[..., Any]]:
    """Core ATen decompositions, for the ops with neither a lowering rule nor a tpu kernel."""
    from torch._decomp import core_aten_decompositions

    table = {}
    for op, fn in core_aten_decompositions().items():
        if not isinstance(op, torch._ops.OpOverload):
            continue
        name = op._schema.name
        overload = op._schema.overload_name
        if _C._has_rule(name, overload):
            continue
        if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1"):
            continue
        table[op] = fn
    return table


def tpu_backend(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """The Dynamo backend: each AOTAutograd graph becomes one program (see the module doc).

    `mode` and `options` are accepted for torch.compile's sake; every mode compiles the same way.
    """
    from torch._dynamo.backends.common import aot_autograd

    backend = aot_autograd(
        fw_compiler=_compile,
        bw_compiler=_compile,
        inference_compiler=_compile,
        decompositions=_decompositions(),
        keep_inference_input_mutations=True,
    )
    return backend(gm, example_inputs)
