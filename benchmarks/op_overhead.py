"""Median microseconds per op on tpu (strict mode, fused mode) beside PyTorch CPU eager.

Columns: strict = each op runs as its own cached program; fused = ops recorded and run as
fused programs, end to end; fused record = host cost of recording one op (timed without the
flush, which runs after the clock stops).

python benchmarks/op_overhead.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import torchtpu


def per_op_us(
    fn: Callable[[], object],
    ops: int,
    sync: Callable[[], None],
    iters: int,
    repeats: int,
    sync_timed: bool = True,
) -> float:
    # Results are kept until the sync: fused mode would skip computing values nobody holds.
    kept: list[object] = []
    for _ in range(3):  # warm up: compile and fill caches
        for _ in range(iters):
            kept.append(fn())
        sync()
        kept.clear()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            kept.append(fn())
        if sync_timed:
            sync()
        samples.append((time.perf_counter() - start) / (iters * ops) * 1e6)
        if not sync_timed:
            sync()
        kept.clear()
    return statistics.median(samples)


def cases(device: str) -> dict[str, tuple[Callable[[], object], int]]:
    """Each case carries state from call to call, so no two calls compute the same value (fused
    programs would otherwise share the work, which would flatter fused mode)."""
    torch.manual_seed(0)
    b = torch.randn(8, 8, device=device)
    q = torch.linalg.qr(torch.randn(256, 256))[0].to(device)  # orthogonal: values stay bounded
    state = {"acc": torch.zeros(8, 8, device=device), "y": torch.randn(256, 256, device=device)}

    def add() -> torch.Tensor:
        state["acc"] = state["acc"] + b
        return state["acc"]

    def matmul() -> torch.Tensor:
        state["y"] = state["y"] @ q
        return state["y"]

    def chain() -> torch.Tensor:
        x = state["acc"]
        for _ in range(5):
            x = x * 0.99
            x = x + b
        state["acc"] = x
        return x

    return {
        "add 8x8": (add, 1),
        "matmul 256x256": (matmul, 1),
        "10-op elementwise chain (per op)": (chain, 10),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--iters", type=int, default=200)
    args = p.parse_args()
    rows = []
    cpu_cases, tpu_cases = cases("cpu"), cases("tpu")
    sync = torch.tpu.synchronize
    for name in cpu_cases:
        fn, ops = cpu_cases[name]
        cpu = per_op_us(fn, ops, lambda: None, args.iters, args.repeats)
        fn, ops = tpu_cases[name]
        with torchtpu.mode("strict"):
            strict = per_op_us(fn, ops, sync, args.iters, args.repeats)
        with torchtpu.mode("fused"):
            fused = per_op_us(fn, ops, sync, args.iters, args.repeats)
            limit = torchtpu._C._fused_max_ops()
            torchtpu._C._set_fused_max_ops(10 * args.iters * ops)  # no flush while timing
            record = per_op_us(fn, ops, sync, args.iters, args.repeats, sync_timed=False)
            torchtpu._C._set_fused_max_ops(limit)
        rows.append((name, strict, fused, record, cpu))
    print(f"torch {torch.__version__}, tpu platform: {torchtpu.platform()}, median us per op")
    head = ["strict", "fused", "fused record", "cpu eager"]
    print(f"{'case':34s}" + "".join(f"{h:>14s}" for h in head))
    for name, *vals in rows:
        print(f"{name:34s}" + "".join(f"{v:14.1f}" for v in vals))


if __name__ == "__main__":
    main()
