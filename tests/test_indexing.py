"""Indexing as PyTorch's own test_indexing.py checks it (causes found by running that file on
tpu; our own tests, not copies): uint8-mask deprecation warnings on assignment, masked
assignment inside TorchScript, and empty advanced indices."""

from __future__ import annotations

import warnings

import pytest
import torch

DEPRECATED = "indexing with dtype torch.uint8 is now deprecated"


def uint8_mask_warnings(device: str) -> tuple[int, list[list[float]]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.zeros(4, 2, device=device)
        mask = torch.tensor([1, 0, 1, 0], dtype=torch.uint8, device=device)
        x[mask] = torch.ones(2, device=device)  # index_put_
        x.index_put_((mask,), torch.ones(2, device=device), accumulate=True)
        x[mask]  # index
    return sum(DEPRECATED in str(w.message) for w in caught), x.cpu().tolist()


def test_uint8_masks_warn_as_on_cpu(device):
    assert uint8_mask_warnings(device.type) == uint8_mask_warnings("cpu")
    assert uint8_mask_warnings("cpu")[0] == 3


@torch.jit.script
def _clamp_small(x: torch.Tensor) -> torch.Tensor:
    x[x < 50] = 1.0  # TorchScript passes index_put_'s indices as a list of another type
    return x


def test_masked_assignment_in_torchscript(device):
    want = _clamp_small(torch.arange(100.0))
    got = _clamp_small(torch.arange(100.0, device=device))
    torch.testing.assert_close(got.cpu(), want)


def test_empty_advanced_indices(device):
    for shape, index in (
        ((3, 0), (torch.tensor([1]),)),
        ((10, 0), (torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long))),
        ((0, 4), (torch.tensor([], dtype=torch.long),)),
        ((0, 4), ([],)),
    ):
        want = torch.empty(shape)[index]
        on = tuple(i.to(device) if isinstance(i, torch.Tensor) else i for i in index)
        got = torch.empty(shape, device=device)[on]
        torch.tpu.synchronize()  # a program that fails to compile raises here
        assert got.shape == want.shape


def test_index_reduce_and_index_add_over_an_empty_dim(device):
    """PyTorch's Meta kernel of these selects element 0 of the indexed dim (a check only meta
    tensors run), which a dim of size 0 lacks; CPU returns self as it is."""
    index = torch.zeros(0, dtype=torch.long)
    for shape, dim in (((0, 3), 0), ((3, 0), 1), ((0,), 0)):
        x = torch.randn(shape)
        source = torch.randn(shape)
        on = (index.to(device), source.to(device))
        for reduce in ("prod", "mean", "amax", "amin"):
            want = x.clone().index_reduce_(dim, index, source, reduce, include_self=False)
            got = x.to(device).index_reduce_(dim, *on, reduce, include_self=False)
            assert got.shape == want.shape
        assert torch.index_add(x.to(device), dim, *on, alpha=2).shape == x.shape
    # A source with no rows along dim (PyTorch's test_index_reduce draws 0 of them at times):
    # self comes back unchanged, in place, out of place and for every reduction.
    x, index, source = torch.randn(3, 4, 5), torch.zeros(0, dtype=torch.int), torch.randn(3, 4, 0)
    on = (index.to(device), source.to(device))
    for include_self in (True, False):
        for reduce in ("prod", "mean", "amax", "amin"):
            want = x.clone().index_reduce_(2, index, source, reduce, include_self=include_self)
            got = x.to(device).index_reduce_(2, *on, reduce, include_self=include_self)
            assert torch.equal(got.cpu(), want)
            got = torch.index_reduce(x.to(device), 2, *on, reduce, include_self=include_self)
            assert torch.equal(got.cpu(), want)
    assert torch.equal(torch.index_add(x.to(device), 2, *on).cpu(), x)
    with pytest.raises(RuntimeError, match=r"Number of indices \(1\) should be equal to source"):
        x.to(device).index_add_(2, torch.zeros(1, dtype=torch.long, device=device), on[1])
    with pytest.raises(RuntimeError, match=r"self \(Float\) and source \(Double\)"):
        torch.zeros(0, 3, device=device).index_add_(
            0, index.to(device), torch.zeros(0, 3).double().to(device)
        )
