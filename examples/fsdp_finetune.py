"""Llama fine-tune with FSDP2 (fully_shard): torchrun --nproc-per-node 2 examples/fsdp_finetune.py
(--parallel fsdp-bf16 for bf16 mixed precision). See distributed_finetune.py."""

from distributed_finetune import main

if __name__ == "__main__":
    main("fsdp")
