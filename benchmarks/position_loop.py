"""Loops over positions (issue: offsets as parameters): 300 row writes `x[i] = row`, 300 column
writes, 300 KV-cache writes `cache[:, :, i:i+1] = k` and 300 row reads, on tpu in strict and
fused mode beside PyTorch CPU eager, in one run. Each loop runs twice on fresh tensors: the first
run compiles what it needs (programs built: compiled, or loaded from the disk cache), the second
shows the steady state.

python benchmarks/position_loop.py [--n N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

import torchtpu


def row_writes(d: torch.device, n: int) -> torch.Tensor:
    x = torch.zeros(n, 64, device=d)
    row = torch.arange(64.0, device=d)
    for i in range(n):
        x[i] = row + i
    return x


def column_writes(d: torch.device, n: int) -> torch.Tensor:
    x = torch.zeros(64, n, device=d)
    for i in range(n):
        x[:, i] = float(i)
    return x


def cache_writes(d: torch.device, n: int) -> torch.Tensor:
    cache = torch.zeros(2, 4, n, 16, device=d)
    k = torch.ones(2, 4, 1, 16, device=d)
    for i in range(n):
        cache[:, :, i : i + 1] = k * i
    return cache


def row_reads(d: torch.device, n: int) -> torch.Tensor:
    x = torch.arange(n * 64.0, device=d).view(n, 64)
    acc = torch.zeros(64, device=d)
    for i in range(n):
        acc = acc + x[i]
    return acc


def timed(fn: Callable[[torch.device, int], torch.Tensor], d: torch.device, n: int):
    torchtpu.reset_metrics()
    start = time.perf_counter()
    fn(d, n).cpu()
    seconds = time.perf_counter() - start
    m = torchtpu.metrics()
    return seconds, m["compiles"] + m["disk_cache_hits"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=300)
    args = p.parse_args()
    tpu = torchtpu.get_device()
    print(f"{args.n} iterations per loop; platform {torchtpu.platform()}")
    print(
        f"{'loop':15s} {'run':22s} {'1st ms':>9s} {'programs':>9s} {'2nd ms':>9s} {'programs':>9s}"
    )
    for fn in (row_writes, column_writes, cache_writes, row_reads):
        for name, device, mode in (
            ("tpu strict", tpu, "strict"),
            ("tpu fused", tpu, "fused"),
            ("PyTorch CPU eager", torch.device("cpu"), None),
        ):
            with torchtpu.mode(mode or "fused"):
                first, built1 = timed(fn, device, args.n)
                second, built2 = timed(fn, device, args.n)
            if device.type == "cpu":
                built1 = built2 = 0
            print(
                f"{fn.__name__:15s} {name:22s} {first * 1e3:9.1f} {built1:9d} "
                f"{second * 1e3:9.1f} {built2:9d}"
            )


if __name__ == "__main__":
    main()
