"""torch.histogram on tpu against CPU: bins from the data (equal values, empty input), a given
range with weights and density, a tensor of edges, NaNs, float64; CPU's errors."""

import pytest
import torch

import torchtpu

DEV = "tpu"


def test_histogram_matches_cpu():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g)
    cases = [
        (torch.tensor([1.0, 1.0, 1.0]), {"bins": 4}),  # edges widened by 0.5 each way
        (torch.tensor([]), {"bins": 4}),  # edges over [0, 1]
        (x, {"bins": 17}),
        (x.view(10, 100), {"bins": 5, "range": (-1.0, 1.0), "weight": x.view(10, 100).abs(),
                          "density": True}),
        (x, {"bins": torch.tensor([-1.0, -0.3, 0.0, 0.2, 2.0])}),
        (torch.tensor([0.0, float("nan"), 5.0]), {"bins": 3, "range": (0.0, 5.0)}),
        (x.double(), {"bins": 9}),
    ]
    for inp, kw in cases:
        expected = torch.histogram(inp, **kw)
        moved = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        actual = torch.histogram(inp.to(DEV), **moved)
        # float32 edges are CPU's exactly (its linspace's fused multiply-adds are reproduced in
        # float64); float64 ones may differ in the last bit.
        if inp.dtype == torch.float32:
            assert torch.equal(actual.bin_edges.cpu(), expected.bin_edges)
        torch.testing.assert_close(actual.bin_edges.cpu(), expected.bin_edges)
        torch.testing.assert_close(actual.hist.cpu(), expected.hist)


def test_histogram_errors_match_cpu():
    with pytest.raises(RuntimeError, match="range is not finite"):
        torch.histogram(torch.tensor([0.0, float("nan")], device=DEV), 3).hist.cpu()
    with pytest.raises(RuntimeError, match="min should not exceed max, but got min 2 max 1"):
        torch.histogram(torch.tensor([0.0, 1.0], device=DEV), 3, range=(2.0, 1.0))
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0"):
        torch.histogram(torch.tensor([0.0, 1.0], device=DEV), 0)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.histogram(torch.tensor([0, 1], device=DEV), 3)


def test_histogramdd_matches_cpu():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(50, 3, generator=g)
    edges = [torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([-2.0, 2.0]), torch.tensor([0.0, 0.5, 3.0])]
    cases = [
        {"bins": [3, 4, 5]},
        {"bins": [2, 2, 2], "range": [-1.0, 1.0, -2.0, 2.0, 0.0, 1.0], "weight": torch.rand(50),
         "density": True},
        {"bins": edges},
    ]
    for kw in cases:
        expected = torch.histogramdd(x, **kw)
        moved = {
            k: [b.to(DEV) for b in v] if k == "bins" and isinstance(v[0], torch.Tensor)
            else v.to(DEV) if isinstance(v, torch.Tensor) else v
            for k, v in kw.items()
        }
        actual = torch.histogramdd(x.to(DEV), **moved)
        torch.testing.assert_close(actual.hist.cpu(), expected.hist)
        for a, e in zip(actual.bin_edges, expected.bin_edges):
            assert torch.equal(a.cpu(), e)
    # In strict mode the edges op raises at the call, as on CPU. (In fused mode torch.histogramdd's
    # two ops both record the check, and each raises at a read.)
    with torchtpu.mode("strict"), pytest.raises(RuntimeError, match="dimension 1's range is not"):
        torch.histogramdd(torch.tensor([[0.0, 1.0], [1.0, float("nan")]], device=DEV), [3, 3])
    with pytest.raises(RuntimeError, match="range should have 4 elements, but got 2"):
        torch.histogramdd(x[:, :2].to(DEV), [3, 3], range=[0.0, 1.0])
