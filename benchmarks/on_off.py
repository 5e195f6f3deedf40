"""What value checks cost: the finetune_llama.py training step in fused mode (forward, backward,
AdamW, `loss.item()`) with the index and target checks on and off, in one process, rounds
alternating so that machine noise falls on both. Its checked ops are the embedding lookup and the
cross-entropy target.

python benchmarks/value_checks.py [--steps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from llama_train import BATCH, SEQ, train_step

import torchtpu


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args()
    device = torchtpu.get_device()
    torchtpu.set_mode("fused")
    step = train_step(device)

    times: dict[bool, list[float]] = {True: [], False: []}
    for on in (True, False):  # warm-up: each setting compiles its own programs
        torchtpu._C._set_checks(on)
        for _ in range(3):
            step()
    for r in range(2 * args.rounds):
        on = r % 2 == 0
        torchtpu._C._set_checks(on)
        torch.tpu.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.tpu.synchronize()
        times[on].append((time.perf_counter() - start) / args.steps)
    torchtpu._C._set_checks(True)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(
        f"Llama train step, fused, batch {BATCH}x{SEQ}, median of {args.rounds} alternating "
        f"rounds of {args.steps} steps; platform {torchtpu.platform()}"
    )
    print(f"{'checks':10s} {'step ms':>9s}")
    print(f"{'on':10s} {on * 1e3:9.1f}")
    print(f"{'off':10s} {off * 1e3:9.1f}")
    print(f"cost: {100 * (on - off) / off:+.1f}%")


if __name__ == "__main__":
    main()
