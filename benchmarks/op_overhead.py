"""Median microseconds per op, tpu strict mode (cache hits) beside PyTorch CPU eager.

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
    fn: Callable[[], object], ops: int, sync: Callable[[], None], iters: int, repeats: int
) -> float:
    for _ in range(3):  # warm up: compile and fill caches
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / (iters * ops) * 1e6)
    return statistics.median(samples)


def cases(device: str) -> dict[str, tuple[Callable[[], object], int]]:
    a = torch.randn(8, 8, device=device)
    b = torch.randn(8, 8, device=device)
    m = torch.randn(256, 256, device=device)

    def chain() -> torch.Tensor:
        x = a
        for _ in range(5):
            x = x * 1.01
            x = x + b
        return x

    return {
        "add 8x8": (lambda: a + b, 1),
        "matmul 256x256": (lambda: m @ m, 1),
        "10-op elementwise chain (per op)": (chain, 10),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--iters", type=int, default=200)
    args = p.parse_args()
    torchtpu.set_mode("strict")
    rows = []
    cpu_cases, tpu_cases = cases("cpu"), cases("tpu")
    for name in cpu_cases:
        fn, ops = cpu_cases[name]
        cpu = per_op_us(fn, ops, lambda: None, args.iters, args.repeats)
        fn, ops = tpu_cases[name]
        before = torchtpu.metrics()["compiles"]
        tpu = per_op_us(fn, ops, torch.tpu.synchronize, args.iters, args.repeats)
        recompiles = torchtpu.metrics()["compiles"] - before
        rows.append((name, tpu, cpu, recompiles))
    print(f"torch {torch.__version__}, tpu platform: {torchtpu.platform()}, mode: strict")
    print(f"{'case':36s} {'tpu us/op':>10s} {'cpu eager us/op':>16s} {'compiles':>9s}")
    for name, tpu, cpu, rec in rows:
        print(f"{name:36s} {tpu:10.1f} {cpu:16.1f} {rec:9d}")


if __name__ == "__main__":
    main()
