"""Greedy generate() speed of the examples' Llama with Hugging Face's default dynamic KV cache:
tpu in fused mode (a first call that compiles, then warm calls) beside PyTorch CPU eager, in one
run, alternating rounds. Tokens per second count the new tokens of one call; the compile count
is the XLA programs the call compiled. Every tpu call's tokens are checked against CPU's.

python benchmarks/generate_speed.py [--tokens N] [--rounds N]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

import torch
from transformers import LlamaForCausalLM

import torchtpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from instruct_data import EOS, encode
from llama_config import small_llama_config

PROMPT = "Q: add 3 and 4? A:"


def generate(model: LlamaForCausalLM, device: torch.device, tokens: int) -> tuple[list[int], float]:
    """The new tokens of one greedy call, and its wall time (the tokens are read to the host)."""
    ids = torch.tensor([encode(PROMPT)], device=device)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, eos_token_id=None,
                             pad_token_id=EOS, do_sample=False)
    new = out[0, ids.shape[1]:].tolist()
    return new, time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    cpu_model = LlamaForCausalLM(small_llama_config()).eval()
    device = torchtpu.get_device()
    tpu_model = copy.deepcopy(cpu_model).to(device)

    reference, _ = generate(cpu_model, torch.device("cpu"), args.tokens)
    before = torchtpu.metrics()["compiles"]
    first_tokens, first = generate(tpu_model, device, args.tokens)
    first_compiles = torchtpu.metrics()["compiles"] - before
    assert first_tokens == reference, "tpu tokens differ from CPU's"

    times: dict[str, list[float]] = {"tpu": [], "cpu": []}
    warm_compiles = 0
    for _ in range(args.rounds):  # alternating, so both see the same machine load
        before = torchtpu.metrics()["compiles"]
        toks, t = generate(tpu_model, device, args.tokens)
        warm_compiles += torchtpu.metrics()["compiles"] - before
        assert toks == reference, "tpu tokens differ from CPU's"
        times["tpu"].append(t)
        times["cpu"].append(generate(cpu_model, torch.device("cpu"), args.tokens)[1])

    cfg = small_llama_config()
    print(f"torch {torch.__version__}, tpu platform: {torchtpu.platform()}, 2 CPU threads")
    print(f"greedy generate(), {args.tokens} new tokens, dynamic KV cache, Llama "
          f"{cfg.num_hidden_layers} layers hidden {cfg.hidden_size}; median of {args.rounds} warm "
          "calls")
    cpu = statistics.median(times["cpu"])
    print(f"{'':26s} {'s/call':>8s} {'tokens/s':>9s} {'vs CPU':>7s} {'compiles':>9s}")
    rows = [
        ("tpu fused, first call", first, first_compiles),
        ("tpu fused, warm calls", statistics.median(times["tpu"]), warm_compiles),
        ("PyTorch CPU eager", cpu, None),
    ]
    for name, t, compiles in rows:
        c = "-" if compiles is None else str(compiles)
        print(f"{name:26s} {t:8.3f} {args.tokens / t:9.0f} {cpu / t:6.2f}x {c:>9s}")
    print("tokens identical to CPU in every tpu call")


if __name__ == "__main__":
    main()
