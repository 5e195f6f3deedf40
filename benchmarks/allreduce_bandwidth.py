"""all_reduce bus bandwidth, 1 MB to 256 MB (float32), measured side by side in one run:

- tpu, 2 processes: the tpu backend across processes (XLA:CPU cannot span them: Gloo on host copies)
- Gloo, 2 processes: PyTorch's Gloo on CPU tensors
- tpu, 2 threads: ranks as threads on tpu:0 and tpu:1 of one client, one StableHLO all_reduce
- Gloo, 2 threads: Gloo on CPU tensors with the same threaded ranks

Bus bandwidth = bytes * 2 (n - 1) / n / seconds (NCCL's convention). Each figure is the median of
the timed iterations, each ended by a device synchronize.

python benchmarks/allreduce_bandwidth.py [--sizes-mb 1 4 16 64 256] [--iters N]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time

os.environ.setdefault("TORCHTPU_CPU_DEVICES", "2")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torchtpu  # noqa: F401
from torchtpu.testing import threaded_ranks

WORLD = 2


def timed(device: str, mb: int, iters: int) -> float:
    """Median seconds of one all_reduce of `mb` MB on this rank's device."""
    n = mb * (1 << 20) // 4
    x = torch.ones(n, device=device)
    sync = torch.tpu.synchronize if device.startswith("tpu") else (lambda: None)
    times = []
    for i in range(iters + 1):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(x)
        sync()
        if i:  # the first is a warm-up (compile, connections)
            times.append(time.perf_counter() - start)
    assert x[:1].item() == WORLD ** (iters + 1)
    return statistics.median(times)


def process_rank(rank: int, port: int, backend: str, sizes: list[int], iters: int, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=WORLD)
    device = "tpu:0" if backend == "tpu" else "cpu"
    out = [timed(device, mb, iters) for mb in sizes]
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def in_processes(backend: str, sizes: list[int], iters: int) -> list[float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    env = {"TORCHTPU_CPU_DEVICES": "1"}
    os.environ.update(env)
    procs = [ctx.Process(target=process_rank, args=(r, port, backend, sizes, iters, q))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    out = q.get(timeout=1800)
    for p in procs:
        p.join(60)
    os.environ["TORCHTPU_CPU_DEVICES"] = "2"
    return out


def in_threads(backend: str, sizes: list[int], iters: int) -> list[float]:
    def body(rank: int, world: int) -> list[float]:
        device = f"tpu:{rank}" if backend == "tpu" else "cpu"
        return [timed(device, mb, iters) for mb in sizes]

    return threaded_ranks.run(body, WORLD, timeout_s=1800, backend=backend)[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    p.add_argument("--iters", type=int, default=5)
    args = p.parse_args()
    columns = {
        "tpu, 2 processes (gloo transport)": in_processes("tpu", args.sizes_mb, args.iters),
        "Gloo, 2 processes": in_processes("gloo", args.sizes_mb, args.iters),
        "tpu, 2 threads (StableHLO all_reduce)": in_threads("tpu", args.sizes_mb, args.iters),
        "Gloo, 2 threads": in_threads("gloo", args.sizes_mb, args.iters),
    }
    factor = 2 * (WORLD - 1) / WORLD
    print("all_reduce bus bandwidth, GB/s (median of", args.iters, "iterations)\n")
    print("| MB | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for i, mb in enumerate(args.sizes_mb):
        cells = [f"{mb * (1 << 20) * factor / col[i] / 1e9:.2f}" for col in columns.values()]
        print(f"| {mb} | " + " | ".join(cells) + " |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
