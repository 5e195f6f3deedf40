"""nn.functional.embedding_bag and nn.EmbeddingBag on tpu against CPU: every mode, offsets with
empty bags and include_last_offset, padding_idx, per_sample_weights, 2-D input, gradients of the
weight and of the per-sample weights, and CPU's errors for bad offsets and indices."""

import pytest
import torch
import torch.nn.functional as F

DEV = "tpu"


def run(device, weight, idx, offsets, psw, **kw):
    w = weight.detach().to(device).requires_grad_()
    p = None if psw is None else psw.detach().to(device).requires_grad_()
    out = F.embedding_bag(idx.to(device), w, None if offsets is None else offsets.to(device),
                          per_sample_weights=p, **kw)
    g = torch.Generator().manual_seed(3)
    cot = torch.randn(out.shape, generator=g).to(device)
    grads = torch.autograd.grad(out, [w] + ([p] if p is not None else []), cot)
    return [out] + list(grads)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_matches_cpu(mode, include_last_offset, padding_idx):
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(10, 3, generator=g)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 4, 4])
    # Bag 1 is empty; with include_last_offset the last offset is the indices' length (CSR).
    offsets = torch.tensor([0, 4, 4, 6, 10] if include_last_offset else [0, 4, 4, 6, 8])
    psw = torch.rand(10, generator=g) if mode == "sum" else None
    kw = {"mode": mode, "include_last_offset": include_last_offset, "padding_idx": padding_idx}
    for a, e in zip(run(DEV, weight, idx, offsets, psw, **kw),
                    run("cpu", weight, idx, offsets, psw, **kw)):
        torch.testing.assert_close(a.cpu(), e)


def test_embedding_bag_module_2d_input_and_scale_grad_by_freq():
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(12, 4, mode="mean", scale_grad_by_freq=True).to(DEV)
    x = torch.tensor([[1, 2, 2, 7], [7, 7, 0, 11]])
    bag(x.to(DEV)).sum().backward()
    # Each occurrence adds 1/4 (a mean over 4), and a row's sum is divided by its frequency.
    # (CPU's kernel divides by another row's frequency here, so it is not the reference.)
    expected = torch.zeros(12, 4)
    for row in x.flatten().tolist():
        expected[row] += 0.25 / (x == row).sum()
    torch.testing.assert_close(bag.weight.grad.cpu(), expected)


def test_embedding_bag_bad_offsets_and_indices_raise():
    w = torch.randn(10, 3, device=DEV)
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(torch.tensor([1, 2, 4, 5], device=DEV), w,
                        torch.tensor([1, 2], device=DEV)).cpu()
    with pytest.raises(RuntimeError, match="can not be greater than input's length 4"):
        F.embedding_bag(torch.tensor([1, 2, 4, 5], device=DEV), w,
                        torch.tensor([0, 5], device=DEV)).cpu()
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding_bag(torch.tensor([1, 2, 40, 5], device=DEV), w,
                        torch.tensor([0, 2], device=DEV)).cpu()
    assert w.sum().isfinite().item()  # the device and its tensors survive
