"""DDP step time of the examples' Llama (4 layers, hidden 128, global batch 16 x 40 tokens) on
1, 2 and 4 processes under torchrun, beside PyTorch CPU eager DDP (Gloo) on the same processes.
The global batch is fixed, so more processes means fewer rows each; on a 2-core machine 4
processes oversubscribe the cores. Each figure is one run of examples/distributed_finetune.py.

python benchmarks/ddp_llama.py [--steps N] [--procs 1 2 4]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")

CPU_DDP = r"""
import sys, time, torch, torch.distributed as dist
sys.argv = ["x"]
from instruct_data import batches
from llama_config import small_llama_config
from transformers import LlamaForCausalLM
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(LlamaForCausalLM(small_llama_config()))
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
stamps = []
for batch in batches(STEPS, batch_size=16, seq_len=40, seed=0):
    opt.zero_grad(set_to_none=True)
    loss = model(**{k: v[rank::world] for k, v in batch.items()}).loss
    loss.backward()
    opt.step()
    loss.item()
    stamps.append(time.perf_counter())
t = stamps[2:]
if rank == 0:
    print(f"{(t[-1] - t[0]) / (len(t) - 1) * 1e3:.1f} ms/step")
dist.destroy_process_group()
"""


def torchrun(n: int, args: list[str]) -> float:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           str(n), *args]
    out = subprocess.run(cmd, cwd=EXAMPLES, capture_output=True, text=True, timeout=1800,
                         check=False)
    m = re.search(r"([\d.]+) ms/step", out.stdout + out.stderr)
    if not m:
        raise RuntimeError((out.stdout + out.stderr)[-3000:])
    return float(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    args = p.parse_args()
    script = os.path.join(EXAMPLES, "_cpu_ddp_bench.py")
    with open(script, "w") as f:
        f.write(CPU_DDP.replace("STEPS", str(args.steps)))
    try:
        print("| processes | tpu DDP ms/step | PyTorch CPU eager DDP (Gloo) ms/step |")
        print("|---|---|---|")
        for n in args.procs:
            ours = torchrun(n, ["distributed_finetune.py", "--parallel", "ddp", "--steps",
                                str(args.steps)])
            cpu = torchrun(n, [script])
            print(f"| {n} | {ours:.1f} | {cpu:.1f} |", flush=True)
    finally:
        os.remove(script)


if __name__ == "__main__":
    main()
