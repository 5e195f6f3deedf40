"""DDP on 2 threaded ranks (each on its own tpu:i of one client), checked against one process on
CPU. In fused mode the gradient all-reduce is recorded like any op, so it must run inside the
backward's program: no collective may run as a program of its own. Then ranks that cut their
traces differently (rank 0 reads a value rank 1 does not): right values, and once they run the
same programs again, their collectives are fused again.

python ddp_threaded.py; prints "PASS ddp_threaded <fused_collectives> <lone_collectives>" and
"PASS uneven_reads"."""

from __future__ import annotations

import copy
import threading

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torchtpu
from torchtpu.testing import threaded_ranks

WORLD, STEPS, MEASURED = 2, 6, 3  # the last MEASURED steps are counted


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


INIT = model()  # built once: the ranks' threads share the global RNG
meet = threading.Barrier(WORLD, timeout=60)
counted: dict[str, int] = {}


def body(rank: int, world: int) -> list[torch.Tensor]:
    dev = torch.device("tpu", rank)
    m = DDP(copy.deepcopy(INIT).to(dev))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for step in range(STEPS):
        if step == STEPS - MEASURED:
            meet.wait()
            if rank == 0:
                torchtpu.reset_metrics()
            meet.wait()
        x, y = batch(step, rank)
        loss = torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
    params = [p.detach().cpu() for p in m.parameters()]  # reads: every trace runs
    meet.wait()
    if rank == 0:
        counted.update(torchtpu.metrics())
    return params


def uneven_reads(rank: int, world: int) -> list[float]:
    dev = torch.device("tpu", rank)
    x = torch.full((4,), rank + 1.0, device=dev)
    y = x * 2
    dist.all_reduce(y)  # 2 + 4 = 6
    if rank == 0:
        y.cpu()  # rank 0 runs its trace here, rank 1 does not
    z = y + 1
    dist.all_reduce(z)  # 14
    for i in range(5):
        if i == 2:
            meet.wait()
            if rank == 0:
                torchtpu.reset_metrics()
            meet.wait()
        z = z / 2
        dist.all_reduce(z)  # the sum of both halves: z again
        z.cpu()
    meet.wait()
    if rank == 0:
        counted.update(torchtpu.metrics())
    return z.cpu().tolist()


def main() -> None:
    got = threaded_ranks.run(body, WORLD)
    ref = copy.deepcopy(INIT)  # one process: the mean gradient of every rank's batch
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(STEPS):
        opt.zero_grad()
        for r in range(WORLD):
            x, y = batch(step, r)
            (torch.nn.functional.mse_loss(ref(x), y) / WORLD).backward()
        opt.step()
    for params in got:
        for a, b in zip(params, ref.parameters()):
            torch.testing.assert_close(a, b.detach(), atol=1e-5, rtol=1e-5)
    fused, lone = counted["fused_collectives"], counted["lone_collectives"]
    if torchtpu.get_mode() == "fused":
        # One gradient bucket per step on every rank, inside the backward's program.
        assert (fused, lone) == (WORLD * MEASURED, 0), counted
    else:
        assert fused == 0 and lone >= WORLD * MEASURED, counted
    print(f"PASS ddp_threaded {fused} {lone}")

    got = threaded_ranks.run(uneven_reads, WORLD)
    assert got == [[14.0] * 4] * WORLD, got
    if torchtpu.get_mode() == "fused":  # the last 3 rounds run the same programs on both ranks
        assert (counted["fused_collectives"], counted["lone_collectives"]) == (WORLD * 3, 0), counted
    print("PASS uneven_reads")


if __name__ == "__main__":
    main()
