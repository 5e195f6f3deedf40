"""A Hugging Face Trainer fine-tune as its documentation writes one, with the default
TrainingArguments (optimizer adamw_torch_fused): `python trainer_script.py cpu|tpu OUT [resume]`.
The Trainer picks tpu:0 by itself; `cpu` sets use_cpu. Prints the losses and parameter sums as
JSON. With `resume` it saves a checkpoint every 2 steps, and a second Trainer on a fresh model
resumes from step 2's (resume_from_checkpoint): the JSON adds that run's losses and sums."""

import json
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

where, out = sys.argv[1], sys.argv[2]
resume = sys.argv[3:] == ["resume"]
config = LlamaConfig(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
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
    save_strategy="steps" if resume else "no",
    save_steps=2,
    use_cpu=where == "cpu",
)


def fine_tune(checkpoint: str | None = None) -> tuple[torch.nn.Module, Trainer]:
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
    trainer.train(resume_from_checkpoint=checkpoint)
    return model, trainer


def summary(model: torch.nn.Module, trainer: Trainer) -> dict:
    return {
        "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
        "sums": [p.detach().double().sum().item() for p in model.parameters()],
    }


model, trainer = fine_tune()
trainer.save_model(out)
result = {
    "optim": str(args.optim.value),
    "device": str(next(model.parameters()).device),
    **summary(model, trainer),
}
if resume:
    result["resumed"] = summary(*fine_tune(os.path.join(out, "checkpoint-2")))
print(json.dumps(result))
