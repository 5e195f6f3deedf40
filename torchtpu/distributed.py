"""torch.distributed on tpu: the c10d backend "tpu" (implemented in csrc/distributed).

Ranks that are threads of one process, each on its own `tpu:i` of one PJRT client, run every
collective as one StableHLO collective across their devices. Ranks in different processes on a
plugin that cannot span processes (XLA:CPU) send the same collectives through Gloo on host
copies. `transport(group)` says which one a group uses.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from . import _C

# This process, unique across hosts: ranks that all report it share one PJRT client.
_PROCESS = f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex}"
_transports: dict[str, str] = {}


def _meet(store: dist.Store, rank: int, size: int) -> tuple[str, bool]:
    """The group's id (the same on every rank, new for every init) and whether all of its
    ranks live in this process."""
    # Every init of a group on this store bumps the counter by `size`: its generation.
    gen = (store.add("inits", 1) - 1) // size
    if rank == 0:
        store.set(f"uid/{gen}", uuid.uuid4().hex)
    store.set(f"proc/{gen}/{rank}", _PROCESS)
    uid = store.get(f"uid/{gen}").decode()
    procs = {store.get(f"proc/{gen}/{r}").decode() for r in range(size)}
    return uid, procs == {_PROCESS}


def _create(opts: Any, backend_options: Any) -> Any:
    store, rank, size = opts.store, opts.group_rank, opts.group_size
    timeout: timedelta = opts.timeout
    uid, in_process = _meet(dist.PrefixStore("torchtpu/", store), rank, size)
    host = None
    if not in_process:
        host = dist.ProcessGroupGloo(dist.PrefixStore("torchtpu-gloo/", store), rank, size, timeout)
    _transports[opts.group_id] = "xla" if host is None else "gloo"
    return _C._dist_backend(rank, size, timeout.total_seconds(), uid, host)


def transport(group: dist.ProcessGroup | None = None) -> str:
    """How `group`'s tpu collectives travel: 'xla' (StableHLO collectives across the devices of
    one client) or 'gloo' (host copies through Gloo)."""
    pg = group if group is not None else dist.group.WORLD
    return _transports[dist.distributed_c10d._get_process_group_name(pg)]


def register() -> None:
    if "TPU" not in dist.Backend._plugins:
        dist.Backend.register_backend("tpu", _create, extended_api=True, devices=["tpu"])


def local_rank_device() -> torch.device | None:
    """tpu:LOCAL_RANK under torchrun when this process has that device."""
    local = os.environ.get("LOCAL_RANK")
    if local is None or not local.isdigit():
        return None
    index = int(local)
    return torch.device("tpu", index) if index < torch.tpu.device_count() else None
