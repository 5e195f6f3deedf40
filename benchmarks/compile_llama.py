"""The finetune_llama.py model's train step (forward, backward, AdamW) four ways, in one run:
torch.compile with our backend, our fused eager, PyTorch CPU eager, and torch.compile with
Inductor on CPU. Same model, same batch; each step reads its loss (`loss.item()`), as a training
loop that logs does. Step time is the median of three timed rounds after warm-up (which
includes compiling), with the device synchronized before the clock stops.

python benchmarks/compile_llama.py [--steps N] [--warmup N] [--peer cpu|cuda] [--batch B --seq S]

`--peer cuda` runs PyTorch's eager and Inductor on the GPU instead (make gpu-check does, with
torchtpu on the same GPU through XLA:GPU).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable

import torch
from transformers import LlamaForCausalLM

import torchtpu
from torchtpu import _dynamo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from instruct_data import batches
from llama_config import small_llama_config
from llama_train import timed_rounds

BATCH, SEQ = 16, 40


def make_step(device: torch.device, backend: str | None, batch: int, seq: int) -> Callable[[], float]:
    torch.manual_seed(0)
    model = LlamaForCausalLM(small_llama_config()).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = {k: v.to(device) for k, v in batches(1, batch, seq, seed=0)[0].items()}

    def step() -> torch.Tensor:
        loss = model(**data).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if backend is not None:
        step = torch.compile(step, backend=backend)
    return lambda: step().item()


def step_times(
    device: torch.device, backend: str | None, steps: int, warmup: int, batch: int, seq: int
) -> list[float]:
    torch._dynamo.reset()
    return timed_rounds(make_step(device, backend, batch, seq), device, steps, warmup)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--peer", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--batch", type=int, default=BATCH)
    p.add_argument("--seq", type=int, default=SEQ)
    args = p.parse_args()
    torchtpu.set_mode("fused")
    tpu, peer = torchtpu.get_device(), torch.device(args.peer)
    label = args.peer.upper()
    runs = [
        ("tpu torch.compile", tpu, "tpu"),
        ("tpu fused eager", tpu, None),
        (f"PyTorch {label} eager", peer, None),
        (f"{label} Inductor", peer, "inductor"),
    ]
    rows = []
    for name, device, backend in runs:
        before = torchtpu.metrics()
        times = step_times(device, backend, args.steps, args.warmup, args.batch, args.seq)
        t = statistics.median(times)
        compiles = torchtpu.metrics()["compiles"] - before["compiles"]
        graphs = len(_dynamo.compiled_graphs())  # this run's (step_times reset Dynamo first)
        rows.append((name, t * 1e3, args.batch * args.seq / t, compiles, graphs))
    print(
        f"Llama ({small_llama_config().num_hidden_layers} layers, hidden "
        f"{small_llama_config().hidden_size}), batch {args.batch}x{args.seq} tokens, train step "
        f"with AdamW, median of 3 rounds of {args.steps} steps after {args.warmup} warm-up; "
        f"{torch.get_num_threads()} CPU threads; platform {torchtpu.platform()}"
    )
    vs = f"vs {label}"
    print(f"{'':20s} {'step ms':>9s} {'tokens/s':>10s} {vs:>8s} {'XLA compiles':>13s} {'graphs':>7s}")
    peer_ms = rows[2][1]  # PyTorch's own eager on the peer device
    for name, ms, tps, compiles, graphs in rows:
        print(f"{name:20s} {ms:9.1f} {tps:10.0f} {peer_ms / ms:7.2f}x {compiles:13d} {graphs:7d}")


if __name__ == "__main__":
    main()
