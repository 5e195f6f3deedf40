"""XLA:CPU's kernels beside PyTorch CPU's, op family by op family, at the Llama step's sizes.

Each tpu op runs in strict mode as a program of its own and is timed end to end with a
synchronize after every call; the cost of the same round trip for a one-element add (launch,
wait) is subtracted, so what remains is the kernel and its output buffer. PyTorch CPU eager runs
the same op on the same data in the same process. Rows marked "split" reduce the same data in
two stages (a reshape first), which shows what a better reduction emitter would gain.

python benchmarks/xla_cpu_kernels.py [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import torchtpu

Op = Callable[[torch.Tensor], torch.Tensor]


def timed_us(fn: Op, x: torch.Tensor, calls: int, sync: Callable[[], None]) -> float:
    """Median over 5 rounds of the microseconds per call, each call synchronized."""
    for _ in range(5):
        fn(x)
    sync()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
            sync()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def cases() -> dict[str, tuple[Op, tuple[int, ...]]]:
    """Name -> (op, input shape). 640 rows = the 16x40 step's tokens; 384 = the MLP width,
    128 = hidden, 16x4x40x40 = the attention scores."""
    silu = torch.nn.functional.silu
    return {
        "add (x + x), 640x384": (lambda x: x + x, (640, 384)),
        "exp, 640x384": (torch.exp, (640, 384)),
        "tanh, 640x384": (torch.tanh, (640, 384)),
        "sigmoid, 640x384": (torch.sigmoid, (640, 384)),
        "silu, 640x384": (silu, (640, 384)),
        "rsqrt, 640x384": (lambda x: (x.abs() + 1).rsqrt(), (640, 384)),
        "sin, 640x384": (torch.sin, (640, 384)),
        "sum over rows (dim -1), 640x384": (lambda x: x.sum(-1), (640, 384)),
        "  split: 640x48x8, sum(1).sum(-1)": (lambda x: x.view(640, 48, 8).sum(1).sum(-1), (640, 384)),
        "sum over rows (dim -1), 640x128": (lambda x: x.sum(-1), (640, 128)),
        "sum over columns (dim 0), 640x384": (lambda x: x.sum(0), (640, 384)),
        "  split: 8x80x384, sum(1).sum(0)": (lambda x: x.view(8, 80, 384).sum(1).sum(0), (640, 384)),
        "amax over rows, 640x384": (lambda x: x.amax(-1), (640, 384)),
        "softmax over rows, 16x4x40x40": (lambda x: x.softmax(-1), (16, 4, 40, 40)),
        "log_softmax over rows, 640x384": (lambda x: x.log_softmax(-1), (640, 384)),
        "transpose + copy, 640x384": (lambda x: x.t().contiguous(), (640, 384)),
        "matmul, 640x128 @ 128x640": (lambda x: x @ x.t(), (640, 128)),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200)
    args = p.parse_args()
    torchtpu.set_mode("strict")
    torch.manual_seed(0)
    sync = torch.tpu.synchronize
    one = torch.ones(1, device="tpu")
    base = timed_us(lambda x: x + x, one, args.calls, sync)
    print(
        f"XLA:CPU ({torchtpu.platform()} plugin) beside PyTorch CPU, {torch.get_num_threads()} "
        f"threads; us per op, median of 5 rounds of {args.calls} calls; a synchronized "
        f"one-element add ({base:.1f} us) subtracted from the tpu column"
    )
    print(f"{'op':36s} {'XLA:CPU':>9s} {'PyTorch':>9s} {'ratio':>7s}")
    for name, (fn, shape) in cases().items():
        x_cpu = torch.randn(shape)
        x = x_cpu.to("tpu")
        ours = timed_us(fn, x, args.calls, sync) - base
        theirs = timed_us(fn, x_cpu, args.calls, lambda: None)
        print(f"{name:36s} {ours:9.1f} {theirs:9.1f} {ours / theirs:6.2f}x")
    torchtpu.set_mode("fused")


if __name__ == "__main__":
    main()
