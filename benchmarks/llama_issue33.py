"""Issue 33's Llama, re-measured: the losses of 6 AdamW steps on CPU and on tpu in strict mode,
fused mode (the default) and under torch.compile(backend="tpu"); then what buffer donation saves
on the same step in fused mode (peak device memory and step time, donation on and off in
alternating rounds, one process); and the step time of AdamW's three implementations (foreach,
fused=True, for-loop) in alternating rounds.

python benchmarks/llama_issue33.py [--steps N] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import transformers as hf

import torchtpu

CFG = hf.LlamaConfig(
    vocab_size=2048,
    hidden_size=256,
    intermediate_size=688,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=2,
    tie_word_embeddings=True,
    attn_implementation="sdpa",
)


def step_fn(device: str, compiled: bool = False, **optim: bool) -> Callable[[], float]:
    """The issue's loop: batch 8 x 128, AdamW(lr=1e-3), loss.item() every step."""
    torch.manual_seed(0)
    model = hf.LlamaForCausalLM(CFG).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **optim)
    forward = torch.compile(model, backend="tpu") if compiled else model
    x = torch.randint(0, 2048, (8, 128), generator=torch.Generator().manual_seed(1)).to(device)

    def step() -> float:
        loss = forward(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    return step


def losses(device: str, mode: str | None, compiled: bool, steps: int) -> list[float]:
    if mode:
        torchtpu.set_mode(mode)
    step = step_fn(device, compiled)
    return [step() for _ in range(steps)]


def alternating(steps: dict[str, Callable[[], float]], n: int, rounds: int) -> dict[str, float]:
    """Median seconds per step of each, in rounds that alternate between them."""
    for step in steps.values():  # warm-up: compiles
        for _ in range(3):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            torch.tpu.synchronize()
            t = time.perf_counter()
            for _ in range(n):
                step()
            times[name].append((time.perf_counter() - t) / n)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    runs = {
        "CPU": ("cpu", None, False),
        "tpu strict": ("tpu", "strict", False),
        "tpu fused (default)": ("tpu", "fused", False),
        "tpu torch.compile": ("tpu", "fused", True),
    }
    table = {name: losses(*run, args.steps) for name, run in runs.items()}
    cpu = table["CPU"]
    print(f"platform {torchtpu.platform()}; losses of {args.steps} steps, largest rel. diff vs CPU")
    for name, ls in table.items():
        diff = max(abs(a - b) / abs(b) for a, b in zip(ls, cpu))
        print(f"{name:20s} " + " ".join(f"{v:.5f}" for v in ls) + f"   {diff:.1e}")

    torchtpu.set_mode("fused")
    step = step_fn("tpu")
    times: dict[bool, list[float]] = {True: [], False: []}
    peaks: dict[bool, list[int]] = {True: [], False: []}
    for on in (True, False):  # warm-up: each setting compiles its own programs
        torchtpu._C._set_donation(on)
        for _ in range(3):
            step()
    for _ in range(args.rounds):
        for on in (True, False):
            torchtpu._C._set_donation(on)
            step()  # the first step after a switch still holds the other setting's buffers
            torch.tpu.reset_peak_memory_stats()
            t = time.perf_counter()
            for _ in range(args.steps):
                step()
            times[on].append((time.perf_counter() - t) / args.steps)
            peaks[on].append(torch.tpu.max_memory_allocated())
    torchtpu._C._set_donation(True)
    print(f"donation, fused mode, median of {args.rounds} alternating rounds of {args.steps} steps")
    for on in (True, False):
        print(
            f"donation {'on ' if on else 'off'}: {statistics.median(times[on]) * 1e3:7.1f} ms/step,"
            f" peak {max(peaks[on]) / 2**20:7.1f} MiB"
        )

    variants = {
        "foreach (default)": step_fn("tpu", foreach=True),
        "fused=True": step_fn("tpu", fused=True),
        "for-loop": step_fn("tpu", foreach=False),
    }
    medians = alternating(variants, args.steps, args.rounds)
    print(f"AdamW variants, fused mode, median of {args.rounds} alternating rounds")
    for name, t in medians.items():
        print(f"{name:20s} {t * 1e3:7.1f} ms/step")


if __name__ == "__main__":
    main()
