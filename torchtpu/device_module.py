"""torch.tpu: the device module PyTorch and libraries look up as getattr(torch, "tpu")."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch

from . import _C

_initialized = False


def _idx(device: Any = None) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "tpu":
        raise ValueError(f"expected a tpu device, got {d}")
    return current_device() if d.index is None else d.index


def is_available() -> bool:
    return device_count() > 0


def device_count() -> int:
    return _C.device_count()


def init() -> None:
    _lazy_init()


def _lazy_init() -> None:
    global _initialized
    if not _initialized:
        _C.device_count()
        _initialized = True


def is_initialized() -> bool:
    return _initialized


def _is_in_bad_fork() -> bool:
    """True in a process forked after this one's parent started the device: tpu is unusable
    there (as CUDA is), and ops raise; use the 'spawn' start method."""
    return _C._in_bad_fork()


def current_device() -> int:
    return torch.accelerator.current_device_index()


def set_device(device: Any) -> None:
    torch.accelerator.set_device_index(_idx(device))


@contextlib.contextmanager
def device(dev: Any) -> Iterator[None]:
    prev = current_device()
    set_device(_idx(dev))
    try:
        yield
    finally:
        set_device(prev)


def synchronize(device: Any = None) -> None:
    """Waits until every op issued on the device has finished."""
    _C.synchronize(_idx(device))


def manual_seed(seed: int) -> None:
    _C.manual_seed(current_device(), int(seed) & 0xFFFFFFFFFFFFFFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C.manual_seed(i, int(seed) & 0xFFFFFFFFFFFFFFFF)


def seed() -> None:
    _C.seed(current_device())


def seed_all() -> None:
    for i in range(device_count()):
        _C.seed(i)


def initial_seed() -> int:
    return _C.initial_seed(current_device())


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    """16 bytes: [seed: int64][offset: int64], like CUDA's Philox state."""
    return torch.frombuffer(bytearray(_C.get_rng_state(_idx(device))), dtype=torch.uint8)


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    _C.set_rng_state(_idx(device), bytes(new_state.to(torch.uint8).cpu().numpy().tobytes()))


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


def get_device_name(device: Any = None) -> str:
    """What the PJRT plugin calls the device ("cpu", "NVIDIA H200", "TPU v5 lite")."""
    return _C.device_kind(_idx(device))


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What torch.cuda.get_device_properties gives, as far as PJRT tells it."""

    name: str
    platform: str
    index: int
    total_memory: int  # bytes the plugin lets this device use (0: it does not say)

    def __repr__(self) -> str:
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"index={self.index}, total_memory={self.total_memory // (1 << 20)}MB)")


def get_device_properties(device: Any = None) -> DeviceProperties:
    i = _idx(device)
    return DeviceProperties(get_device_name(i), _C.platform_name(), i,
                            _C.memory_stats(i)["bytes_limit"])


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of this device's memory, like torch.cuda.memory_summary's (pending fused-mode
    values are computed first, so they count)."""
    i = _idx(device)
    s = _C.memory_stats(i)
    rows = [
        ("Allocated memory", _size(s["bytes_in_use"]), _size(s["peak_bytes_in_use"])),
        ("Live buffers", str(s["live_buffers"]), ""),
    ]
    if not abbreviated:
        rows.append(("Memory limit", _size(s["bytes_limit"]) if s["bytes_limit"] else "-", ""))
        rows.append(("Loaded programs", str(_C.metrics()["loaded_programs"]), ""))
    width = 75
    lines = ["=" * width,
             f" torchtpu memory summary, device tpu:{i} ({get_device_name(i)})".ljust(width),
             "-" * width,
             f" {'Metric':<30}| {'Cur Usage':>19} | {'Peak Usage':>19} ",
             "-" * width]
    lines += [f" {name:<30}| {cur:>19} | {peak:>19} " for name, cur, peak in rows]
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_stats(device: Any = None) -> dict[str, int]:
    s = _C.memory_stats(_idx(device))
    return {
        "allocated_bytes.all.current": s["bytes_in_use"],
        "allocated_bytes.all.peak": s["peak_bytes_in_use"],
        "allocation.all.current": s["live_buffers"],
        "reserved_bytes.all.current": s["bytes_in_use"],
        "bytes_limit": s["bytes_limit"],
    }


def memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["bytes_in_use"]


def max_memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_idx(device))["peak_bytes_in_use"]


def memory_reserved(device: Any = None) -> int:
    return memory_allocated(device)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    s = _C.memory_stats(_idx(device))
    return s["bytes_limit"] - s["bytes_in_use"], s["bytes_limit"]


def empty_cache() -> None:
    """Buffers are freed when their last tensor goes; there is no cache to empty."""


def reset_peak_memory_stats(device: Any = None) -> None:
    """Peak tracking is process-wide in this version."""


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported() -> bool:
    return True


def Stream(device: Any = None, priority: int = 0) -> torch.Stream:
    """The device's single in-order queue: every op is issued to it."""
    return torch.Stream(device=torch.device("tpu", _idx(device)), priority=priority)


def Event(
    enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
) -> torch.Event:
    """Marks the work issued so far; synchronize() waits for it, elapsed_time() is device time."""
    return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking)


def current_stream(device: Any = None) -> Stream:
    return Stream(device)


def default_stream(device: Any = None) -> Stream:
    return Stream(device)


@contextlib.contextmanager
def stream(s: torch.Stream | None) -> Iterator[None]:
    yield
