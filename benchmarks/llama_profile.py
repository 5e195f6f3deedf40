"""Where a fused-mode Llama training step goes, beside PyTorch CPU eager, as one table.

The model and step are benchmarks/llama_train.py's (forward, backward, AdamW, `loss.item()`).
Rows, in milliseconds per step:
- host, recording: wall time of each phase minus the fused flushes inside it (what Python,
  autograd and our dispatch spend recording ops);
- host, flushing: time inside fused flushes (cutting the trace, keys, cache lookups, donation,
  launching), with the part spent inside PJRT's Execute calls and compiling shown below it;
- waiting at `loss.item()`: the host blocked on the device;
- device: the sum over programs of the time from when each could start (launched, and the one
  before it done) to when its outputs were ready, then each program's share; idle is the step's
  wall time the device had nothing to run;
- dot kernels: the step's matmuls (every mm/addmm/bmm/baddbmm PyTorch runs in the CPU step, by
  shape), timed in isolation: XLA:CPU as 16 independent dots in one program, PyTorch as 16 calls;
  their floating-point operations per step and the rate each side reaches, which shows how close
  the dots are to what the cores can do (the floor under any step time).

python benchmarks/llama_profile.py [--steps N] [--shapes 16x40 8x128]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import torch
from llama_train import setup, timed_rounds, train_step
from torch.utils._python_dispatch import TorchDispatchMode

import torchtpu

DOTS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten.baddbmm.default,
}


class DotShapes(TorchDispatchMode):
    """Counts the dot ops a step runs, by op and argument shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Counter[tuple] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in DOTS:
            shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
            self.seen[(func, shapes)] += 1
        return func(*args, **(kwargs or {}))


def fused_step_profile(batch: int, seq: int, steps: int) -> dict[str, object]:
    torchtpu.set_mode("fused")
    model, opt, data = setup(torchtpu.get_device(), batch, seq)
    state: dict[str, torch.Tensor] = {}

    def forward() -> None:
        state["loss"] = model(**data).loss

    def backward() -> None:
        opt.zero_grad(set_to_none=True)
        state["loss"].backward()

    def optimizer() -> None:
        opt.step()

    def read() -> None:
        state["loss"].item()

    phases: list[tuple[str, Callable[[], None]]] = [
        ("forward", forward),
        ("backward", backward),
        ("optimizer", optimizer),
        ("read", read),
    ]
    # Warm up until two steps in a row compile nothing (fused mode finds the loop's cut points
    # over the first steps).
    quiet = 0
    for _ in range(20):
        before = torchtpu.metrics()["compiles"]
        for _, fn in phases:
            fn()
        quiet = quiet + 1 if torchtpu.metrics()["compiles"] == before else 0
        if quiet == 2:
            break
    torch.tpu.synchronize()
    torchtpu._C._set_profiling(True)
    torchtpu._C._take_program_runs()
    recording: dict[str, float] = defaultdict(float)
    flushing: dict[str, float] = defaultdict(float)
    start_m = torchtpu.metrics()
    start = time.perf_counter()
    for _ in range(steps):
        for name, fn in phases:
            f0 = torchtpu.metrics()["flush_seconds"]
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            flushed = torchtpu.metrics()["flush_seconds"] - f0
            recording[name] += t1 - t0 - flushed
            flushing[name] += flushed
    torch.tpu.synchronize()
    wall = time.perf_counter() - start
    end_m = torchtpu.metrics()
    torchtpu._C._set_profiling(False)
    runs = torchtpu._C._take_program_runs()

    busy: dict[int, float] = defaultdict(float)
    ops: dict[int, int] = {}
    launches: Counter[int] = Counter()
    free_at = 0.0  # steady-clock seconds: the first run starts at its launch
    for program, n_ops, launch, _queued, ready in sorted(runs, key=lambda r: r[2]):
        began = max(launch, free_at)
        busy[program] += max(ready - began, 0.0)
        free_at = max(free_at, ready)
        ops[program] = n_ops
        launches[program] += 1
    delta = {
        k: end_m[k] - start_m[k]
        for k in (
            "flush_seconds",
            "execute_seconds",
            "compile_seconds",
            "recorded_ops",
            "executions",
        )
    }
    return {
        "wall": wall,
        "steps": steps,
        "recording": recording,
        "flushing": flushing,
        "busy": busy,
        "ops": ops,
        "launches": launches,
        "delta": delta,
    }


def seconds_per_dot(func: object, arg_shapes: tuple, device: torch.device, reps: int = 16) -> float:
    """One dot's time: `reps` independent calls (on tpu, one fused program), median of 5."""
    args = [[torch.randn(s).to(device) for s in arg_shapes] for _ in range(reps)]
    sync = torch.tpu.synchronize if device.type == "tpu" else (lambda: None)
    samples = []
    for i in range(6):
        t0 = time.perf_counter()
        kept = [func(*a) for a in args]
        sync()
        if i:  # the first call compiles
            samples.append((time.perf_counter() - t0) / reps)
        del kept
    return statistics.median(samples)


def dot_flops(arg_shapes: tuple) -> int:
    """Floating-point operations of one mm/addmm/bmm/baddbmm: 2 per multiply-add. The last two
    shapes are the factors ([..., m, k] and [..., k, n]); a bias comes first."""
    *_, a, b = arg_shapes
    return 2 * math.prod(a) * b[-1]


def dot_times(batch: int, seq: int) -> tuple[float, float, int, int]:
    """Seconds per step of the step's dots (XLA:CPU and PyTorch CPU, each op timed alone), their
    number and their floating-point operations."""
    step = train_step(torch.device("cpu"), batch, seq)
    step()
    with DotShapes() as shapes:
        step()
    torchtpu.set_mode("fused")
    tpu, cpu = torchtpu.get_device(), torch.device("cpu")
    ours = sum(n * seconds_per_dot(f, s, tpu) for (f, s), n in shapes.seen.items())
    theirs = sum(n * seconds_per_dot(f, s, cpu) for (f, s), n in shapes.seen.items())
    flops = sum(n * dot_flops(s) for (_, s), n in shapes.seen.items())
    return ours, theirs, sum(shapes.seen.values()), flops


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--shapes", nargs="+", default=["16x40", "8x128"])
    args = p.parse_args()
    configs = [tuple(int(x) for x in s.split("x")) for s in args.shapes]
    cols, programs = [], []
    for batch, seq in configs:
        prof = fused_step_profile(batch, seq, args.steps)
        ours, theirs, n_dots, flops = dot_times(batch, seq)
        cpu = torch.device("cpu")
        cpu_step = statistics.median(timed_rounds(train_step(cpu, batch, seq), cpu, args.steps, 3))
        n = prof["steps"]
        rec, fl, d = prof["recording"], prof["flushing"], prof["delta"]
        busy = sum(prof["busy"].values())

        def ms(s: float, n: int = n) -> float:
            return s / n * 1e3

        cols.append(
            {
                "fused step (wall)": ms(prof["wall"]),
                "PyTorch CPU eager step": cpu_step * 1e3,
                "host, recording the forward": ms(rec["forward"]),
                "host, recording the backward": ms(rec["backward"]),
                "host, recording the optimizer step": ms(rec["optimizer"]),
                "host, flushing (keys, lookups, launch)": ms(sum(fl.values()) - fl["read"]),
                "  of all flushing: inside PJRT Execute": ms(d["execute_seconds"]),
                "  of all flushing: compiling": ms(d["compile_seconds"]),
                "host, flushing and waiting at loss.item()": ms(fl["read"] + rec["read"]),
                "device, busy (all programs)": ms(busy),
                "device, idle": ms(prof["wall"] - busy),
                "dot kernels, XLA:CPU (isolated)": ours * 1e3,
                "dot kernels, PyTorch CPU (same shapes)": theirs * 1e3,
                "dot GFLOP per step": flops / 1e9,
                "dot GFLOP/s, XLA:CPU (isolated)": flops / ours / 1e9,
                "dot GFLOP/s, PyTorch CPU (same shapes)": flops / theirs / 1e9,
                "recorded ops per step": d["recorded_ops"] / n,
                "host us per recorded op (all host work)": (sum(rec.values()) - rec["read"])
                / d["recorded_ops"]
                * 1e6,
                "programs per step": d["executions"] / n,
                "dots per step": n_dots,
            }
        )
        rows = sorted(prof["busy"], key=lambda k: -prof["busy"][k])
        programs.append(
            [(prof["ops"][k], prof["launches"][k] / n, ms(prof["busy"][k])) for k in rows]
        )
    print(
        f"Fused Llama training step profile (llama_train.py's model), ms per step, mean of "
        f"{args.steps} steps; platform {torchtpu.platform()}"
    )
    print(f"{'':44s}" + "".join(f"{f'{b}x{s}':>10s}" for b, s in configs))
    for key in cols[0]:
        print(f"{key:44s}" + "".join(f"{c[key]:10.2f}" for c in cols))
    for (b, s), progs in zip(configs, programs):
        print(
            f"device time per program at {b}x{s} (ops, runs per step, ms per step): "
            + "; ".join(f"{o} ops x{r:g} {t:.2f}" for o, r, t in progs)
        )


if __name__ == "__main__":
    main()
