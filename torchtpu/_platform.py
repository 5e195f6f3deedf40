"""Which PJRT plugin to load: TORCHTPU_PJRT_PLUGIN, else TORCHTPU_PLATFORM, else TPU, CUDA, CPU."""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return os.path.dirname(spec.origin)


def _cpu_plugin() -> str | None:
    d = _package_dir("xla_plugins.xla_cpu_pjrt")
    path = os.path.join(d, "xla_cpu_pjrt.so") if d else None
    return path if path and os.path.exists(path) else None


def _tpu_plugin() -> str | None:
    path = os.environ.get("TPU_LIBRARY_PATH")
    if path and os.path.exists(path):
        return path
    d = _package_dir("libtpu")
    path = os.path.join(d, "libtpu.so") if d else None
    has_chips = bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))
    return path if path and os.path.exists(path) and has_chips else None


def _cuda_plugin() -> str | None:
    if not glob.glob("/dev/nvidia[0-9]*"):
        return None
    for pkg in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
        d = _package_dir(pkg)
        path = os.path.join(d, "xla_cuda_plugin.so") if d else None
        if path and os.path.exists(path):
            _preload_nvidia_libs()
            return path
    return None


def _preload_nvidia_libs() -> None:
    # XLA opens CUDA libraries by soname; load the pip-installed ones first, globally.
    d = _package_dir("nvidia")
    if d is None:
        return
    for lib in sorted(glob.glob(os.path.join(d, "**", "lib", "lib*.so*"), recursive=True)):
        try:
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass


_MISSING = {
    "tpu": "no TPU found (libtpu needs /dev/accel* or /dev/vfio devices, and the libtpu wheel, "
    "pip install torchtpu[tpu], or TPU_LIBRARY_PATH)",
    "cuda": "no NVIDIA GPU with the JAX CUDA PJRT plugin found (/dev/nvidia*, and pip install "
    "torchtpu[cuda])",
    "cpu": "the XLA:CPU plugin is not installed (pip install xla-cpu-pjrt)",
}


def resolve() -> tuple[str, str]:
    """Returns (platform, plugin path)."""
    forced = os.environ.get("TORCHTPU_PJRT_PLUGIN")
    platform = os.environ.get("TORCHTPU_PLATFORM", "").lower() or None
    if forced:
        if platform is None:
            name = os.path.basename(forced)
            platform = "tpu" if "tpu" in name else "cuda" if "cuda" in name else "cpu"
        return platform, forced
    finders = {"tpu": _tpu_plugin, "cuda": _cuda_plugin, "cpu": _cpu_plugin}
    if platform is not None:
        if platform not in finders:
            raise RuntimeError(f"TORCHTPU_PLATFORM={platform!r}: expected tpu, cuda or cpu")
        path = finders[platform]()
        if path is None:
            raise RuntimeError(f"TORCHTPU_PLATFORM={platform}: {_MISSING[platform]}; unset "
                               "TORCHTPU_PLATFORM to use whatever this machine has")
        return platform, path
    for name in ("tpu", "cuda", "cpu"):
        path = finders[name]()
        if path is not None:
            return name, path
    raise RuntimeError(
        "no PJRT plugin found: pip install xla-cpu-pjrt (CPU), libtpu or jax-cuda13-pjrt"
    )
