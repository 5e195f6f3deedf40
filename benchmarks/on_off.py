"""What a fused-mode feature costs or saves, with the feature on and off, in one process, rounds
alternating so that machine noise falls on both. Workloads: the finetune_llama.py training step
(forward, backward, AdamW, `loss.item()`) and a loop of in-place updates of a 16 MiB tensor
(`x.mul_(0.5).add_(y)`, then a sync).

- `checks`: the index and target value checks (the embedding lookup and the cross-entropy target)
- `donation`: parameter buffers given to programs for their results (in-place updates)

python benchmarks/on_off.py checks|donation [--steps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
from llama_train import BATCH, SEQ, alternating_rounds, train_step

import torchtpu

SWITCHES = {"checks": torchtpu._C._set_checks, "donation": torchtpu._C._set_donation}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("switch", choices=sorted(SWITCHES))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args()
    switch = SWITCHES[args.switch]
    device = torchtpu.get_device()
    torchtpu.set_mode("fused")
    x, y = torch.zeros(1 << 22, device=device), torch.ones(1 << 22, device=device)

    def in_place() -> None:
        x.mul_(0.5).add_(y)
        torch.tpu.synchronize()

    workloads = {f"Llama train step, batch {BATCH}x{SEQ}": train_step(device),
                 "in-place update, 16 MiB": in_place}
    print(f"fused mode, median of {args.rounds} alternating rounds of {args.steps} steps; "
          f"platform {torchtpu.platform()}")
    print(f"{'workload':34s} {args.switch + ' on':>10s} {args.switch + ' off':>10s} {'on/off':>7s}")
    for name, step in workloads.items():
        on, off = alternating(step, switch, args.steps, args.rounds)
        print(f"{name:34s} {on * 1e3:8.2f}ms {off * 1e3:8.2f}ms {100 * (on - off) / off:+6.1f}%")
    switch(True)


def alternating(step: Callable[[], object], switch: Callable[[bool], None], steps: int,
                rounds: int) -> tuple[float, float]:
    """Median seconds per step with the switch on and off, in alternating rounds."""
    for on in (True, False):  # warm-up: each setting compiles its own programs
        switch(on)
        for _ in range(3):
            step()
    times = alternating_rounds(
        {"on": (lambda: switch(True), step), "off": (lambda: switch(False), step)}, steps, rounds
    )
    return statistics.median(times["on"]), statistics.median(times["off"])


if __name__ == "__main__":
    main()
