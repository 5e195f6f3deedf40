"""Ranks as threads of one process, each on its own tpu:i of one PJRT client: the transport that
runs every collective as one StableHLO collective across those devices (tests, examples)."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


def run(fn: Callable[[int, int], Any], world_size: int, timeout_s: float = 120.0,
        backend: str = "tpu", group_timeout_s: float | None = None) -> list[Any]:
    """Runs fn(rank, world_size) in `world_size` threads after init_process_group(backend) with
    tpu:rank current in each (`group_timeout_s`: the group's collective timeout); returns their results in rank order. Raises the first rank's
    exception (with the other ranks' tracebacks in its notes)."""
    from torch.testing._internal.distributed import multi_threaded_pg

    world = multi_threaded_pg._install_threaded_pg()
    if not hasattr(world, "comms"):  # destroy_process_group reads it; the thread world lacks it
        world.comms = []
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    store = dist.HashStore()
    results: list[Any] = [None] * world_size
    errors: dict[int, tuple[BaseException, str]] = {}

    def body(rank: int) -> None:
        try:
            torch.tpu.set_device(rank)
            kw = {} if group_timeout_s is None else {"timeout": timedelta(seconds=group_timeout_s)}
            dist.init_process_group(backend, rank=rank, world_size=world_size, store=store, **kw)
            try:
                results[rank] = fn(rank, world_size)
            finally:
                dist.destroy_process_group()
        except BaseException as e:  # noqa: BLE001 (re-raised by the caller below)
            errors[rank] = (e, traceback.format_exc())

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world_size)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s)
        hung = [r for r, t in enumerate(threads) if t.is_alive()]
        if hung:
            raise TimeoutError(f"ranks {hung} still running after {timeout_s} s")
    finally:
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        multi_threaded_pg._uninstall_threaded_pg()
        del world
    if errors:
        rank = min(errors)
        err, _ = errors[rank]
        for r, (_, tb) in sorted(errors.items()):
            err.add_note(f"rank {r}:\n{tb}")
        raise err
    return results
