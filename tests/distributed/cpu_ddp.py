"""A CPU-only DDP script, as PyTorch's tutorial writes one (init_process_group() with no
backend): run under torchrun with torchtpu installed and with its autoload off, it must print
the same thing."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group()
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 8, generator=g)).square().mean().backward()
    opt.step()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
total = sum(p.detach().double().sum().item() for p in model.parameters())
print(f"RESULT rank {rank} {total!r} {t.item()!r}", flush=True)
dist.destroy_process_group()
