"""No leaks over time: the finetune_llama.py training loop (forward, backward, AdamW,
`loss.item()`) holds the same tpu memory, live buffers and loaded executables at step 100 as at
step 70, once warm-up is over (AdamW's bias corrections bring two new scalars every step; the
scalar cache keeps a bounded set). benchmarks/soak.py runs 1,000 steps."""

import os
import sys

import torch

import torchtpu


def llama_step(device: torch.device):
    """benchmarks/llama_train.py's step (the finetune_llama.py model), as the soak runs it."""
    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks")
    sys.path.insert(0, bench)
    try:
        from llama_train import train_step  # it adds examples/ to the path itself
    finally:
        sys.path.remove(bench)
    return train_step(device)


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
