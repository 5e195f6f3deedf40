"""No leaks over time: the finetune_llama.py training loop (forward, backward, AdamW,
`loss.item()`) holds the same tpu memory, live buffers and loaded executables at step 100 as at
step 70, once warm-up is over (AdamW's bias corrections bring two new scalars every step; the
scalar cache keeps a bounded set). benchmarks/soak.py runs 1,000 steps."""

import os
import sys

import torch

import torchtpu


def llama_step(device: torch.device):
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    sys.path.insert(0, examples)
    try:
        from instruct_data import batches
        from llama_config import small_llama_config
        from transformers import LlamaForCausalLM
    finally:
        sys.path.remove(examples)
    torch.manual_seed(0)
    model = LlamaForCausalLM(small_llama_config()).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = {k: v.to(device) for k, v in batches(1, 8, 24, seed=0)[0].items()}

    def step() -> float:
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def footprint() -> dict[str, int]:
    torch.tpu.synchronize()
    return {
        "memory": torch.tpu.memory_allocated(),
        "buffers": torch.tpu.memory_stats()["allocation.all.current"],
        "programs": torchtpu.metrics()["loaded_programs"],
    }


def test_training_loop_footprint_is_flat(device):
    step = llama_step(device)
    losses = [step() for _ in range(40)]
    footprint()  # the step after a sync records a trace of its own once: its program is warm too
    losses += [step() for _ in range(30)]
    at_70 = footprint()
    losses += [step() for _ in range(30)]
    assert footprint() == at_70
    assert losses[-1] < losses[0]  # it trained
