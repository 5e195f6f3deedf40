"""The op cache: a call that looks exactly like an earlier one replays that call's lowered graph
(aten/op_cache.h). Replays must be counted, must give CPU's results, and anything the graph
depends on (scalar values, aliasing, views, strides, checks, randomness) must keep calls apart."""

from collections.abc import Callable

import pytest
import torch

import torchtpu


@pytest.fixture(params=["fused", "strict"])
def mode_device(request, device):
    with torchtpu.mode(request.param):
        yield device


def replayed() -> int:
    return torchtpu.metrics()["replayed_ops"]


def same_on_cpu(fn: Callable[[torch.device], torch.Tensor], device: torch.device) -> None:
    got = fn(device).cpu()
    torch.testing.assert_close(got, fn(torch.device("cpu")))


def test_a_repeated_call_is_replayed_and_matches_cpu(mode_device):
    def step_loop(d: torch.device) -> torch.Tensor:
        torch.manual_seed(0)
        w = torch.randn(4, 4).to(d)
        y = torch.randn(4, 4).to(d)
        for _ in range(20):
            y = torch.tanh(y @ w * 0.5 + 1.25)
        return y

    before = replayed()
    same_on_cpu(step_loop, mode_device)
    # 4 ops per step (mm, mul, add, tanh): every step after the first replays them all.
    assert replayed() - before >= 4 * 19


def test_a_different_scalar_value_is_another_graph(mode_device):
    # pow lowers ** 2 as a multiply: the exponent's value shapes the graph.
    def powers(d: torch.device) -> torch.Tensor:
        x = torch.linspace(0.25, 2, 8).to(d)
        return torch.stack([x**2, x**3, x**2, x**0.5, x**3])

    same_on_cpu(powers, mode_device)


def test_aliased_arguments_are_another_graph(mode_device):
    def adds(d: torch.device) -> torch.Tensor:
        a = torch.arange(6.0).to(d)
        b = torch.ones(6).to(d)
        r1 = torch.add(a, a)  # one storage read twice: one parameter, not two
        r2 = torch.add(a, b)
        r3 = torch.add(b, b)
        a.add_(a)  # in place, reading the storage it writes
        return torch.stack([r1, r2, r3, a])

    same_on_cpu(adds, mode_device)


def test_views_at_other_offsets_and_strides_are_other_graphs(mode_device):
    def writes(d: torch.device) -> torch.Tensor:
        x = torch.zeros(6, 4).to(d)
        for i in range(5):
            x[i : i + 2] += 1.5  # the same op at another offset each time
        t = torch.arange(16.0).reshape(4, 4).to(d)
        x[:4] += t.t()  # transposed: other strides
        x[:4] += t
        return x

    same_on_cpu(writes, mode_device)


def test_a_replayed_call_still_checks_its_values(mode_device):
    x = torch.arange(10.0, device=mode_device).reshape(5, 2)
    good = torch.tensor([0, 4], device=mode_device)
    for _ in range(3):
        torch.index_select(x, 0, good).cpu()
    before = replayed()
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.index_select(x, 0, torch.tensor([0, 7], device=mode_device)).cpu()
    assert replayed() > before  # the failing call was a replay
    assert x.cpu()[4, 1] == 9.0  # the process and its tensors survive


def test_random_ops_are_never_replayed(mode_device):
    x = torch.ones(1000, device=mode_device)
    masks = [torch.nn.functional.dropout(x, 0.5).cpu() for _ in range(3)]
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
    for m in masks:
        assert set(m.unique().tolist()) == {0.0, 2.0}


def test_the_op_cache_can_be_turned_off(mode_device):
    torchtpu._C._set_op_cache(False)
    try:
        before = replayed()
        y = torch.ones(3, device=mode_device)
        for _ in range(5):
            y = y * 2.0
        assert y.cpu().tolist() == [32.0] * 3
        assert replayed() == before
    finally:
        torchtpu._C._set_op_cache(True)
