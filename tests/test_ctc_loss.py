"""nn.functional.ctc_loss on tpu against CPU: padded and concatenated targets, repeated labels,
empty targets, sequences shorter than the input, impossible alignments with and without
zero_infinity, every reduction, float64, and the gradients of the log-probabilities."""

import pytest
import torch
import torch.nn.functional as F

DEV = "tpu"


def ctc(device, log_probs, targets, in_len, tgt_len, **kw):
    lp = log_probs.detach().to(device).requires_grad_()
    loss = F.ctc_loss(lp, targets.to(device), in_len, tgt_len, **kw)
    g = torch.Generator().manual_seed(5)
    cot = torch.rand(loss.shape, generator=g, dtype=loss.dtype).to(device)
    (grad,) = torch.autograd.grad(loss, lp, cot)
    return loss, grad


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_cpu(reduction, zero_infinity, concatenated):
    g = torch.Generator().manual_seed(0)
    t, n, c = 12, 5, 6
    log_probs = torch.randn(t, n, c, generator=g).log_softmax(2)
    # Repeated labels (a blank must separate them), an empty target, a short input, and one
    # target too long for its input (infinite loss).
    targets = torch.tensor([[1, 1, 2, 3], [4, 5, 0, 0], [2, 0, 0, 0], [3, 3, 3, 0], [1, 2, 3, 4]])
    tgt_len = [4, 2, 0, 3, 4]
    in_len = [12, 10, 7, 6, 3]
    if concatenated:
        targets = torch.cat([targets[i, :k] for i, k in enumerate(tgt_len)])
    kw = {"reduction": reduction, "zero_infinity": zero_infinity}
    (loss, grad), (eloss, egrad) = (ctc(DEV, log_probs, targets, in_len, tgt_len, **kw),
                                    ctc("cpu", log_probs, targets, in_len, tgt_len, **kw))
    torch.testing.assert_close(loss.cpu(), eloss, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad.cpu(), egrad, atol=1e-5, rtol=1e-5, equal_nan=True)


def test_ctc_loss_module_float64_and_tensor_lengths():
    g = torch.Generator().manual_seed(1)
    log_probs = torch.randn(20, 3, 8, generator=g, dtype=torch.float64).log_softmax(2)
    targets = torch.randint(1, 8, (3, 7), generator=g)
    in_len, tgt_len = torch.tensor([20, 18, 15]), torch.tensor([7, 5, 6])
    loss_fn = torch.nn.CTCLoss()
    expected = loss_fn(log_probs, targets, in_len, tgt_len)
    actual = loss_fn(log_probs.to(DEV), targets.to(DEV), in_len.to(DEV), tgt_len.to(DEV))
    assert actual.dtype == torch.float64
    torch.testing.assert_close(actual.cpu(), expected)


def test_ctc_loss_input_length_beyond_the_input_raises():
    lp = torch.randn(5, 1, 4, device=DEV).log_softmax(2)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 5"):
        F.ctc_loss(lp, torch.tensor([[1, 2]], device=DEV), [6], [2]).cpu()
