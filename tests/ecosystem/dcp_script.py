"""FSDP2 training checkpointed with torch.distributed.checkpoint, as PyTorch's DCP tutorial writes
it: `torchrun --nproc-per-node 2 dcp_script.py cpu|tpu CHECKPOINT_DIR`. Trains 2 steps, saves
the sharded model and optimizer, trains 2 more; then a fresh model and optimizer load the
checkpoint and train the same 2 steps. Prints, per rank, both runs' last losses and parameter
sums as JSON."""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM

where, path = sys.argv[1], sys.argv[2]
rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group()
device = torch.device(where, rank) if where != "cpu" else torch.device("cpu")
if where != "cpu":
    torch.accelerator.set_device_index(rank)
mesh = init_device_mesh(device.type, (dist.get_world_size(),))


def build() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def batch(step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randint(0, 256, (2, 16), generator=g).to(device)


def train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: range) -> list[float]:
    losses = []
    for step in steps:
        x = batch(step)
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def total(model: torch.nn.Module) -> float:
    return sum(p.full_tensor().double().sum().item() for p in model.parameters())


model, opt = build()
train(model, opt, range(2))
model_state, optim_state = get_state_dict(model, opt)
dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)
uninterrupted = train(model, opt, range(2, 4))
uninterrupted_sum = total(model)

model, opt = build()  # as a new job would: fresh weights, then the checkpoint
model_state, optim_state = get_state_dict(model, opt)
state = {"model": model_state, "optim": optim_state}
dcp.load(state, checkpoint_id=path)
set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
resumed = train(model, opt, range(2, 4))
print(
    json.dumps(
        {
            "rank": rank,
            "device": str(next(model.parameters()).device),
            "uninterrupted": uninterrupted,
            "resumed": resumed,
            "sums": [uninterrupted_sum, total(model)],
        }
    ),
    flush=True,
)
dist.destroy_process_group()
