"""Fault scenarios, run by test_faults.py in a subprocess each (threaded ranks or torchrun).

python faults.py <scenario>; prints "PASS <scenario>" when the expected error was seen."""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torchtpu
from torchtpu.testing import threaded_ranks


def fused() -> bool:
    """In fused mode a collective is recorded like any op (issued, as on an NCCL stream): it runs,
    and its errors surface, at the next read of the trace that holds it. Its own results are then
    lost (reading them raises the error again); every other tensor survives."""
    return torchtpu.get_mode() == "fused"


def threaded_mismatch() -> None:
    def body(rank: int, world: int) -> str:
        t = torch.ones(4, device="tpu")
        other = torch.arange(3.0, device="tpu") * 2
        other.cpu()
        try:
            result = t if rank == 0 else torch.empty(8, device="tpu")
            if rank == 0:
                dist.all_reduce(t)
            else:
                dist.all_gather_into_tensor(result, t)
            result.cpu()  # where a recorded collective runs
        except dist.DistBackendError as e:
            msg = str(e)
            assert "rank 0: all_reduce(sum) tensor<4xf32>" in msg, msg
            assert "rank 1: all_gather tensor<4xf32>" in msg, msg
            if not fused() or rank == 1:  # t is not the collective's result on rank 1
                assert t.cpu().tolist() == [1.0] * 4  # the rank's tensors survive
            assert other.cpu().tolist() == [0.0, 2.0, 4.0]
            return "raised"
        return "no error"

    got = threaded_ranks.run(body, 2)
    assert got == ["raised", "raised"], got


def threaded_dead_rank() -> None:
    def body(rank: int, world: int) -> str:
        x = torch.full((3,), 2.0, device="tpu")
        other = x + 1
        other.cpu()
        if rank == 1:
            return "died"  # never issues the collective
        start = time.monotonic()
        try:
            dist.all_reduce(x)
            x.cpu()  # where a recorded collective runs
        except dist.DistBackendError as e:
            assert "timed out" in str(e) and "ranks 1 never issued it" in str(e), str(e)
            assert time.monotonic() - start < 10
            if not fused():
                assert x.cpu().tolist() == [2.0] * 3
            assert other.cpu().tolist() == [3.0] * 3
            return "raised"
        return "no error"

    assert threaded_ranks.run(body, 2, group_timeout_s=2)[0] == "raised"


def bad_input() -> None:
    def body(rank: int, world: int) -> str:
        t = torch.ones(4, device="tpu")
        try:
            dist.all_gather_into_tensor(torch.empty(5, device="tpu"), t)
        except ValueError as e:
            assert "world_size times input tensor size" in str(e), str(e)
        else:
            raise AssertionError("wrong-sized output accepted")
        try:
            dist.all_reduce(torch.ones(2, dtype=torch.float32, device="tpu"), dist.ReduceOp.BAND)
        except ValueError as e:
            assert "integer" in str(e), str(e)
        else:
            raise AssertionError("BAND on floats accepted")
        dist.all_reduce(t)  # the group still works afterwards
        assert t.cpu().tolist() == [2.0] * 4
        return "ok"

    assert threaded_ranks.run(body, 2) == ["ok", "ok"]


def torchrun_dead_rank() -> None:
    # Under torchrun (2 processes, host transport): rank 1 dies before the collective.
    dist.init_process_group("tpu", timeout=datetime.timedelta(seconds=5))
    rank = dist.get_rank()
    x = torch.full((3,), 2.0, device=torchtpu.get_device())
    dist.all_reduce(x)  # both alive
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(x)
        dist.all_reduce(x)
    except dist.DistBackendError:
        assert time.monotonic() - start < 30
        assert x.cpu().tolist() == [4.0] * 3
        print("PASS torchrun_dead_rank", flush=True)
        os._exit(0)
    raise AssertionError("no error from a dead peer")


def torchrun_mismatch() -> None:
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: PyTorch's wrapper checks every collective through the store.
    dist.init_process_group("tpu", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    t = torch.ones(4, device=torchtpu.get_device())
    try:
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, 0)
    except RuntimeError as e:
        msg = str(e)
        assert "ALLREDUCE" in msg and "BROADCAST" in msg, msg
        print(f"PASS torchrun_mismatch rank {rank}", flush=True)
        os._exit(0)
    raise AssertionError("mismatch not detected")


def torchrun_backend_strings() -> None:
    # Not a fault: the ways of naming the backend all reach it (tpu tensors). With no backend
    # the default group is "cpu:gloo,tpu:tpu" (PyTorch alone would map only the accelerator):
    # CPU collectives work too, and DDP builds on it with and without device_ids.
    dist.init_process_group()
    assert dist.get_backend() == "cpu:gloo,tpu:tpu", dist.get_backend()
    rank = dist.get_rank()
    device = torchtpu.get_device()
    c = torch.full((2,), rank + 1.0)
    dist.all_reduce(c)
    assert c.tolist() == [3.0, 3.0], c
    for kw in ({}, {"device_ids": [device.index]}):
        torch.manual_seed(rank)  # DDP broadcasts rank 0's weights
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).to(device), **kw)
        model(torch.full((3, 4), rank + 1.0, device=device)).sum().backward()
        grads = [torch.zeros(2, 4, device=device) for _ in range(2)]
        dist.all_gather(grads, model.module.weight.grad)
        assert torch.equal(grads[0].cpu(), grads[1].cpu()), grads  # averaged over the ranks
        assert torch.allclose(grads[0].cpu(), torch.full((2, 4), 3 * 1.5)), grads
    mixed = dist.new_group(backend="cpu:gloo,tpu:tpu")
    for group in (None, mixed, dist.new_group(backend="tpu")):
        t = torch.full((2,), rank + 1.0, device=device)
        dist.all_reduce(t, group=group)
        assert t.cpu().tolist() == [3.0, 3.0], t
        objs = [None, None]
        dist.all_gather_object(objs, {"rank": rank}, group=group)  # tpu bytes or Gloo
        assert objs == [{"rank": 0}, {"rank": 1}], objs
        dist.barrier(group=group)
    c = torch.full((2,), rank + 1.0)
    dist.all_reduce(c, group=mixed)
    assert c.tolist() == [3.0, 3.0]
    # The host transport reduces a buffer in place only when nothing else holds it.
    a = torch.full((1000,), rank + 1.0, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    view = a[10:20]
    dist.all_reduce(a, dist.ReduceOp.AVG, async_op=True).wait()
    assert torch.equal(a.cpu(), torch.full((1000,), 1.5)), a
    assert torch.equal(b.cpu(), torch.full((1000,), rank + 1.0)), b
    assert torch.equal(view.cpu(), torch.full((10,), 1.5))
    print(f"PASS torchrun_backend_strings rank {rank}", flush=True)
    dist.destroy_process_group()


def torchrun_destroy_after_collectives() -> None:
    # Not a fault: a group destroyed right after its last collective, with nothing left holding
    # the tensors but the collective's completion on a Gloo thread. Dropping them there would
    # wait for the GIL that the destroying caller holds while it joins that thread: a hang
    # that the test's timeout reports. Many groups make the narrow window likely to be hit.
    dist.init_process_group("tpu")
    rank = dist.get_rank()
    device = torchtpu.get_device()
    sums = []
    for i in range(int(os.environ.get("GROUPS", "150"))):
        group = dist.new_group(backend="tpu")
        t = torch.full((64,), rank + i, dtype=torch.float32, device=device)
        dist.all_reduce(t, group=group, async_op=True).wait()
        sums.append(t.sum())
        del t
        dist.destroy_process_group(group)
    assert [s.item() for s in sums] == [64.0 * (2 * i + 1) for i in range(len(sums))]
    print(f"PASS torchrun_destroy_after_collectives rank {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    name = sys.argv[1]
    globals()[name]()
    if not name.startswith("torchrun"):
        print(f"PASS {name}")
