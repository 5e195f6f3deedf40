"""Drives the number of distinct programs far past TORCHTPU_MAX_LOADED_PROGRAMS (set by
test_program_cap.py): the loaded count never exceeds the cap, every result is right, and
programs unloaded earlier come back (from the persistent cache) when they are needed again.
Prints one JSON line."""

import json

import torch

import torchtpu

torchtpu.set_mode("strict")  # one program per op and shape
cap = 8
peak = 0


def run(n: int) -> float:
    global peak
    x = torch.arange(n, dtype=torch.float32, device="tpu")
    value = (x * 3 + n).sum().item()
    peak = max(peak, torchtpu.metrics()["loaded_programs"])
    return value


def expected(n: int) -> float:
    return float((torch.arange(n, dtype=torch.float32) * 3 + n).sum())


sizes = list(range(1, 41))
first = [run(n) for n in sizes]  # 4 programs per size: 160 in all
loaded_from_disk = torchtpu.metrics()["disk_cache_hits"]
again = [run(n) for n in sizes[:5]]  # unloaded long ago
print(
    json.dumps(
        {
            "right": first == [expected(n) for n in sizes] and again == first[:5],
            "peak": peak,
            "cap": cap,
            "compiles": torchtpu.metrics()["compiles"],
            "reloaded": torchtpu.metrics()["disk_cache_hits"] - loaded_from_disk,
            "loaded": torchtpu.metrics()["loaded_programs"],
        }
    )
)
