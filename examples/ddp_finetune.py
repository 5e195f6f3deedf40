"""Llama fine-tune with DistributedDataParallel: torchrun --nproc-per-node 2 examples/ddp_finetune.py

As for CUDA but for `device = tpu.get_device()` (see distributed_finetune.py)."""

from distributed_finetune import main

if __name__ == "__main__":
    main("ddp")
