"""torch.profiler sees the device: programs as device rows, compiles as host rows."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torchtpu

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def device_rows(prof: profile) -> dict[str, object]:
    return {e.key: e for e in prof.key_averages() if e.device_type == DeviceType.PrivateUse1}


def step(x: torch.Tensor, w: torch.Tensor) -> float:
    return torch.relu(x @ w + 1.0).sum().item()


def test_fused_programs_are_device_rows_with_their_aten_ops(device, tmp_path: Path):
    with torchtpu.mode("fused"):
        x = torch.randn(48, 24, device=device)
        w = torch.randn(24, 40, device=device)
        step(x, w)  # compiled before the profile
        start = time.perf_counter()
        with profile(activities=ACTIVITIES) as prof:
            for _ in range(3):
                step(x, w)
        wall_us = (time.perf_counter() - start) * 1e6
    rows = device_rows(prof)
    fused = [e for k, e in rows.items() if k.startswith("fused program ")]
    assert len(fused) == 1, rows.keys()
    row = fused[0]
    assert row.key.endswith("(4 ops)") and row.count == 3
    assert 0 < row.self_device_time_total < wall_us
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    kernels = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == 3
    for k in kernels:
        assert k["name"] == row.key and 0 < k["dur"] < wall_us
        assert k["args"]["ops"] == "4"
        for op in ("aten::mm", "aten::add", "aten::relu", "aten::sum"):
            assert op in k["args"]["aten_ops"]


def test_strict_mode_rows_are_the_aten_ops(device):
    with torchtpu.mode("strict"):
        x = torch.randn(16, 8, device=device)
        y = x @ x.T
        torch.tpu.synchronize()
        with profile(activities=ACTIVITIES) as prof:
            y = x @ x.T
            torch.tpu.synchronize()
    rows = device_rows(prof)
    assert [k for k in rows if k.startswith("aten::mm")], rows.keys()
    assert all(e.self_device_time_total > 0 for e in rows.values())
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu().T)


def test_compiles_are_host_rows_named_after_the_program(device, tmp_path: Path):
    with torchtpu.mode("strict"):
        x = torch.randn(7, 19, device=device)
        with profile(activities=ACTIVITIES) as prof:
            # A program no other test runs: compiled now, or loaded from the persistent cache.
            y = torch.atan2(x, x.abs() + 0.37)
            torch.tpu.synchronize()
    names = [e.key for e in prof.key_averages() if e.key.startswith(("tpu compile: ", "tpu load: "))]
    assert any("atan2" in n for n in names), names
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    compiles = [e for e in events if e.get("cat") == "privateuse1_runtime" and "atan2" in e["name"]]
    assert compiles and all(e["dur"] > 0 for e in compiles)
    torch.testing.assert_close(y.cpu(), torch.atan2(x.cpu(), x.cpu().abs() + 0.37))


def test_a_compile_is_on_the_row_of_the_thread_that_compiled(device, tmp_path: Path):
    compiled_on: list[int] = []

    def work() -> None:
        compiled_on.append(threading.get_native_id())
        with torchtpu.mode("strict"):
            x = torch.randn(5, 11, device=device)
            torch.hypot(x, x.abs() + 0.41).cpu()  # a program no other test runs

    with profile(activities=ACTIVITIES) as prof:
        worker = threading.Thread(target=work)
        worker.start()
        worker.join(timeout=120)
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    rows = [e for e in events if e.get("cat") == "privateuse1_runtime" and "hypot" in e["name"]]
    assert rows and all(e["tid"] == compiled_on[0] for e in rows), (rows, compiled_on)


def test_the_timeline_is_off_once_the_profiler_stops(device):
    with profile(activities=ACTIVITIES):
        (torch.ones(3, device=device) * 2).sum().item()
    torchtpu._C._take_program_runs()
    (torch.ones(3, device=device) * 3).sum().item()
    torch.tpu.synchronize()
    assert torchtpu._C._take_program_runs() == []


def test_a_cpu_only_profile_has_no_device_rows(device):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (torch.ones(3, device=device) * 2).sum().item()
    assert device_rows(prof) == {}
