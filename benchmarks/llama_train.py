"""Training throughput of the finetune_llama.py model: tpu in strict and fused mode beside PyTorch
CPU eager, same model, same batch, in one run. The loop is finetune_llama.py's: each step reads
its loss (`loss.item()`), as a training loop that logs does. Step time is the wall time of the
timed steps divided by their number, with the device synchronized before the clock stops.

python benchmarks/llama_train.py [--steps N] [--warmup N] [--rounds N] [--shapes 16x40 8x128]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
from transformers import LlamaForCausalLM

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from instruct_data import batches
from llama_config import small_llama_config

BATCH, SEQ = 16, 40


def step_times(device: torch.device, steps: int, warmup: int, mode: str) -> list[float]:
    if device.type == "tpu":
        torchtpu.set_mode(mode)
    return timed_rounds(train_step(device), device, steps, warmup)


def setup(
    device: torch.device, batch: int = BATCH, seq: int = SEQ
) -> tuple[LlamaForCausalLM, torch.optim.Optimizer, dict[str, torch.Tensor]]:
    """finetune_llama.py's model, optimizer and one batch, on `device`."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(small_llama_config()).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = {k: v.to(device) for k, v in batches(1, batch, seq, seed=0)[0].items()}
    return model, opt, data


def train_step(device: torch.device, batch: int = BATCH, seq: int = SEQ) -> Callable[[], float]:
    """finetune_llama.py's step on `device`: forward, backward, AdamW, `loss.item()`."""
    model, opt, data = setup(device, batch, seq)

    def step() -> float:
        loss = model(**data).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def timed_rounds(
    step: Callable[[], object], device: torch.device, steps: int, warmup: int
) -> list[float]:
    """Seconds per step of three timed rounds after `warmup` steps, the device synchronized
    before each clock stops; the median round is reported."""
    syncs = {"tpu": torch.tpu.synchronize, "cuda": torch.cuda.synchronize}
    sync = syncs.get(device.type, lambda: None)
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        times.append((time.perf_counter() - start) / steps)
    return times


def alternating_rounds(
    entries: dict[str, tuple[Callable[[], object], Callable[[], object]]], n: int, rounds: int
) -> dict[str, list[float]]:
    """Seconds per step of each entry (prepare, step): `rounds` rounds of `prepare()` then `n`
    steps, the order of the entries reversed every round so that machine noise falls on all of
    them alike. The device is synchronized before each clock starts and stops."""
    times: dict[str, list[float]] = {name: [] for name in entries}
    order = list(entries)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            prepare, step = entries[name]
            prepare()
            torch.tpu.synchronize()
            start = time.perf_counter()
            for _ in range(n):
                step()
            torch.tpu.synchronize()
            times[name].append((time.perf_counter() - start) / n)
    return times


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--shapes", nargs="+", default=[f"{BATCH}x{SEQ}", "8x128"])
    args = p.parse_args()
    tpu, cpu = torchtpu.get_device(), torch.device("cpu")
    cfg = small_llama_config()
    print(
        f"Llama ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}), train step "
        f"(forward, backward, AdamW, loss.item()), median of {args.rounds} alternating rounds of "
        f"{args.steps} steps after {args.warmup} warm-up; platform {torchtpu.platform()}, "
        f"{torch.get_num_threads()} CPU threads"
    )
    print(f"{'batch':8s} {'':20s} {'step ms':>9s} {'tokens/s':>10s} {'compiles':>9s} {'vs CPU':>7s}")
    for shape in args.shapes:
        batch, seq = (int(x) for x in shape.split("x"))
        runs = {
            "tpu (strict)": (tpu, "strict"),
            "tpu (fused)": (tpu, "fused"),
            "PyTorch CPU eager": (cpu, ""),
        }
        steps, compiles = {}, {}
        for name, (device, mode) in runs.items():
            if device.type == "tpu":
                torchtpu.set_mode(mode)
            before = torchtpu.metrics()["compiles"]
            step = train_step(device, batch, seq)
            for _ in range(args.warmup):
                step()
            steps[name] = (lambda m=mode: torchtpu.set_mode(m) if m else None, step)
            compiles[name] = torchtpu.metrics()["compiles"] - before
        times = alternating_rounds(steps, args.steps, args.rounds)
        med = {name: statistics.median(t) for name, t in times.items()}
        for name in runs:
            ms = med[name] * 1e3
            ratio = med["PyTorch CPU eager"] / med[name]
            print(
                f"{shape:8s} {name:20s} {ms:9.1f} {batch * seq / med[name]:10.0f} "
                f"{compiles[name]:9d} {ratio:6.2f}x"
            )
        print(f"{shape:8s} fused / strict speed-up: {med['tpu (strict)'] / med['tpu (fused)']:.2f}x")
    torchtpu.set_mode("fused")


if __name__ == "__main__":
    main()
