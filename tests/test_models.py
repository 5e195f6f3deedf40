"""Small models trained 20 steps on tpu and on CPU from the same weights: losses match."""

import copy

import pytest
import torch
from torch import nn

import torchtpu


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(20, 64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.GELU(),
        nn.LayerNorm(64),
        nn.Linear(64, 5),
    )


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=1, padding=1),
        nn.SiLU(),
        nn.AvgPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.0),
        nn.Linear(16, 5),
    )


def train(
    model: nn.Module, xs: torch.Tensor, ys: torch.Tensor, device: str, opt_name: str
) -> list[float]:
    model = model.to(device)
    params = list(model.parameters())
    opt = (
        torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
        if opt_name == "adamw"
        else torch.optim.SGD(params, lr=0.05, momentum=0.9)
    )
    losses = []
    for step in range(20):
        x, y = xs[step].to(device), ys[step].to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    "make,shape,opt_name",
    [
        (mlp, (16, 20), "adamw"),
        (mlp, (16, 20), "sgd"),
        (cnn, (8, 3, 16, 16), "adamw"),
        (cnn, (8, 3, 16, 16), "sgd"),
    ],
)
def test_training_matches_cpu(make, shape, opt_name):
    torch.manual_seed(0)
    model = make()
    xs = torch.randn(20, *shape)
    proj = torch.randn(xs[0, 0].numel(), 5)
    ys = (xs.flatten(2) @ proj).argmax(-1)  # a learnable labelling, so the loss must fall
    cpu_losses = train(copy.deepcopy(model), xs, ys, "cpu", opt_name)
    before = torchtpu.metrics()["cpu_fallbacks"]
    tpu_losses = train(copy.deepcopy(model), xs, ys, "tpu", opt_name)
    assert torchtpu.metrics()["cpu_fallbacks"] == before
    torch.testing.assert_close(
        torch.tensor(tpu_losses), torch.tensor(cpu_losses), atol=2e-4, rtol=2e-4
    )
    assert tpu_losses[-1] < tpu_losses[0]
