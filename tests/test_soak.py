"""No leaks over time: the finetune_llama.py training loop (forward, backward, AdamW,
`loss.item()`) holds the same tpu memory, live buffers and loaded executables at step 100 as at
step 70. Warm-up ends by a rule: a scalar that recurs is kept from its first use after its last
buffer died, so one step after a sync every recurring scalar is kept, whatever the timing
(AdamW's bias corrections, new every step, are never kept). benchmarks/soak.py runs 1,000
steps."""

import os
import sys
import time
from typing import Any

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


def footprint() -> dict[str, Any]:
    """After a sync, read until two readings 50 ms apart agree: the runtime drops the buffers a
    finished program held on its own threads, a moment after the sync returns."""
    torch.tpu.synchronize()

    def read() -> dict[str, Any]:
        return {
            "memory": torch.tpu.memory_allocated(),
            "buffers": torch.tpu.memory_stats()["allocation.all.current"],
            "programs": torchtpu.metrics()["loaded_programs"],
            "live": torchtpu._C._live_buffers(torch.tpu.current_device()),
        }

    now = read()
    for _ in range(20):
        time.sleep(0.05)
        now, before = read(), now
        if now == before:
            break
    return now


def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The live buffers by type that changed in number: what a failure here is made of."""
    return {
        k: after.get(k, 0) - before.get(k, 0)
        for k in before | after
        if after.get(k, 0) != before.get(k, 0)
    }


def test_training_loop_footprint_is_flat(device):
    step = llama_step(device)
    losses = [step() for _ in range(40)]
    footprint()  # the step after a sync records a trace of its own once: its program is warm too
    losses += [step() for _ in range(30)]
    at_70 = footprint()
    losses += [step() for _ in range(30)]
    at_100 = footprint()
    why = {k: (at_70[k], at_100[k]) for k in ("memory", "buffers")}
    why["grown"] = grown(at_70["live"], at_100["live"])
    assert at_100["programs"] == at_70["programs"]
    # Scalars used to be kept on any reuse while a buffer of them lived: whether a constant had
    # joined the cache by step 70 depended on whether the last program holding it had finished,
    # and on a loaded machine step 100 once held 7 buffers more. Now the footprint is exact.
    assert at_100["buffers"] == at_70["buffers"], why
    assert at_100["memory"] == at_70["memory"], why
    assert losses[-1] < losses[0]  # it trained


def uploads() -> int:
    return torchtpu.metrics()["scalar_uploads"]


def test_a_recurring_scalar_is_kept_however_its_uses_overlap(device):
    """A value used once per step is kept from its first use after a sync, whether each step's
    program had finished before the next step (a host read between them) or still held it."""
    x = torch.ones(1000, device=device)
    for value, read_each_step in ((0.37, True), (0.41, False)):
        ys = []
        for _ in range(3):
            y = x * value
            if read_each_step:
                y.cpu()  # the value's buffer dies before its next use
            ys.append(y)
        torch.tpu.synchronize()
        del ys, y
        (x * value).cpu()
        before = uploads()
        for _ in range(5):
            torch.testing.assert_close((x * value).cpu(), torch.full((1000,), value))
        assert uploads() == before, (value, read_each_step)
