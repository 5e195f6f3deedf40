"""What value checks cost: the finetune_llama.py training step in fused mode (forward, backward,
AdamW, `loss.item()`) with the index and target checks on and off, in one process, rounds
alternating so that machine noise falls on both. Its checked ops are the embedding lookup and the
cross-entropy target.

python benchmarks/value_checks.py [--steps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from transformers import LlamaForCausalLM

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from instruct_data import batches
from llama_config import small_llama_config

BATCH, SEQ = 16, 40


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args()
    device = torchtpu.get_device()
    torchtpu.set_mode("fused")
    torch.manual_seed(0)
    model = LlamaForCausalLM(small_llama_config()).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {k: v.to(device) for k, v in batches(1, BATCH, SEQ, seed=0)[0].items()}

    def step() -> float:
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

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
