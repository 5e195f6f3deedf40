"""torch.optim's fused=True and torch.amp.GradScaler on tpu: the same parameters, optimizer
state and scale as the same loop on CPU (whose fused kernels are the reference)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

import torchtpu

OPTIMIZERS: dict[str, Callable] = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True),
    "adamw_amsgrad_decay": lambda ps: torch.optim.AdamW(
        ps, lr=1e-2, weight_decay=0.1, amsgrad=True, fused=True
    ),
    "adam_decay_maximize": lambda ps: torch.optim.Adam(
        ps, lr=1e-2, weight_decay=0.1, maximize=True, fused=True
    ),
    "adam_tensor_lr": lambda ps: torch.optim.Adam(ps, lr=torch.tensor(1e-2), fused=True),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, fused=True),
    "sgd_nesterov_decay": lambda ps: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, fused=True
    ),
    "sgd_dampening": lambda ps: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, dampening=0.1, fused=True
    ),
    "adagrad": lambda ps: torch.optim.Adagrad(
        ps, lr=0.1, lr_decay=0.01, weight_decay=0.01, fused=True
    ),
}


def train(
    device: str, make_opt: Callable, dtype: torch.dtype = torch.float32, scaler: bool = False
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[float]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(device, dtype)
    opt = make_opt(model.parameters())
    grad_scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    scales = []
    for step in range(5):
        opt.zero_grad()
        x = torch.randn(8, 16, generator=g, dtype=dtype)
        if scaler and step == 1:
            x[0, 0] = float("inf")  # this step's gradients are not finite: it is skipped
        loss = model(x.to(device)).float().square().mean()
        if scaler:
            grad_scaler.scale(loss).backward()
            grad_scaler.step(opt)
            grad_scaler.update()
            scales.append(grad_scaler.get_scale())
        else:
            loss.backward()
            opt.step()
    state = [v.cpu() for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return [p.detach().cpu() for p in model.parameters()], state, scales


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_fused_optimizers_match_cpu(device, name):
    before = torchtpu.metrics()["cpu_fallbacks"]
    params, state, _ = train(device.type, OPTIMIZERS[name])
    assert torchtpu.metrics()["cpu_fallbacks"] == before
    ref_params, ref_state, _ = train("cpu", OPTIMIZERS[name])
    torch.testing.assert_close(params, ref_params, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state, ref_state, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fused", [True, False])
def test_grad_scaler_skips_the_step_with_infs_and_grows_the_scale(device, fused):
    def make(ps):
        return torch.optim.AdamW(ps, lr=1e-2, fused=fused)

    params, state, scales = train(device.type, make, scaler=True)
    ref_params, ref_state, ref_scales = train("cpu", make, scaler=True)
    # Backed off after the step with infs, grown after two good steps (growth_interval=2).
    assert scales == ref_scales == [1024.0, 512.0, 512.0, 1024.0, 1024.0]
    torch.testing.assert_close(params, ref_params, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state, ref_state, rtol=1e-5, atol=1e-6)  # steps: 4, not 5


def test_fused_adamw_in_bfloat16_matches_cpu(device):
    params, state, _ = train(device.type, OPTIMIZERS["adamw"], dtype=torch.bfloat16)
    ref_params, ref_state, _ = train("cpu", OPTIMIZERS["adamw"], dtype=torch.bfloat16)
    torch.testing.assert_close(params, ref_params, rtol=2e-2, atol=1e-2)
    torch.testing.assert_close(state, ref_state, rtol=2e-2, atol=1e-2)
