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
from collections.abc import Callable

import torch
import transformers as hf
from llama_train import alternating_rounds

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
    peaks = {}
    for on in (True, False):  # warm-up (each setting compiles its own programs) and peak memory
        torchtpu._C._set_donation(on)
        step()  # the first step after a switch still holds the other setting's buffers
        torch.tpu.reset_peak_memory_stats()
        for _ in range(args.steps):
            step()
        peaks[on] = torch.tpu.max_memory_allocated()
    switch = {on: (lambda on=on: (torchtpu._C._set_donation(on), step()), step) for on in peaks}
    times = alternating_rounds(switch, args.steps, args.rounds)
    torchtpu._C._set_donation(True)
    print(f"donation, fused mode, median of {args.rounds} alternating rounds of {args.steps} steps")
    for on in (True, False):
        print(
            f"donation {'on ' if on else 'off'}: {statistics.median(times[on]) * 1e3:7.1f} ms/step,"
            f" peak {peaks[on] / 2**20:7.1f} MiB"
        )

    variants = {
        "foreach (default)": step_fn("tpu", foreach=True),
        "fused=True": step_fn("tpu", fused=True),
        "for-loop": step_fn("tpu", foreach=False),
    }
    for step in variants.values():  # warm-up: compiles
        for _ in range(3):
            step()
    times = alternating_rounds({k: (v, v) for k, v in variants.items()}, args.steps, args.rounds)
    print(f"AdamW variants, fused mode, median of {args.rounds} alternating rounds")
    for name, t in times.items():
        print(f"{name:20s} {statistics.median(t) * 1e3:7.1f} ms/step")


if __name__ == "__main__":
    main()
