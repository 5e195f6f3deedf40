"""Fused mode ("JIT for eager"): ops are recorded and run as one program at a flush point,
with eager semantics kept. These tests switch to fused mode themselves, so they run in every
suite mode."""

import contextlib
import gc
import io

import numpy as np
import pytest
import torch

import torchtpu


@pytest.fixture
def fused(device):
    with torchtpu.mode("fused"):
        yield device


def pending(device) -> int:
    return torchtpu._C._pending_ops(device.index)


def test_ops_are_recorded_then_run_as_one_program(fused):
    x = torch.arange(12, dtype=torch.float32, device=fused).reshape(3, 4)
    torch.tpu.synchronize()
    before = torchtpu.metrics()
    y = x
    for _ in range(10):
        y = (y * 1.5 - 0.25).sin()
    mid = torchtpu.metrics()
    assert mid["executions"] == before["executions"]
    assert mid["recorded_ops"] - before["recorded_ops"] == 30
    assert pending(fused) == 30
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for _ in range(10):
        ref = (ref * 1.5 - 0.25).sin()
    torch.testing.assert_close(y.cpu(), ref)
    after = torchtpu.metrics()
    assert after["executions"] - mid["executions"] == 1
    assert after["flushes"] - mid["flushes"] == 1
    assert pending(fused) == 0


READS = {
    "item": lambda t: t.sum().item(),
    "cpu": lambda t: t.cpu(),
    "tolist": lambda t: t.tolist(),
    "numpy": lambda t: t.cpu().numpy(),
    "print": lambda t: print(t, file=io.StringIO()),
    "if": lambda t: 1 if (t > 0).all() else 0,
    "synchronize": lambda t: torch.tpu.synchronize(),
    "event": lambda t: torch.tpu.Event().record(),
    "memory stats": lambda t: torch.tpu.memory_allocated(),
}


@pytest.mark.parametrize("read", READS.keys())
def test_host_reads_flush(fused, read):
    t = torch.full((4,), 2.0, device=fused) * 3
    assert pending(fused) > 0
    READS[read](t)
    assert pending(fused) == 0
    assert t.tolist() == [6.0] * 4


def test_only_live_values_are_computed(fused):
    # The same ops once first, so their scalars' buffers already exist (a new one could evict an
    # older kept scalar mid-measurement), and other tests' garbage is freed before measuring.
    (torch.ones(1000, device=fused) * 2 + 1).cpu()
    gc.collect()
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    a = torch.ones(1000, device=fused)
    b = a * 2
    c = b + 1
    del b  # a temporary: it stays inside the program and never takes device memory
    torch.tpu.synchronize()
    grown = torch.tpu.memory_allocated() - before
    assert 8000 <= grown < 12000, grown
    assert c.sum().item() == 3000.0


def test_views_and_in_place_ops_keep_program_order(fused):
    def program(dev):
        x = torch.zeros(4, 3, device=dev)
        v = x[1:3, ::2]
        v += 1
        y = x * 2  # sees the write through the view
        x.mul_(3)  # later mutation: y keeps the old value
        x.t()[0].add_(5)
        z = torch.empty(3, device=dev)
        torch.sum(x, dim=0, out=z)
        return x.cpu(), y.cpu(), z.cpu()

    for got, want in zip(program(fused), program("cpu")):
        torch.testing.assert_close(got, want)


def test_random_numbers_match_strict_mode(fused):
    torch.manual_seed(7)
    a = torch.randn(5, device=fused)
    b = torch.rand(3, device=fused)
    fused_vals = (a.cpu(), b.cpu())
    with torchtpu.mode("strict"):
        torch.manual_seed(7)
        a = torch.randn(5, device=fused)
        b = torch.rand(3, device=fused)
        strict_vals = (a.cpu(), b.cpu())
    for f, s in zip(fused_vals, strict_vals):
        torch.testing.assert_close(f, s, rtol=0, atol=0)


@contextlib.contextmanager
def max_ops(n: int):
    old = torchtpu._C._fused_max_ops()
    torchtpu._C._set_fused_max_ops(n)
    try:
        yield
    finally:
        torchtpu._C._set_fused_max_ops(old)


def test_size_limit_cuts_the_trace(fused):
    with max_ops(50):
        x = torch.zeros(8, device=fused)
        before = torchtpu.metrics()["flushes"]
        for _ in range(120):
            x = x + 1
        assert torchtpu.metrics()["flushes"] - before >= 2
        assert pending(fused) < 50
        assert x.tolist() == [120.0] * 8


def train_steps(device, steps: int, on_step=None) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randn(8, 16).to(device)
    target = torch.randn(8, 4).to(device)
    losses = []
    for step in range(steps):
        loss = torch.nn.functional.mse_loss(model(data), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())  # no host read inside the loop
        if on_step:
            on_step(step)
    return [t.cpu() for t in losses] + [p.detach().cpu() for p in model.parameters()]


def test_training_loop_without_reads_reuses_its_executables(fused):
    compiles = {}
    with max_ops(60):  # far shorter than a step: the loop must be found and cut on its period
        result = train_steps(
            fused, 16, lambda s: compiles.setdefault(s, torchtpu.metrics()["compiles"])
        )
    assert compiles[15] == compiles[9], "steady-state steps compiled new programs"
    with torchtpu.mode("strict"):
        expected = train_steps(fused, 16)
    for got, want in zip(result, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_training_matches_cpu(fused):
    for got, want in zip(train_steps(fused, 4), train_steps("cpu", 4)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_runtime_failure_names_op_and_line_and_spares_the_rest(fused):
    x = torch.ones(3, device=fused)
    bad = torch.ops.torchtpu._invalid_program(x)  # RECORDED-HERE
    good = x * 4  # independent of the failing op: still computed
    with pytest.raises(RuntimeError) as e:
        bad.cpu()
    msg = str(e.value)
    assert "tpu failed to compile torchtpu::_invalid_program" in msg
    with open(__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if "# RECORDED-HERE" in text)
    assert f"recorded at {__file__}:{line} in " in msg
    assert good.tolist() == [4.0] * 3
    with pytest.raises(RuntimeError, match="_invalid_program"):
        bad.cpu()  # the lost value keeps saying why
    assert (x + 1).tolist() == [2.0] * 3


def test_shape_errors_raise_at_the_users_line(fused):
    a, b = torch.ones(3, device=fused) * 2, torch.ones(4, device=fused) * 2
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match"):
        a + b
    assert pending(fused) > 0  # nothing was flushed to find out


def test_leaving_fused_mode_flushes(device):
    with torchtpu.mode("strict"), torchtpu.mode("fused"):
        y = torch.ones(2, device=device) + 1
        assert pending(device) > 0
    assert pending(device) == 0
    assert np.allclose(y.cpu().numpy(), 2.0)


def test_the_profile_notes_each_program_and_the_flush_time(fused):
    x = torch.arange(12, dtype=torch.float32, device=fused)
    torch.tpu.synchronize()
    torchtpu._C._take_program_runs()
    torchtpu._C._set_profiling(True)
    try:
        before = torchtpu.metrics()
        y = (x * 2 + 1).sin()
        torch.tpu.synchronize()
        after = torchtpu.metrics()
        runs = torchtpu._C._take_program_runs()
    finally:
        torchtpu._C._set_profiling(False)
    assert [r[1] for r in runs] == [3]  # one program of 3 ops
    _, _, launch, queued, ready = runs[0]
    assert launch <= queued <= ready
    assert after["flush_seconds"] > before["flush_seconds"]
    assert after["execute_seconds"] > before["execute_seconds"]
    torch.testing.assert_close(y.cpu(), (torch.arange(12.0) * 2 + 1).sin())
    z = y + 1  # profiling off: nothing noted
    torch.tpu.synchronize()
    assert torchtpu._C._take_program_runs() == [] and z.shape == y.shape


def test_a_scalar_used_by_every_op_of_a_trace_is_uploaded_once(fused):
    """A trace holds its inputs' buffers, not their lazy values: a scalar that every op of a
    loop reads (add's alpha, 1) is found through its buffer and uploaded once, not once per op,
    also when the op cache replays the calls. It used to be uploaded by every call."""
    limit = torchtpu._C._fused_max_ops()
    torchtpu._C._set_fused_max_ops(1000)
    try:
        b_cpu = torch.randn(8, 8)
        b, acc, expected = b_cpu.to(fused), torch.zeros(8, 8, device=fused), torch.zeros(8, 8)
        for _ in range(3):  # the op cache learns the call
            acc = acc + b
            expected = expected + b_cpu
        torch.tpu.synchronize()
        torchtpu.reset_metrics()
        for _ in range(200):
            acc = acc + b
            expected = expected + b_cpu
        torch.testing.assert_close(acc.cpu(), expected)
        m = torchtpu.metrics()
        assert m["replayed_ops"] >= 200
        assert m["scalar_uploads"] <= 2, m["scalar_uploads"]
    finally:
        torchtpu._C._set_fused_max_ops(limit)


def test_a_program_recorded_again_is_not_compiled_again_after_other_scalars(fused):
    """Equal scalars of one trace share a parameter whether their value was used before or not,
    so what ran earlier (here: 0.3717 used twice, which keeps its buffer) cannot change a
    program's key. Between the two uses sit 100 other values."""
    x = torch.randn(8, device=fused)
    torch.tpu.synchronize()  # x is an input of the programs below, not computed by them
    factors = [1.0 + k / 4096 for k in range(100)]

    def run() -> float:
        y = x + 0.3717
        for f in factors:
            y = y * f
        return (y + 0.3717).sum().item()

    def new_programs() -> int:  # compiled, or loaded from the persistent cache
        m = torchtpu.metrics()
        return m["compiles"] + m["disk_cache_hits"]

    first = run()
    (x + 0.3717 + 0.3717).sum().item()
    before = new_programs()
    second = run()
    assert new_programs() == before
    assert second == first
