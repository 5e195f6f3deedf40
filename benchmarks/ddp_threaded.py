"""DDP step time of the examples' Llama (4 layers, hidden 128, global batch 16 x 40 tokens) on 2
ranks that are threads of one process, each on its own tpu:i of one client (StableHLO
collectives), in fused mode: gradient all-reduces recorded into the backward's program (the
default) beside all-reduces that are flush points (TORCHTPU_FUSE_COLLECTIVES=0), and one rank on
one device. Each figure is one subprocess; programs, lone collectives and compiles are per
step, after two warm-up steps.

python benchmarks/ddp_threaded.py [--steps N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")

STEP = r"""
import copy, sys, time, torch, torch.distributed as dist
sys.path.insert(0, EXAMPLES)
from instruct_data import batches
from llama_config import small_llama_config
from transformers import LlamaForCausalLM
import torchtpu
from torchtpu.testing import threaded_ranks

torch.manual_seed(0)
INIT = LlamaForCausalLM(small_llama_config())
DATA = batches(STEPS, batch_size=16, seq_len=40, seed=0)
out = {}

def body(rank, world):
    dev = torch.device("tpu", rank)
    model = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(INIT).to(dev))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    stamps = []
    for i, batch in enumerate(DATA):
        if i == 2 and rank == 0:
            torchtpu.reset_metrics()
        opt.zero_grad(set_to_none=True)
        loss = model(**{k: v[rank::world].to(dev) for k, v in batch.items()}).loss
        loss.backward()
        opt.step()
        loss.item()
        stamps.append(time.perf_counter())
    if rank == 0:
        m = torchtpu.metrics()
        n = len(stamps) - 2
        out["ms"] = (stamps[-1] - stamps[1]) / n * 1e3
        out["programs"] = m["executions"] / n
        out["lone"] = m["lone_collectives"] / n / world
        out["compiles"] = m["compiles"] / n
    return None

threaded_ranks.run(body, WORLD, timeout_s=1200)
print(f"RESULT {out['ms']:.1f} {out['programs']:.1f} {out['lone']:.1f} {out['compiles']:.1f}")
"""


def run(world: int, fuse: bool, steps: int) -> tuple[float, ...]:
    env = dict(os.environ, TORCHTPU_MODE="fused", TORCHTPU_CPU_DEVICES=str(max(world, 1)),
               TORCHTPU_FUSE_COLLECTIVES="1" if fuse else "0")
    code = (STEP.replace("STEPS", str(steps)).replace("WORLD", str(world))
            .replace("EXAMPLES", repr(EXAMPLES)))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=1800, check=False)
    line = [x for x in (p.stdout + p.stderr).splitlines() if x.startswith("RESULT")]
    if not line:
        raise RuntimeError((p.stdout + p.stderr)[-3000:])
    return tuple(float(x) for x in line[0].split()[1:])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    print("| ranks (threads) | all-reduces | ms/step | programs/step | lone collectives/rank/step "
          "| compiles/step |")
    print("|---|---|---|---|---|---|")
    for world, fuse, what in [(1, True, "none (one device)"), (2, True, "in the backward's program"),
                              (2, False, "flush points")]:
        ms, programs, lone, compiles = run(world, fuse, args.steps)
        print(f"| {world} | {what} | {ms:.1f} | {programs:.1f} | {lone:.1f} | {compiles:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
