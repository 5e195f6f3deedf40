"""all_reduce bus bandwidth, 1 MB to 256 MB (float32), measured side by side in one run:

- tpu, 2 processes: the tpu backend across processes (XLA:CPU cannot span them: Gloo on host copies)
- Gloo, 2 processes: PyTorch's Gloo on CPU tensors
- tpu, 2 threads: ranks as threads on tpu:0 and tpu:1 of one client, one StableHLO all_reduce
- Gloo, 2 threads: Gloo on CPU tensors with the same threaded ranks

The two process columns share one pair of processes, and the two thread columns one pair of
threads: each rank joins a "cpu:gloo,tpu:tpu" group and alternates a tpu all_reduce with a Gloo
all_reduce of a CPU tensor, swapping which goes first every iteration, so machine noise falls on
both alike. Bus bandwidth = bytes * 2 (n - 1) / n / seconds (NCCL's convention). Each figure is the
median of the timed iterations; a tpu iteration ends with a device synchronize.

python benchmarks/allreduce_bandwidth.py [--sizes-mb 1 4 16 64 256] [--iters N]
"""

from __future__ import annotations

import argparse
import os
import queue
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
BACKEND = "cpu:gloo,tpu:tpu"


def iterations(mb: int, iters: int | None) -> int:
    return iters or (40 if mb <= 16 else 10)


def timed_pair(device: str, mb: int, iters: int) -> tuple[float, float]:
    """Median seconds of one all_reduce of `mb` MB on `device` (tpu) and on a CPU tensor (Gloo),
    alternated."""
    n = mb * (1 << 20) // 4
    xs = {"tpu": torch.ones(n, device=device), "gloo": torch.ones(n)}
    times: dict[str, list[float]] = {"tpu": [], "gloo": []}
    for i in range(iters + 1):
        for kind in ("tpu", "gloo") if i % 2 else ("gloo", "tpu"):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(xs[kind])
            if kind == "tpu":
                torch.tpu.synchronize()
            if i:  # the first is a warm-up (compile, connections)
                times[kind].append(time.perf_counter() - start)
    expected = torch.tensor(float(WORLD)) ** (iters + 1)  # inf past float32's range, as the sums
    for x in xs.values():
        assert x[:1].item() == expected.item()
    return statistics.median(times["tpu"]), statistics.median(times["gloo"])


def process_rank(rank: int, port: int, sizes: list[int], iters: int | None, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(BACKEND, rank=rank, world_size=WORLD)
    out = [timed_pair("tpu:0", mb, iterations(mb, iters)) for mb in sizes]
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()


def in_processes(sizes: list[int], iters: int | None) -> list[tuple[float, float]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    os.environ["TORCHTPU_CPU_DEVICES"] = "1"
    procs = [ctx.Process(target=process_rank, args=(r, port, sizes, iters, q))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 1800
    while True:  # a rank that fails must not leave this waiting for its result
        try:
            out = q.get(timeout=5)
            break
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs) or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                raise RuntimeError("a rank failed (its traceback is above) or timed out")
    for p in procs:
        p.join(60)
    os.environ["TORCHTPU_CPU_DEVICES"] = "2"
    return out


def in_threads(sizes: list[int], iters: int | None) -> list[tuple[float, float]]:
    def body(rank: int, world: int) -> list[tuple[float, float]]:
        return [timed_pair(f"tpu:{rank}", mb, iterations(mb, iters)) for mb in sizes]

    return threaded_ranks.run(body, WORLD, timeout_s=1800, backend=BACKEND)[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    p.add_argument("--iters", type=int, default=None,
                   help="timed iterations per size (default 40 up to 16 MB, 10 above)")
    args = p.parse_args()
    procs = in_processes(args.sizes_mb, args.iters)
    threads = in_threads(args.sizes_mb, args.iters)
    columns = {
        "tpu, 2 processes (gloo transport)": [t for t, _ in procs],
        "Gloo, 2 processes": [g for _, g in procs],
        "tpu, 2 threads (StableHLO all_reduce)": [t for t, _ in threads],
        "Gloo, 2 threads": [g for _, g in threads],
    }
    factor = 2 * (WORLD - 1) / WORLD
    print("all_reduce bus bandwidth, GB/s (median of the timed iterations)\n")
    print("| MB | " + " | ".join(columns) + " | processes: tpu / Gloo |")
    print("|---|" + "---|" * (len(columns) + 1))
    for i, mb in enumerate(args.sizes_mb):
        cells = [f"{mb * (1 << 20) * factor / col[i] / 1e9:.2f}" for col in columns.values()]
        ratio = procs[i][1] / procs[i][0]
        print(f"| {mb} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
