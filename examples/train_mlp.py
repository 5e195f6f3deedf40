"""Trains a small MLP on synthetic data on the tpu device; the loss falls.

The only device-specific line is `device = tpu.get_device()`.
"""

import time

import torch
from torch import nn

import torchtpu as tpu

device = tpu.get_device()
torch.manual_seed(0)

# A synthetic regression task: y = sin(x @ w) with noise.
x = torch.randn(512, 16)
w = torch.randn(16, 1)
y = torch.sin(x @ w) + 0.05 * torch.randn(512, 1)
x, y = x.to(device), y.to(device)

model = nn.Sequential(
    nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1)
).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

start = time.perf_counter()
for step in range(1, 201):
    idx = torch.randint(0, 512, (64,), device=device)
    loss = nn.functional.mse_loss(model(x[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0 or step == 1:
        with torch.no_grad():  # loss over the whole data set: smoother than one batch
            full = nn.functional.mse_loss(model(x), y)
        print(f"step {step:3d}  loss {full.item():.4f}")
elapsed = time.perf_counter() - start
m = tpu.metrics()
print(
    f"device {device} ({tpu.platform()}): 200 steps in {elapsed:.1f}s, "
    f"{m['compiles']} compiles, {m['executions']} executions, {m['cpu_fallbacks']} CPU fallbacks"
)
