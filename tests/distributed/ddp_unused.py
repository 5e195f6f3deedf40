"""DDP(find_unused_parameters=True) on tpu under torchrun: the reducer copies its map of used
parameters through pinned host memory and asserts it is pinned (HF Trainer turns this on)."""

import torch
import torch.distributed as dist

import torchtpu

dist.init_process_group()
rank = dist.get_rank()
dev = torchtpu.get_device()
torch.manual_seed(0)
parts = torch.nn.ModuleDict({"a": torch.nn.Linear(4, 2), "b": torch.nn.Linear(4, 2)}).to(dev)


class OneUsed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.parts = parts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.parts["a"](x)  # "b" is never used


model = torch.nn.parallel.DistributedDataParallel(OneUsed(), find_unused_parameters=True)
for _ in range(2):
    model(torch.full((3, 4), rank + 1.0, device=dev)).sum().backward()
grad = parts["a"].weight.grad.cpu()
# Each step averages rank 0's and rank 1's gradients (3 rows of 1s and of 2s): 4.5 per element.
assert torch.equal(grad, torch.full((2, 4), 9.0)), grad
assert parts["b"].weight.grad is None
print(f"PASS ddp_unused rank {rank}", flush=True)
dist.destroy_process_group()
