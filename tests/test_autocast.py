"""torch.autocast("tpu") follows CUDA's cast policy, and a bf16 training step works."""

import copy

import torch
from torch import nn

import torchtpu  # noqa: F401


def test_amp_supported_dtype():
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()
    assert torch.amp.is_autocast_available("tpu")


def test_cast_policy(device):
    x = torch.randn(4, 8, device=device)
    w = torch.randn(8, 8, device=device)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        assert (x @ w).dtype == torch.bfloat16  # lower precision
        assert nn.functional.linear(x, w).dtype == torch.bfloat16
        assert torch.exp(x @ w).dtype == torch.float32  # fp32 policy
        assert nn.functional.layer_norm(x, (8,)).dtype == torch.float32
        assert torch.softmax(x @ w, -1).dtype == torch.float32  # fp32_set_opt_dtype
        assert torch.cat([x, (x @ w)]).dtype == torch.float32  # promote
        assert (x + 1).dtype == torch.float32  # untouched ops keep their dtype
    assert (x @ w).dtype == torch.float32


def test_bf16_training_step_close_to_fp32(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    losses = {}
    for amp in (False, True):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        steps = []
        for _ in range(5):
            with torch.autocast("tpu", dtype=torch.bfloat16, enabled=amp):
                loss = nn.functional.cross_entropy(m(x.to(device)), y.to(device))
            assert loss.dtype == torch.float32
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps.append(loss.item())
        assert all(p.dtype == torch.float32 for p in m.parameters())
        losses[amp] = steps
    assert losses[True][-1] < losses[True][0]
    torch.testing.assert_close(
        torch.tensor(losses[True]), torch.tensor(losses[False]), atol=3e-2, rtol=3e-2
    )
