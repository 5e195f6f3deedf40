"""Multi-chip inference: a Llama sharded tensor-parallel over 4 tpu devices with DTensor
(Colwise/RowwiseParallel on attention and MLP) runs greedy generate(); the tokens are checked
against the same model on one device. This is multi-chip Llama serving scaled to this machine.

Each rank is a thread driving its own device of one PJRT client (a TPU host with 4 chips; on
the CPU plugin TORCHTPU_CPU_DEVICES=4), so every collective is one StableHLO collective across
the 4 devices. python examples/tp_generate.py [--new-tokens N]
"""

from __future__ import annotations

import argparse
import copy
import os
import time

os.environ.setdefault("TORCHTPU_CPU_DEVICES", "4")

import torch
from distributed_finetune import tp_plan
from instruct_data import encode
from llama_config import small_llama_config
from transformers import LlamaForCausalLM

import torchtpu as tpu
from torchtpu.testing import threaded_ranks

WORLD = 4


def build() -> LlamaForCausalLM:
    cfg = small_llama_config()
    cfg.num_attention_heads, cfg.num_key_value_heads = 8, 4  # 2 heads, 1 kv head per device
    cfg.initializer_range = 0.2  # untrained weights at 0.02 repeat one token; these vary
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def generate(model: LlamaForCausalLM, device: torch.device, prompt: torch.Tensor, n: int):
    with torch.no_grad():
        out = model.generate(prompt.to(device), max_new_tokens=n, do_sample=False,
                             attention_mask=torch.ones_like(prompt).to(device))
    return out.cpu()


def main() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    p = argparse.ArgumentParser()
    p.add_argument("--new-tokens", type=int, default=24)
    args = p.parse_args()
    cpu_model = build()
    prompt = torch.tensor([encode("Instruction: reverse the word 'tensor'. Response:")])

    start = time.perf_counter()
    one = generate(copy.deepcopy(cpu_model).to(tpu.get_device(0)), tpu.get_device(0), prompt,
                   args.new_tokens)
    one_s = time.perf_counter() - start


    def rank_main(rank: int, world: int) -> tuple[torch.Tensor, float, str]:
        device = torch.device("tpu", rank)
        model = copy.deepcopy(cpu_model).to(device)
        mesh = init_device_mesh("tpu", (world,))
        for layer in model.model.layers:
            parallelize_module(layer, mesh, tp_plan())
        begin = time.perf_counter()
        tokens = generate(model, device, prompt, args.new_tokens)
        return tokens, time.perf_counter() - begin, tpu.distributed.transport()

    results = threaded_ranks.run(rank_main, WORLD, timeout_s=1800)
    sharded, tp_s, transport = results[0]
    same = all(torch.equal(r[0], one) for r in results)
    print(f"{args.new_tokens} greedy tokens on 1 device ({one_s:.1f}s) and tensor-parallel over "
          f"{WORLD} devices ({tp_s:.1f}s, transport {transport}): "
          f"{'identical' if same else 'DIFFERENT'}")
    print("tokens:", sharded[0, prompt.shape[1]:].tolist())
    m = tpu.metrics()
    print(f"collectives (all ranks): {m['fused_collectives']} ran inside programs with other ops, "
          f"{m['lone_collectives']} alone")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
