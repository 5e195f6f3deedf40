"""Every collective on 4 threaded ranks, each on its own tpu:i of one client (StableHLO
collectives), checked against Gloo on CPU tensors in the same group ("cpu:gloo,tpu:tpu").
Run by test_threaded.py with TORCHTPU_CPU_DEVICES=4; exits non-zero on the first mismatch."""

from __future__ import annotations

import sys
import threading
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torchtpu
from torchtpu.testing import threaded_ranks

WORLD = 4
DTYPES = [torch.float32, torch.int32, torch.bfloat16]
meet = threading.Barrier(WORLD, timeout=60)


def data(rank: int, shape: tuple[int, ...], dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


def same(tpu: torch.Tensor, cpu: torch.Tensor, what: str) -> None:
    got = tpu.cpu()
    tol = {"atol": 2e-2, "rtol": 2e-2} if got.dtype == torch.bfloat16 else {}
    torch.testing.assert_close(got, cpu, msg=lambda m: f"{what}: {m}", **tol)


def both(rank: int, shape: tuple[int, ...], dtype: torch.dtype, salt: int = 0):
    c = data(rank, shape, dtype, salt)
    return c, c.to("tpu")


def check_reductions(rank: int) -> None:
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
    for dtype in DTYPES:
        for op in ops:
            c, t = both(rank, (3, 5), dtype, salt=int(op))
            if op == dist.ReduceOp.PRODUCT:
                c, t = c.sign(), t.sign()  # keep products in range
            dist.all_reduce(c, op)
            dist.all_reduce(t, op)
            same(t, c, f"all_reduce {op} {dtype}")
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        c, t = both(rank, (7,), torch.int64, salt=3)
        dist.all_reduce(c, op)
        dist.all_reduce(t, op)
        same(t, c, f"all_reduce {op}")
    # AVG and PREMUL_SUM: Gloo has neither, so compare with SUM scaled.
    c, t = both(rank, (4, 4), torch.float32)
    dist.all_reduce(c)
    dist.all_reduce(t, dist.ReduceOp.AVG)
    same(t, c / WORLD, "all_reduce AVG")
    c, t = both(rank, (4,), torch.float32)
    dist.all_reduce(c)
    dist.all_reduce(t, dist._make_nccl_premul_sum(0.25))
    same(t, c * 0.25, "all_reduce PREMUL_SUM")
    for root in (0, 3):
        c, t = both(rank, (2, 3), torch.float32)
        dist.reduce(c, root, dist.ReduceOp.MAX)
        dist.reduce(t, root, dist.ReduceOp.MAX)
        if rank == root:
            same(t, c, "reduce")


def check_moves(rank: int) -> None:
    for dtype in DTYPES + [torch.bool]:
        c, t = both(rank, (2, 3), dtype) if dtype != torch.bool else (None, None)
        if dtype == torch.bool:
            c = data(rank, (5,), torch.int32) > 0
            t = c.to("tpu")
        dist.broadcast(c, 2)
        dist.broadcast(t, 2)
        same(t, c, f"broadcast {dtype}")
        co = [torch.empty_like(c) for _ in range(WORLD)]
        to = [torch.empty_like(t) for _ in range(WORLD)]
        dist.all_gather(co, c)
        dist.all_gather(to, t)
        for i in range(WORLD):
            same(to[i], co[i], f"all_gather {dtype}")
    ins = [data(rank, (2,), torch.float32, salt=1), data(rank, (3, 1), torch.float32, salt=2)]
    co = [[torch.empty_like(x) for x in ins] for _ in range(WORLD)]
    to = [[torch.empty_like(x, device="tpu") for x in ins] for _ in range(WORLD)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated, still used
        dist.all_gather_coalesced(co, ins)
        dist.all_gather_coalesced(to, [x.to("tpu") for x in ins])
    for r in range(WORLD):
        for i in range(len(ins)):
            same(to[r][i], co[r][i], "all_gather_coalesced")
    c, t = both(rank, (3, 2), torch.float32)
    co, to = torch.empty(12, 2), torch.empty(12, 2, device="tpu")
    dist.all_gather_into_tensor(co, c)
    dist.all_gather_into_tensor(to, t)
    same(to, co, "all_gather_into_tensor")
    c, t = both(rank, (8, 3), torch.float32)
    co, to = torch.empty(2, 3), torch.empty(2, 3, device="tpu")
    dist.reduce_scatter_tensor(co, c)
    dist.reduce_scatter_tensor(to, t)
    same(to, co, "reduce_scatter_tensor")
    dist.reduce_scatter_tensor(to, t, dist.ReduceOp.AVG)
    same(to, co / WORLD, "reduce_scatter_tensor AVG")
    ins = [data(rank, (3,), torch.float32, salt=j) for j in range(WORLD)]
    co, to = torch.empty(3), torch.empty(3, device="tpu")
    dist.reduce_scatter(co, ins)
    dist.reduce_scatter(to, [x.to("tpu") for x in ins])
    same(to, co, "reduce_scatter")
    # gather / scatter around root 1
    c, t = both(rank, (4,), torch.float32)
    cg = [torch.empty(4) for _ in range(WORLD)] if rank == 1 else None
    tg = [torch.empty(4, device="tpu") for _ in range(WORLD)] if rank == 1 else None
    dist.gather(c, cg, dst=1)
    dist.gather(t, tg, dst=1)
    if rank == 1:
        for i in range(WORLD):
            same(tg[i], cg[i], "gather")
    src = [data(9, (2, 2), torch.float32, salt=j) for j in range(WORLD)]
    co, to = torch.empty(2, 2), torch.empty(2, 2, device="tpu")
    dist.scatter(co, src if rank == 1 else None, src=1)
    dist.scatter(to, [x.to("tpu") for x in src] if rank == 1 else None, src=1)
    same(to, co, "scatter")


def check_all_to_all(rank: int) -> None:
    c, t = both(rank, (8, 3), torch.float32)
    co, to = torch.empty(8, 3), torch.empty(8, 3, device="tpu")
    dist.all_to_all_single(co, c)
    dist.all_to_all_single(to, t)
    same(to, co, "all_to_all_single")
    # Uneven: rank r sends (r + j) % 3 + 1 rows to rank j.
    send = [(rank + j) % 3 + 1 for j in range(WORLD)]
    recv = [(j + rank) % 3 + 1 for j in range(WORLD)]
    c, t = both(rank, (sum(send), 2), torch.float32)
    co, to = torch.empty(sum(recv), 2), torch.empty(sum(recv), 2, device="tpu")
    dist.all_to_all_single(co, c, recv, send)
    dist.all_to_all_single(to, t, recv, send)
    same(to, co, "all_to_all_single uneven")
    # Gloo has no list all_to_all: rank r expects chunk r of every rank j.
    ci = [data(rank, (j + 1,), torch.float32, salt=j) for j in range(WORLD)]
    to = [torch.empty(rank + 1, device="tpu") for _ in range(WORLD)]
    dist.all_to_all(to, [x.to("tpu") for x in ci])
    for j in range(WORLD):
        same(to[j], data(j, (rank + 1,), torch.float32, salt=rank), "all_to_all")


def check_p2p(rank: int) -> None:
    nxt, prv = (rank + 1) % WORLD, (rank - 1) % WORLD
    t = torch.full((3,), float(rank), device="tpu")
    r = torch.empty(3, device="tpu")
    ops = [dist.P2POp(dist.isend, t, nxt), dist.P2POp(dist.irecv, r, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    same(r, torch.full((3,), float(prv)), "batch_isend_irecv ring")
    if rank in (0, 1):
        if rank == 0:
            dist.send(torch.arange(5.0, device="tpu"), 1)
        else:
            got = torch.zeros(5, device="tpu")
            dist.recv(got, 0)
            same(got, torch.arange(5.0), "send/recv")
    dist.barrier()


def check_async_and_groups(rank: int) -> None:
    t = torch.full((64,), float(rank + 1), device="tpu")
    work = dist.all_reduce(t, async_op=True)
    other = (torch.ones(4, device="tpu") * rank).sum()  # work issued while the collective runs
    work.wait()
    same(t, torch.full((64,), 10.0), "async all_reduce")
    assert other.item() == 4 * rank
    fut = dist.all_reduce(t, async_op=True).get_future()
    (value,) = fut.wait()
    same(value, torch.full((64,), 40.0), "get_future")
    # Subgroups: even ranks and odd ranks.
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    mine = evens if rank % 2 == 0 else odds
    x = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(x, group=mine)
    same(x, torch.full((2,), 2.0 if rank % 2 == 0 else 4.0), "subgroup all_reduce")
    sub, _ = dist.new_subgroups(2)
    y = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(y, group=sub)
    same(y, torch.full((2,), 1.0 if rank < 2 else 5.0), "new_subgroups all_reduce")
    # Functional collectives, as DTensor issues them.
    z = torch.full((3,), float(rank), device="tpu")
    r = funcol.all_reduce(z, "sum", dist.group.WORLD)
    same(funcol.wait_tensor(r), torch.full((3,), 6.0), "functional all_reduce")
    g = funcol.all_gather_tensor(z, 0, dist.group.WORLD)
    same(g, torch.arange(4.0).repeat_interleave(3), "functional all_gather")
    s = funcol.reduce_scatter_tensor(torch.ones(8, device="tpu"), "sum", 0, dist.group.WORLD)
    same(s, torch.full((2,), 4.0), "functional reduce_scatter")
    # Object collectives and barriers use the CPU (Gloo) half of the group.
    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": i} for i in range(WORLD)], objs


def check_mesh(rank: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(x, group=mesh.get_group("tp"))
    expect = {0: 1.0, 1: 1.0, 2: 5.0, 3: 5.0}[rank]
    same(x, torch.full((2,), expect), "device mesh tp all_reduce")
    # A 2-D step: partial results summed over tp, then averaged over dp. In fused mode each
    # collective runs inside a program with its neighbour ops (a trace holds one group's
    # collectives, so it is cut where the group changes): none runs as a program of its own.
    tp, dp = mesh.get_group("tp"), mesh.get_group("dp")
    for i in range(4):
        if i == 2:  # count the last two steps
            meet.wait()
            if rank == 0:
                torchtpu.reset_metrics()
            meet.wait()
        y = torch.full((3,), float(rank + 1), device="tpu") * (i + 1)
        dist.all_reduce(y, group=tp)  # 3(i+1) on ranks 0 and 1, 7(i+1) on ranks 2 and 3
        y = y + 1
        dist.all_reduce(y, dist.ReduceOp.AVG, group=dp)
        same(y * 2, torch.full((3,), 10.0 * (i + 1) + 2), f"2-D mesh step {i}")
    meet.wait()
    counts = torchtpu.metrics()
    meet.wait()
    if torchtpu.get_mode() == "fused":
        got = (counts["fused_collectives"], counts["lone_collectives"])
        assert got == (2 * 2 * WORLD, 0), f"2-D mesh collectives (fused, lone): {got}"


def check_no_donation_into_collectives(rank: int) -> None:
    # A 1 MiB buffer that only the trace holds after an in-place all_reduce would be donated to
    # an ordinary op's result; a collective's result must get a fresh buffer (XLA:CPU would
    # reduce into a temporary and copy it over the donated one).
    meet.wait()
    if rank == 0:
        torchtpu.reset_metrics()
    meet.wait()
    x = torch.full((1 << 18,), float(rank), device="tpu")
    torch.tpu.synchronize()
    dist.all_reduce(x)
    same(x, torch.full((1 << 18,), float(sum(range(WORLD)))), "1 MiB all_reduce")
    meet.wait()
    donated = torchtpu.metrics()["donated_buffers"]
    meet.wait()
    assert donated == 0, f"{donated} buffers donated to collectives"


def check_profiled(rank: int) -> None:
    # torch.profiler shows a program holding a collective on every rank's device: named after
    # the collective when it runs alone (strict mode), as a fused program when recorded.
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
    if rank == 0:
        prof.start()
    meet.wait()
    x = torch.full((6,), float(rank), device="tpu") * 2
    dist.all_reduce(x)
    same(x, torch.full((6,), 2.0 * sum(range(WORLD))), "profiled all_reduce")
    torch.tpu.synchronize()
    meet.wait()
    if rank != 0:
        return
    prof.stop()
    fused = torchtpu.get_mode() == "fused"
    rows = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    named = [e for e in rows if e.name.startswith("fused program" if fused else "all_reduce")]
    assert {e.device_index for e in named} == set(range(WORLD)), [(e.name, e.device_index)
                                                                 for e in rows]
    assert all(e.device_time_total > 0 for e in named), [e.device_time_total for e in named]


def body(rank: int, world: int) -> str:
    assert torchtpu.distributed.transport() == "xla"
    for check in (check_reductions, check_moves, check_all_to_all, check_p2p,
                  check_async_and_groups, check_mesh, check_no_donation_into_collectives,
                  check_profiled):
        check(rank)
    return "ok"


if __name__ == "__main__":
    torch.distributed.Backend.default_device_backend_map  # noqa: B018 (import side effects)
    results = threaded_ranks.run(body, WORLD, backend="cpu:gloo,tpu:tpu")
    print("threaded collectives:", results, torchtpu.metrics()["compiles"], "compiles")
    sys.exit(0 if results == ["ok"] * WORLD else 1)
