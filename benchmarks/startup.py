"""Time to the first training step of the finetune_llama.py model, with a cold and with a warm
persistent compile cache (each in a fresh process), in strict and fused mode, beside PyTorch CPU
eager.

python benchmarks/startup.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

STEP = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch, torchtpu
sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
from transformers import LlamaForCausalLM
from instruct_data import batches
from llama_config import small_llama_config
device = torch.device(sys.argv[1])
t1 = time.perf_counter()
torch.manual_seed(0)
model = LlamaForCausalLM(small_llama_config()).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
batch = {k: v.to(device) for k, v in batches(1, 16, 40, seed=0)[0].items()}
loss = model(**batch).loss
loss.backward()
opt.step()
loss.item()
if device.type == "tpu":
    torch.tpu.synchronize()
t2 = time.perf_counter()
s = torchtpu.cache_stats()
print(json.dumps({"import": t1 - t0, "first_step": t2 - t1, "compiles": s["compiles"],
                  "disk_hits": torchtpu.metrics()["disk_cache_hits"]}))
"""


def run(device: str, cache: str, mode: str = "strict") -> dict:
    env = dict(os.environ, TORCHTPU_CACHE_DIR=cache, TORCHTPU_MODE=mode)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    out = subprocess.run(
        [sys.executable, "-c", STEP, device],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = []
    for mode in ("strict", "fused"):
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "cache")
            rows.append((f"tpu {mode}, cold cache", run("tpu", cache, mode)))
            rows.append((f"tpu {mode}, warm cache", run("tpu", cache, mode)))
    rows.append(("PyTorch CPU eager", run("cpu", "off")))
    print(f"{'':26s} {'first step s':>13s} {'import s':>9s} {'compiles':>9s} {'disk hits':>10s}")
    for name, r in rows:
        print(
            f"{name:26s} {r['first_step']:13.2f} {r['import']:9.2f} {r['compiles']:9d} "
            f"{r['disk_hits']:10d}"
        )
    for k in (0, 2):
        cold, warm = rows[k][1]["first_step"], rows[k + 1][1]["first_step"]
        print(f"{rows[k][0].split(',')[0]}: warm / cold = {warm / cold:.0%}")


if __name__ == "__main__":
    main()
