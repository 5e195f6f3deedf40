"""torch.distributed on tpu: the c10d backend "tpu" (implemented in csrc/distributed).

Three transports, one backend; `transport(group)` says which one a group uses:
- "xla": ranks that are threads of one process, each on its own `tpu:i` of one PJRT client,
  run every collective as one StableHLO collective across their devices (one execution).
- "xla-multiprocess": one process per device under torchrun on a plugin that spans processes
  (XLA:GPU): the client is created as node RANK of WORLD_SIZE and meets its peers through the
  torchrun store; every rank launches the same collective program on its own device.
- "gloo": processes on a plugin that cannot span them (XLA:CPU): the same collectives travel
  through Gloo on host copies.
"""

from __future__ import annotations

import functools
import inspect
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
    ours = dist.PrefixStore("torchtpu/", store)
    uid, in_process = _meet(ours, rank, size)
    host, device_ids, fuse = None, [], False
    if in_process:
        kind = "xla"
        # Collectives are recorded into fused traces, for subgroups too: a trace holds the
        # collectives of one group, whose ranks meet to run it as one replicated program.
        fuse = _fuse_collectives()
    elif _C._global_device_count() > torch.tpu.device_count():
        # The global device id of every rank's current device, exchanged through the store.
        kind = "xla-multiprocess"
        ours.set(f"device/{uid}/{rank}", str(_C._device_id(torch.tpu.current_device())))
        device_ids = [int(ours.get(f"device/{uid}/{r}")) for r in range(size)]
    else:
        kind = "gloo"
        host = dist.ProcessGroupGloo(dist.PrefixStore("torchtpu-gloo/", store), rank, size, timeout)
    _transports[opts.group_id] = kind
    return _C._dist_backend(rank, size, timeout.total_seconds(), uid, host, device_ids, fuse)


def _fuse_collectives() -> bool:
    """TORCHTPU_FUSE_COLLECTIVES=0 keeps every collective a flush point of fused mode."""
    return os.environ.get("TORCHTPU_FUSE_COLLECTIVES", "1") != "0"


def spans_processes(platform: str) -> bool:
    """Whether this process is one rank of a torchrun job whose PJRT client should span the
    job's processes (plugins that can: XLA:GPU; libtpu discovers its peers by itself)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    off = os.environ.get("TORCHTPU_MULTIPROCESS_CLIENT", "1") == "0"
    return platform == "cuda" and world > 1 and "MASTER_ADDR" in os.environ and not off


def init_multiprocess_client(plugin: str, platform: str) -> None:
    """Configures the client as node RANK of WORLD_SIZE, driving GPU LOCAL_RANK, meeting its
    peers through the torchrun store (MASTER_ADDR:MASTER_PORT) under the prefix 'torchtpu/pjrt/'."""
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          is_master=False, timeout=timedelta(seconds=300))
    _C._init_multiprocess(plugin, platform, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                          [int(os.environ.get("LOCAL_RANK", "0"))],
                          dist.PrefixStore("torchtpu/pjrt/", store))


def transport(group: dist.ProcessGroup | None = None) -> str:
    """How `group`'s tpu collectives travel: 'xla' (StableHLO collectives across the devices of
    one client) or 'gloo' (host copies through Gloo)."""
    pg = group if group is not None else dist.group.WORLD
    return _transports[dist.distributed_c10d._get_process_group_name(pg)]


def register() -> None:
    if "TPU" not in dist.Backend._plugins:
        dist.Backend.register_backend("tpu", _create, extended_api=True, devices=["tpu"])
    _default_to_gloo_and_tpu()


# With no backend named, PyTorch 2.11 gives a process group only the accelerator's backend
# (BackendConfig for "undefined"): with tpu the accelerator, CPU collectives and a CPU-only DDP
# script would stop working once torchtpu is installed. init_process_group() then means
# "cpu:gloo,tpu:tpu", as PyTorch's documentation describes the default (gloo and the
# accelerator's backend); any backend the caller names is left as it is.
DEFAULT_BACKEND = "cpu:gloo,tpu:tpu"


def _default_to_gloo_and_tpu() -> None:
    init = dist.distributed_c10d.init_process_group
    if getattr(init, "_torchtpu_default", False):
        return
    signature = inspect.signature(init)

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind_partial(*args, **kwargs)
        device_id = bound.arguments.get("device_id")
        on_tpu = device_id is None or torch.device(device_id).type == "tpu"
        if bound.arguments.get("backend") is None and on_tpu and torch.tpu.is_available():
            bound.arguments["backend"] = DEFAULT_BACKEND
        return init(*bound.args, **bound.kwargs)

    init_process_group._torchtpu_default = True  # type: ignore[attr-defined]
    dist.distributed_c10d.init_process_group = init_process_group
    dist.init_process_group = init_process_group


def local_rank_device() -> torch.device | None:
    """tpu:LOCAL_RANK under torchrun when this process has that device."""
    local = os.environ.get("LOCAL_RANK")
    if local is None or not local.isdigit():
        return None
    index = int(local)
    return torch.device("tpu", index) if index < torch.tpu.device_count() else None
