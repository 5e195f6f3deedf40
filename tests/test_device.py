"""The tpu device as a PyTorch citizen: storage, views, copies, RNG, streams, serialization."""

import glob
import io
import os
import subprocess
import sys

import pytest
import torch

import torchtpu


def test_autoload_without_import():
    code = "import torch; x = torch.ones(3, device='tpu'); print((x + 1).sum().item())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "6.0"


def test_device_module(device):
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    assert torch.tpu.current_device() == 0
    assert device == torch.device("tpu", 0)
    assert torchtpu.platform() == "cpu"
    torch.tpu.set_device(0)
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0


def test_eager_matmul_prints_values(device):
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4).to(device)
    y = x @ x.T
    assert "device='tpu:0'" in repr(y)
    assert y.tolist() == [[14.0, 38.0], [38.0, 126.0]]
    assert y[1, 1].item() == 126.0
    assert (y.cpu().numpy() == (x.cpu() @ x.cpu().T).numpy()).all()


def test_data_ptr_stable_across_inplace_and_out(device):
    x = torch.zeros(4, device=device)
    p = x.data_ptr()
    x.add_(1)
    torch.mul(x, 3, out=x)
    assert x.data_ptr() == p
    assert x.tolist() == [3.0] * 4


def test_view_write_back(device):
    base = torch.zeros(3, 4, device=device)
    col = base[:, 1]
    col += 5
    base.T[2] = torch.tensor([1.0, 2.0, 3.0], device=device)
    base[0, 2:] *= 2
    ref = torch.zeros(3, 4)
    ref[:, 1] += 5
    ref.T[2] = torch.tensor([1.0, 2.0, 3.0])
    ref[0, 2:] *= 2
    assert torch.equal(base.cpu(), ref)
    assert torch.equal(col.cpu(), ref[:, 1])


def test_strided_reads(device):
    ref = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    x = ref.to(device)
    for f in [
        lambda t: t[:, ::2, 1:],
        lambda t: t.permute(2, 0, 1),
        lambda t: t[1].T,
        lambda t: t[:, 0:1].expand(3, 7, 5),
        lambda t: t.as_strided((4, 4), (3, 1), 2),
        lambda t: t.unsqueeze(1)[..., 3],
        lambda t: t.diagonal(dim1=1, dim2=2),
    ]:
        assert torch.equal(f(x).cpu(), f(ref))
        assert torch.equal((f(x) * 2).cpu(), f(ref) * 2)


def test_copies_between_devices_and_dtypes(device):
    a = torch.randn(5, 6)
    t = a.to(device)
    assert torch.equal(t.cpu(), a)
    nc = a.T.to(device)  # non-contiguous source
    assert torch.equal(nc.cpu(), a.T)
    half = t.to(torch.bfloat16)
    assert half.dtype == torch.bfloat16
    assert torch.equal(half.cpu(), a.to(torch.bfloat16))
    dst = torch.zeros(6, 5, device=device, dtype=torch.float64)
    dst.copy_(t.T)
    assert torch.equal(dst.cpu(), a.T.double())
    host = torch.empty(6, 5)
    host.copy_(t.T)
    assert torch.equal(host, a.T)
    i = torch.tensor([1, 2, 3], dtype=torch.int64).to(device)
    assert i.to(torch.float32).cpu().tolist() == [1.0, 2.0, 3.0]
    assert (i > 1).cpu().tolist() == [False, True, True]


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_storage_and_casts_match_cpu(device, dtype):
    special = [0.0, -0.0, 1e-9, 448.0, 460.0, 57344.0, 1e5, -1e5, float("inf"), float("nan")]
    x = torch.cat([torch.randn(300) * 40, torch.tensor(special)])
    want = x.to(dtype)  # round to nearest even; past the largest value: NaN (e4m3fn) or inf
    got = x.to(device).to(dtype)
    assert got.dtype == dtype and got.device.type == "tpu"
    torch.testing.assert_close(got.float().cpu(), want.float(), equal_nan=True, rtol=0, atol=0)
    bits = want.to(device).cpu()  # host float8 -> device -> host, bit for bit
    assert torch.equal(bits.view(torch.uint8), want.view(torch.uint8))
    cond = want.float().abs() > 1
    picked = torch.where(cond.to(device), want.to(device), torch.zeros_like(want, device=device))
    assert torch.equal(picked.cpu().view(torch.uint8), torch.where(cond, want, 0).view(torch.uint8))
    both = torch.cat([want.to(device)[:5], torch.zeros(2, dtype=dtype, device=device)])
    assert both.dtype == dtype
    assert both.to(torch.bfloat16).cpu().tolist() == want[:5].to(torch.bfloat16).tolist() + [0, 0]


def test_empty_is_lazy_and_zero_sized(device):
    x = torch.empty(0, 3, device=device)
    assert x.shape == (0, 3)
    assert x.cpu().shape == (0, 3)
    before = torch.tpu.memory_allocated()
    y = torch.empty(1000, device=device)
    assert torch.tpu.memory_allocated() == before
    y.fill_(1.0)  # the buffer appears (plus the cached 0-d scalar 1.0)
    assert before + 4000 <= torch.tpu.memory_allocated() <= before + 4000 + 8
    del y


def test_resize_keeps_data(device):
    x = torch.arange(4, dtype=torch.float32, device=device)
    x.resize_(6)
    assert x[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    x.resize_(2)
    assert x.tolist() == [0.0, 1.0]


def test_save_load_round_trip(device, tmp_path):
    model = torch.nn.Linear(4, 3).to(device)
    path = tmp_path / "m.pt"
    torch.save(model.state_dict(), path)
    sd = torch.load(path)
    assert sd["weight"].device.type == "tpu"
    assert torch.equal(sd["weight"].cpu(), model.weight.cpu())
    sd_cpu = torch.load(path, map_location="cpu")
    assert sd_cpu["bias"].device.type == "cpu"
    assert torch.equal(sd_cpu["bias"], model.bias.detach().cpu())
    buf = io.BytesIO()
    torch.save({"w": torch.randn(3, 3)}, buf)
    buf.seek(0)
    w = torch.load(buf, map_location="tpu")["w"]
    assert w.device.type == "tpu"
    view = torch.arange(10.0, device=device)[2:8:2]
    buf = io.BytesIO()
    torch.save(view, buf)
    buf.seek(0)
    assert torch.load(buf).tolist() == [2.0, 4.0, 6.0]


def test_manual_seed_reproducible(device):
    torch.manual_seed(123)
    a = torch.randn(100, device=device)
    torch.manual_seed(123)
    b = torch.randn(100, device=device)
    assert torch.equal(a.cpu(), b.cpu())
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    c = torch.rand(10, device=device)
    torch.tpu.set_rng_state(state)
    d = torch.rand(10, device=device)
    assert torch.equal(c.cpu(), d.cpu())
    assert not torch.equal(a.cpu(), torch.randn(100, device=device).cpu())
    g = torch.Generator(device=device)
    g.manual_seed(5)
    e = torch.rand(5, device=device, generator=g)
    g.manual_seed(5)
    assert torch.equal(e.cpu(), torch.rand(5, device=device, generator=g).cpu())


def test_random_distributions(device):
    torch.manual_seed(0)
    u = torch.rand(20000, device=device).cpu()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = torch.randn(20000, device=device).cpu()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    r = torch.randint(0, 10, (20000,), device=device).cpu()
    assert r.min() == 0 and r.max() == 9
    b = torch.bernoulli(torch.full((20000,), 0.3, device=device)).cpu()
    assert abs(b.mean() - 0.3) < 0.02
    x = torch.ones(20000, device=device)
    d = torch.nn.functional.dropout(x, 0.25, training=True).cpu()
    assert abs((d == 0).float().mean() - 0.25) < 0.02
    assert torch.allclose(d[d != 0], torch.tensor(1 / 0.75))


def test_stream_and_event_synchronize(device):
    x = torch.randn(256, 256, device=device)
    start = torch.tpu.Event(enable_timing=True)
    s = torch.tpu.current_stream()
    start.record(s)
    y = x @ x
    end = torch.tpu.Event(enable_timing=True)
    end.record(s)
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0
    s.synchronize()
    torch.tpu.synchronize()
    assert y.shape == (256, 256)


def test_metrics_and_scalar_values_do_not_recompile(device):
    x = torch.randn(8, device=device)
    x.cpu()
    (x * 0.5).cpu()
    before = torchtpu.metrics()
    assert {"compiles", "executions", "cache_hits", "cpu_fallbacks"} <= before.keys()
    for lr in [0.1, 0.2, 0.3]:
        (x * lr).cpu()
    after = torchtpu.metrics()
    assert after["compiles"] == before["compiles"]
    assert after["executions"] > before["executions"]


def test_debug_mode(device):
    prev = torchtpu.get_mode()
    with torchtpu.mode("debug"):
        assert torchtpu.get_mode() == "debug"
        y = torch.ones(3, device=device) * 2
    assert torchtpu.get_mode() == prev
    assert y.sum().item() == 6.0
    env = dict(os.environ, TPU_LAUNCH_BLOCKING="1")
    code = "import torch, torchtpu; print(torchtpu.get_mode())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "debug"


def test_memory_stats(device):
    before = torch.tpu.memory_allocated()
    x = torch.ones(1024, 1024, device=device)
    assert torch.tpu.memory_allocated() >= before + 4 * 1024 * 1024
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated()
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    del x


def test_module_to_and_optimizer(device):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    ref = [p.detach().clone() for p in m.parameters()]
    m = m.to(device)
    for p, r in zip(m.parameters(), ref):
        assert p.device.type == "tpu" and torch.equal(p.cpu(), r)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    loss = m(torch.randn(4, 8, device=device)).pow(2).mean()
    loss.backward()
    opt.step()
    assert all(not torch.equal(p.cpu(), r) for p, r in zip(m.parameters(), ref))


def test_cpu_fallback_runs_and_counts():
    code = (
        "import warnings, torch, torchtpu\n"
        "x = torch.ones(2, 1, device='tpu')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    y = torch._foobar(x)\n"  # ATen's dispatch-test op: never a tpu lowering
        "    y = torch._foobar(x)\n"
        "print(y.device, torchtpu.metrics()['cpu_fallbacks'], sum('CPU' in str(m.message) for m in w))\n"
    )
    env = dict(os.environ, TORCHTPU_CPU_FALLBACK="1")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    dev, count, warned = out.stdout.split()
    assert dev == "tpu:0" and int(count) >= 2 and int(warned) == 1


@pytest.mark.parametrize("n", [2])
def test_several_cpu_devices(n):
    code = (
        "import torch, torchtpu\n"
        "a = torch.ones(3, device='tpu:1') * 2\n"
        "b = a.to('tpu:0') + 1\n"
        "print(torch.tpu.device_count(), a.device, b.device, b.sum().item())\n"
    )
    env = dict(os.environ, TORCHTPU_CPU_DEVICES=str(n))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == [str(n), "tpu:1", "tpu:0", "9.0"]


def test_module_to_keeps_tied_parameters(device):
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    m = torch.nn.ModuleDict({"emb": emb, "head": head})
    p = emb.weight
    m.to(device)
    assert m["emb"].weight is p and m["head"].weight is m["emb"].weight
    assert p.device.type == "tpu"


def _stderr_of(code: str, **env: str) -> str:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, **env}, check=True)
    return run.stderr


def test_the_plugin_starts_quietly():
    code = "import torch, torchtpu; print(torch.ones(2, device='tpu').sum().item())"
    quiet = _stderr_of(code)
    assert "absl::InitializeLog" not in quiet and "cpu_device_count" not in quiet, quiet
    assert "cpu_device_count set via create_options" in _stderr_of(code, TORCHTPU_LOG_LEVEL="info")


def test_device_name_properties_and_memory_summary(device):
    name = torch.tpu.get_device_name()
    props = torch.tpu.get_device_properties(device)
    assert name == props.name and name  # "cpu" on XLA:CPU, the GPU's or TPU's model elsewhere
    assert props.platform == torchtpu.platform() and props.index == device.index
    x = torch.ones(1 << 16, device=device)
    summary = torch.tpu.memory_summary(device)
    assert f"tpu:{device.index}" in summary and "Allocated memory" in summary
    assert "Live buffers" in summary and x.sum().item() == 1 << 16


def test_info_reports_the_plugin_and_devices():
    out = subprocess.run([sys.executable, "-m", "torchtpu.info"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert f"torchtpu {torchtpu.__version__}" in out
    assert "PJRT C API 0." in out and "tpu:0:" in out and "compile cache:" in out, out


@pytest.mark.skipif(bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*")),
                    reason="this machine has a TPU")
def test_a_platform_that_is_not_there_gives_one_clear_error():
    code = """
import torch
print(torch.tpu.is_available(), torch.tpu.device_count())
try:
    torch.ones(2, device="tpu")
except RuntimeError as e:
    print(e)
print(torch.ones(2).sum().item())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**{k: v for k, v in os.environ.items()
                                 if k != "TORCHTPU_PJRT_PLUGIN"},  # a forced plugin wins
                              "TORCHTPU_PLATFORM": "tpu"}, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "False 0"  # import torch still works: no device, no crash
    assert lines[1].startswith("TORCHTPU_PLATFORM=tpu: no TPU found") and "libtpu" in lines[1]
    assert lines[2] == "2.0"


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32, torch.float32, torch.int64])
def test_bool_storage_viewed_as_wider_dtypes_and_back(device, dtype):
    """A bool is a byte in PyTorch (StableHLO's i1 has no byte to reinterpret)."""
    x = torch.tensor([True, False, True, True, False, False, False, True])
    assert torch.equal(x.to(device).view(dtype).cpu(), x.view(dtype))
    y = torch.tensor([256, 1, 0, 7] * 2, dtype=torch.int16).view(dtype if dtype.itemsize >= 2 else torch.int16)
    assert torch.equal(y.to(device).view(torch.bool).cpu(), y.view(torch.bool))


def test_pinned_host_memory(device):
    """pin_memory() gives host memory that is_pinned() recognizes (DDP and DataLoader ask)."""
    x = torch.arange(6.0)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    assert torch.equal(pinned, x) and torch.equal(pinned.to(device).cpu(), x)
    assert pinned[2:].is_pinned()  # a view into the pinned block
