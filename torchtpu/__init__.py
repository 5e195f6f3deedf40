"""torchtpu: native PyTorch on TPUs through PJRT. `device = torchtpu.get_device()`."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any


def _autoload() -> None:
    """Entry point for torch.backends autoloading: importing the package registers everything.

    Defined before `import torch`, which itself autoloads this package.
    """


import torch

from . import _platform

__version__ = "0.1.0"


def _cache_dir() -> str:
    """TORCHTPU_CACHE_DIR, 'off' to disable; default: the per-user cache directory."""
    d = os.environ.get("TORCHTPU_CACHE_DIR")
    if d is not None:
        return "" if d.strip().lower() in ("", "off", "0", "none") else os.path.abspath(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torchtpu", "xla")


def _cache_max_bytes() -> int:
    return int(os.environ.get("TORCHTPU_CACHE_MAX_BYTES", str(4 << 30)))


def _init_client(platform: str, plugin: str) -> None:
    from . import _C

    # Under torchrun each local rank gets its own device: tpu:LOCAL_RANK exists on CPU too.
    default_count = os.environ.get("LOCAL_WORLD_SIZE", "1") if platform == "cpu" else "1"
    count = int(os.environ.get("TORCHTPU_CPU_DEVICES", default_count))
    import torch.distributed as dist

    from . import distributed

    if dist.is_available() and distributed.spans_processes(platform):
        distributed.init_multiprocess_client(plugin, platform)
    else:
        _C._init(plugin, platform, count)


def _register() -> None:
    backend = torch._C._get_privateuse1_backend_name()
    if backend != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")

    from . import _C, device_module

    try:
        platform, plugin = _platform.resolve()
    except RuntimeError as e:
        # `import torch` autoloads this package: a platform asked for but absent must not break
        # it. The device reports none available, and each use raises why, at the user's line.
        _C._set_unavailable(str(e))
    else:
        _init_client(platform, plugin)
    warning = _C._configure_cache(_cache_dir(), __version__, _cache_max_bytes())
    if warning:
        warnings.warn(warning, stacklevel=3)
    if os.environ.get("TORCHTPU_FUSED_ORIGINS", "1") != "0":
        _C._install_origin_capture(
            [os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep]
        )
    # Profiling the device starts Kineto's CUDA side too (the wheel is CUDA's), which warns that
    # CUPTI is missing: keep Kineto to its errors unless the user chose a level.
    os.environ.setdefault("KINETO_LOG_LEVEL", "3")
    mode = os.environ.get("TORCHTPU_MODE")
    if os.environ.get("TPU_LAUNCH_BLOCKING") == "1":
        mode = "debug"
    if mode:
        _C.set_mode(mode)

    # A torch wheel may ship its own torch/tpu for Google's torch_tpu: ours replaces it.
    if hasattr(torch, "tpu") or "torch.tpu" in sys.modules:
        torch.tpu = device_module  # type: ignore[attr-defined]
        sys.modules["torch.tpu"] = device_module
    else:
        torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)

    import torch.distributed as dist

    from . import distributed

    if dist.is_available():
        distributed.register()

    from . import _accelerate, _dlpack, _inductor, _multiprocessing, _optim_kernels

    _optim_kernels.install()
    _accelerate.install()
    _inductor.install()
    _dlpack.install()
    _multiprocessing.install()


_register()

from . import _C

_local_rank_device_set = False


def get_device(index: int | None = None) -> torch.device:
    """The tpu device to use: `device = torchtpu.get_device()`. Under torchrun the first call
    makes the local rank's device current (as `torch.cuda.set_device(local_rank)` would)."""
    global _local_rank_device_set
    if index is None and not _local_rank_device_set:
        _local_rank_device_set = True
        from .distributed import local_rank_device

        d = local_rank_device()
        if d is not None:
            torch.tpu.set_device(d.index)
    return torch.device("tpu", torch.tpu.current_device() if index is None else index)


def metrics() -> dict[str, Any]:
    """Counters: compiles, executions, cache_hits, cpu_fallbacks, compile_seconds,
    disk_cache_hits, recorded_ops and flushes (fused mode), replayed_ops (op calls that reused an
    earlier identical call's lowered graph: the op cache), fused_collectives and
    lone_collectives (per rank: collectives that ran inside a program with other ops, and those
    that ran as programs of their own), donated_buffers, scalar_uploads (Python numbers copied
    to the device: a value still in use or kept is not copied again); and one gauge, loaded_programs (executables loaded now,
    at most TORCHTPU_MAX_LOADED_PROGRAMS), which reset_metrics leaves alone."""
    return _C.metrics()


def cache_stats() -> dict[str, Any]:
    """The persistent compile cache: hits, misses, corrupt entries replaced, bytes read and
    written by this process, bytes on disk, and this process's compile count and seconds."""
    stats = dict(_C._disk_cache_stats())
    d = _cache_dir()
    size = 0
    if d and os.path.isdir(d):
        for name in os.listdir(d):
            if name.endswith(".xla"):
                try:
                    size += os.path.getsize(os.path.join(d, name))
                except OSError:
                    pass
    m = _C.metrics()
    stats.update(bytes=size, compiles=m["compiles"], compile_seconds=m["compile_seconds"], dir=d)
    return stats


def reset_metrics() -> None:
    _C.reset_metrics()


def set_mode(mode: str) -> None:
    """'strict' (run each op at once, asynchronously), 'debug' (run each op and wait) or
    'fused' (record ops and run them as one program at the next host read or sync)."""
    _C.set_mode(mode)


def get_mode() -> str:
    return _C.get_mode()


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """with torchtpu.mode("debug"): ...  (restores the previous mode on exit)"""
    prev = get_mode()
    set_mode(name)
    try:
        yield
    finally:
        set_mode(prev)


def mark_dynamic(
    t: torch.Tensor, dim: int | list[int], *, min: int | None = None, max: int | None = None
) -> None:
    """`torch._dynamo.mark_dynamic(t, dim, min=, max=)` for compiled code, and the same hint
    for fused eager: while `t` lives, a program first seen with a dim of the marked size is
    compiled bounded in that size (at least up to `max`), so later sizes, such as the next
    prompt's length in `generate()`, reuse it instead of compiling."""
    import weakref

    import torch._dynamo

    torch._dynamo.mark_dynamic(t, dim, min=min, max=max)
    for d in [dim] if isinstance(dim, int) else dim:
        hint = _C._add_size_hint(t.shape[d], max or 0)  # -1: 0 and 1 stay static, as in Dynamo
        if hint >= 0:
            weakref.finalize(t, _C._drop_size_hint, hint)


def platform() -> str:
    """The PJRT platform in use: 'cpu', 'cuda' or 'tpu'."""
    return _C.platform_name()

from . import debug  # torchtpu.debug.shadow; TORCHTPU_SHADOW=1 turns it on here

debug._from_env()
