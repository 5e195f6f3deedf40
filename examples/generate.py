"""Greedy and sampled generate() with a KV cache on tpu, using the fine-tuned model from
finetune_llama.py (or a random one). Checks greedy tokens against CPU and reports how many XLA
compiles a 64-token generation costs with a dynamic and with a static KV cache.

python examples/generate.py [--tokens 64]
"""

from __future__ import annotations

import argparse
import copy
import os

import torch
from instruct_data import EOS, decode, encode
from llama_config import small_llama_config
from transformers import LlamaForCausalLM

import torchtpu as tpu

CKPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo_out", "llama_finetuned.pt")


def load() -> LlamaForCausalLM:
    torch.manual_seed(0)
    model = LlamaForCausalLM(small_llama_config())
    if os.path.exists(CKPT):
        model.load_state_dict(torch.load(CKPT, map_location="cpu"))
        print(f"loaded {os.path.normpath(CKPT)}")
    else:
        print("no fine-tuned checkpoint (run examples/finetune_llama.py): random weights")
    return model.eval()


def generate(model: LlamaForCausalLM, prompt: str, device: torch.device, tokens: int, cache: str,
             sample: bool = False) -> list[int]:
    ids = torch.tensor([encode(prompt)], device=device)
    kwargs = {"do_sample": True, "top_k": 8, "temperature": 0.8} if sample else {"do_sample": False}
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, eos_token_id=None,
                             pad_token_id=EOS, cache_implementation=cache, **kwargs)
    return out[0, ids.shape[1]:].tolist()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=64)
    args = p.parse_args()
    device = tpu.get_device()
    cpu_model = load()
    model = copy.deepcopy(cpu_model).to(device)

    for prompt in ["Q: add 12 and 30? A:", "Q: reverse tensor? A:", "Q: upper graph? A:"]:
        greedy = generate(model, prompt, device, 8, "dynamic")
        print(f"{prompt!r:28} -> {decode(greedy).split(chr(10))[0]!r}")

    print(f"\n{args.tokens}-token greedy generation, compiles on tpu:")
    prompt = "Q: add 3 and 4? A:"
    for cache in ["dynamic", "static"]:
        for run in ["first", "second"]:
            before = tpu.metrics()["compiles"]
            toks = generate(model, prompt, device, args.tokens, cache)
            compiles = tpu.metrics()["compiles"] - before
            ref = generate(cpu_model, prompt, torch.device("cpu"), args.tokens, cache)
            same = "identical to CPU" if toks == ref else "DIFFERENT from CPU"
            print(f"  {cache:7} cache, {run} run: {compiles:4d} compiles, greedy tokens {same}")

    torch.manual_seed(1)
    sampled = generate(model, prompt, device, 32, "static", sample=True)
    print(f"\nsampled (top-k 8, T=0.8): {decode(sampled)!r}")


if __name__ == "__main__":
    main()
