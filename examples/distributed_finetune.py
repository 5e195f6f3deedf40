"""The Llama fine-tune of finetune_llama.py, data-parallel (DDP or FSDP2) or tensor-parallel
(DTensor), written as for CUDA under torchrun. Shared by ddp_finetune.py and fsdp_finetune.py.

Every rank reads the same global batch and trains on its rows [rank::world]; the logged loss is
the mean over ranks. `--emulate N` runs the same N shards one after another in one process (no
torch.distributed): the reference a distributed run must match.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from instruct_data import batches
from llama_config import small_llama_config
from tqdm import tqdm
from transformers import LlamaForCausalLM

import torchtpu as tpu


def tiny(cfg):  # a 2-layer, 64-wide model: what the tests train
    cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = 64, 128, 2
    return cfg


def build(args: argparse.Namespace, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = small_llama_config()
    if args.tiny:
        cfg = tiny(cfg)
    return LlamaForCausalLM(cfg).to(device)


def tp_plan() -> dict:
    """Megatron-style tensor parallelism of a Llama decoder layer: q/k/v and gate/up split by
    output features, o and down by input features (one all_reduce after each)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(),
    }


def wrap(model: torch.nn.Module, how: str, device: torch.device) -> torch.nn.Module:
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model)  # no device_ids: as for any non-CUDA device
    if how == "ddp-ids":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[device.index])
    if how.startswith("fsdp"):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        kw = {"mp_policy": mp} if how == "fsdp-bf16" else {}
        for layer in model.model.layers:
            fully_shard(layer, **kw)
        return fully_shard(model, **kw)
    if how == "tp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for layer in model.model.layers:
            parallelize_module(layer, mesh, tp_plan())
        return model
    raise ValueError(how)


def main(default_parallel: str) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--parallel", default=default_parallel,
                   choices=["ddp", "ddp-ids", "fsdp", "fsdp-bf16", "tp"])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=16, help="global batch")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--emulate", type=int, default=0, help="N shards in one process, no dist")
    p.add_argument("--losses", help="write the loss curve (JSON) here")
    p.add_argument("--plot", default=None,
                   help="loss curve PNG (default demo_out/<parallel>_finetune_loss.png; '' for none)")
    args = p.parse_args()

    device = tpu.get_device()  # the only line that differs from the CUDA version
    if args.emulate:
        rank, world = 0, args.emulate
    else:
        dist.init_process_group("tpu")
        rank, world = dist.get_rank(), dist.get_world_size()
    model = build(args, device)
    if not args.emulate:
        model = wrap(model, args.parallel, device)
    # Only the decoder layers are DTensors under TP: the foreach kernels cannot mix them.
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01,
                            foreach=False if args.parallel == "tp" and not args.emulate else None)
    data = batches(args.steps, batch_size=args.batch, seq_len=40, seed=0)
    losses, stamps = [], []
    for batch in tqdm(data, desc=f"{args.parallel} x{world}", disable=rank != 0, unit="step"):
        opt.zero_grad(set_to_none=True)
        if args.emulate:
            loss = sum(
                model(**{k: v[r::world].to(device) for k, v in batch.items()}).loss
                for r in range(world)
            ) / world
            loss.backward()
        else:
            shard = batch if args.parallel == "tp" else {k: v[rank::world] for k, v in batch.items()}
            loss = model(**{k: v.to(device) for k, v in shard.items()}).loss
            loss.backward()
            loss = loss.detach().clone()
            dist.all_reduce(loss, dist.ReduceOp.AVG)
        opt.step()
        losses.append(loss.item())
        stamps.append(time.perf_counter())
    if rank == 0:
        # Steps after the first two (compiles, connections), each ended by its loss.item().
        timed = stamps[2:]
        ms = (timed[-1] - timed[0]) / (len(timed) - 1) * 1e3 if len(timed) > 1 else float("nan")
        print(f"{args.parallel} on {world} x {device.type}: loss {losses[0]:.4f} -> "
              f"{losses[-1]:.4f}; {ms:.1f} ms/step; {tpu.metrics()['compiles']} compiles; "
              f"transport {'none' if args.emulate else tpu.distributed.transport()}")
        if args.losses:
            with open(args.losses, "w") as f:
                json.dump(losses, f)
        if args.plot is None:
            out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo_out")
            os.makedirs(out, exist_ok=True)
            args.plot = os.path.normpath(os.path.join(out, f"{args.parallel}_finetune_loss.png"))
        if args.plot:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(7, 4))
            ax.plot(losses, label=f"{args.parallel}, {world} processes")
            ax.set_xlabel("step")
            ax.set_ylabel("loss")
            ax.legend()
            fig.savefig(args.plot, dpi=120)
            print(f"loss plot: {args.plot}")
    if not args.emulate:
        dist.destroy_process_group()


if __name__ == "__main__":
    main("ddp")
