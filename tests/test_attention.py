"""scaled_dot_product_attention runs as one native tpu kernel (forward and backward) and matches
PyTorch CPU: causal, boolean and additive masks, grouped-query heads, dropout."""

import pytest
import torch
import torch.nn.functional as F

import torchtpu


def run(device, q, k, v, **kw):
    q, k, v = (t.detach().to(device).requires_grad_() for t in (q, k, v))
    mask = kw.get("attn_mask")
    if mask is not None:
        kw["attn_mask"] = mask.to(device)
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(device)
    out.backward(grad)
    return [t.detach().cpu() for t in (out, q.grad, k.grad, v.grad)]


CASES = {
    "plain": {},
    "causal": {"is_causal": True},
    "bool_mask": {"attn_mask": torch.rand(6, 9, generator=torch.Generator().manual_seed(1)) > 0.3},
    "additive_mask": {
        "attn_mask": torch.randn(2, 1, 6, 9, generator=torch.Generator().manual_seed(2))
    },
    "scale": {"scale": 0.3},
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("heads", [(4, 4), (4, 2)])
def test_matches_cpu(case, heads):
    g = torch.Generator().manual_seed(0)
    hq, hk = heads
    q, k, v = (
        torch.randn(2, hq, 6, 8, generator=g),
        torch.randn(2, hk, 9, 8, generator=g),
        torch.randn(2, hk, 9, 8, generator=g),
    )
    kw = {**CASES[case], "enable_gqa": hq != hk}
    if case == "causal":
        k, v = k[:, :, :6], v[:, :, :6]
    before = torchtpu.metrics()["executions"]
    got = run("tpu", q, k, v, **kw)
    assert torchtpu.metrics()["executions"] - before <= 12, (
        "SDPA should be one fused program each way"
    )
    for a, e in zip(got, run("cpu", q, k, v, **kw)):
        torch.testing.assert_close(a, e, atol=2e-5, rtol=2e-5)


def test_dropout_mask_is_consistent_between_forward_and_backward():
    # With v = I the output is the dropped-out attention matrix itself, so the mask is visible;
    # the gradients must be those of attention with exactly that mask.
    g = torch.Generator().manual_seed(0)
    p = 0.4
    q, k = torch.randn(2, 2, 16, 16, generator=g), torch.randn(2, 2, 16, 16, generator=g)
    v = torch.eye(16).expand(2, 2, 16, 16).contiguous()
    torch.manual_seed(0)
    out, dq, dk, dv = run("tpu", q, k, v, dropout_p=p)
    keep = out != 0
    assert abs((~keep).float().mean().item() - p) < 0.05

    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    attn = torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1) * keep / (1 - p)
    ref = attn @ v
    ref.backward(torch.randn(ref.shape, generator=torch.Generator().manual_seed(3)))
    torch.testing.assert_close(out, ref.detach(), atol=2e-5, rtol=2e-5)
    for a, e in zip((dq, dk, dv), (q.grad, k.grad, v.grad)):
        torch.testing.assert_close(a, e, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_inputs_without_a_heads_dim_take_the_math_path(causal):
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(4, n, 8, generator=g) for n in (3, 6, 6))
    for a, e in zip(run("tpu", q, k, v, is_causal=causal), run("cpu", q, k, v, is_causal=causal)):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
