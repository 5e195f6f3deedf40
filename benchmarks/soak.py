"""No leaks over time: the finetune_llama.py training step (forward, backward, AdamW,
`loss.item()`) for many steps in fused mode, beside PyTorch CPU eager in the same run. At each
checkpoint it prints the step time since the last checkpoint, tpu memory in use, live device
buffers, loaded executables and the process's resident memory. After warm-up every tpu column
but the time must stay flat (tests/test_soak.py checks a 100-step version).

python benchmarks/soak.py [--steps N]
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from llama_train import train_step

import torchtpu


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def soak(device: torch.device, checkpoints: list[int]) -> list[dict[str, float]]:
    step = train_step(device)
    rows, done, start = [], 0, time.perf_counter()
    for at in checkpoints:
        for _ in range(at - done):
            step()
        if device.type == "tpu":
            torch.tpu.synchronize()
        now = time.perf_counter()
        row = {"step": at, "ms": 1e3 * (now - start) / (at - done), "rss": rss_mib()}
        if device.type == "tpu":
            row["mem"] = torch.tpu.memory_allocated()
            row["buffers"] = torch.tpu.memory_stats()["allocation.all.current"]
            row["programs"] = torchtpu.metrics()["loaded_programs"]
        rows.append(row)
        done, start = at, time.perf_counter()
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    args = p.parse_args()
    checkpoints = sorted({c for c in (10, 100, 250, 500, args.steps) if c <= args.steps})
    torchtpu.set_mode("fused")
    ours = soak(torchtpu.get_device(), checkpoints)
    cpu = soak(torch.device("cpu"), checkpoints)
    print(
        "| step | tpu fused ms/step | tpu memory (B) | live buffers | loaded programs | "
        "RSS MiB | CPU eager ms/step | CPU RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for o, c in zip(ours, cpu):
        print(
            f"| {o['step']} | {o['ms']:.1f} | {o['mem']} | {o['buffers']} | {o['programs']} | "
            f"{o['rss']:.0f} | {c['ms']:.1f} | {c['rss']:.0f} |"
        )


if __name__ == "__main__":
    main()
