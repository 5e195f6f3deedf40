"""A Hugging Face Trainer fine-tune as its documentation writes one, with the default
TrainingArguments (optimizer adamw_torch_fused): `python trainer_script.py cpu|tpu OUT`. The
Trainer picks tpu:0 by itself; `cpu` sets use_cpu. Prints the losses and parameter sums as JSON."""

import json
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

where, out = sys.argv[1], sys.argv[2]
config = LlamaConfig(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
torch.manual_seed(0)
model = LlamaForCausalLM(config)
g = torch.Generator().manual_seed(1)
train_dataset = [
    {"input_ids": x, "labels": x} for x in torch.randint(0, 256, (16, 32), generator=g)
]
args = TrainingArguments(
    output_dir=out,
    max_steps=4,
    per_device_train_batch_size=4,
    learning_rate=1e-3,
    logging_steps=1,
    report_to=[],
    save_strategy="no",
    use_cpu=where == "cpu",
)
trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
trainer.train()
trainer.save_model(out)
print(
    json.dumps(
        {
            "optim": str(args.optim.value),
            "device": str(next(model.parameters()).device),
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
            "sums": [p.detach().double().sum().item() for p in model.parameters()],
        }
    )
)
