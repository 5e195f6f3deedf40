"""What to paste into a bug report: `python -m torchtpu.info`.

Prints the versions, the PJRT platform and plugin (path and API version), the devices, the
execution mode, the compile cache and the TORCHTPU_* settings in effect."""

from __future__ import annotations

import os
import platform
import sys

import torch

import torchtpu
from torchtpu import _C


def report() -> str:
    lines = [
        f"torchtpu {torchtpu.__version__} ({os.path.dirname(torchtpu.__file__)})",
        f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}",
    ]
    try:
        count = torch.tpu.device_count()
        major, minor = _C.api_version()
        lines += [
            f"platform: {torchtpu.platform()}",
            f"PJRT plugin: {_C.plugin_path()} (PJRT C API {major}.{minor})",
            f"devices: {count}",
        ]
        for i in range(count):
            lines.append(f"  tpu:{i}: {torch.tpu.get_device_properties(i)}")
    except Exception as e:  # noqa: BLE001 (the report says why the device is not there)
        lines.append(f"device: not available: {type(e).__name__}: {e}")
    lines.append(f"mode: {torchtpu.get_mode()}")
    cache = torchtpu.cache_stats()
    lines.append(f"compile cache: {cache['dir'] or 'off'} ({cache['bytes'] / (1 << 20):.1f} MiB)")
    settings = {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("TORCHTPU_", "TPU_", "XLA_"))}
    lines.append("settings: " + (", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"))
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
    sys.stdout.flush()
