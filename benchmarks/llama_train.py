"""Training throughput of the finetune_llama.py model: tpu in strict and fused mode beside PyTorch
CPU eager, same model, same batch, in one run. The loop is finetune_llama.py's: each step reads
its loss (`loss.item()`), as a training loop that logs does. Step time is the wall time of the
timed steps divided by their number, with the device synchronized before the clock stops.

python benchmarks/llama_train.py [--steps N] [--warmup N]
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    rows = []
    tpu, cpu = torchtpu.get_device(), torch.device("cpu")
    runs = [
        ("tpu (strict)", tpu, "strict"),
        ("tpu (fused)", tpu, "fused"),
        ("PyTorch CPU eager", cpu, ""),
    ]
    for name, device, mode in runs:
        before = torchtpu.metrics()
        t = statistics.median(step_times(device, args.steps, args.warmup, mode))
        compiles = torchtpu.metrics()["compiles"] - before["compiles"]
        rows.append((name, t * 1e3, BATCH * SEQ / t, compiles))
    print(
        f"Llama ({small_llama_config().num_hidden_layers} layers, hidden "
        f"{small_llama_config().hidden_size}), batch {BATCH}x{SEQ} tokens, "
        f"median of 3 rounds of {args.steps} steps after {args.warmup} warm-up; platform {torchtpu.platform()}"
    )
    print(f"{'':20s} {'step ms':>9s} {'tokens/s':>10s} {'compiles':>9s}")
    for name, ms, tps, compiles in rows:
        print(f"{name:20s} {ms:9.1f} {tps:10.0f} {compiles:9d}")


if __name__ == "__main__":
    main()
