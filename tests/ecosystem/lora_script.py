"""A PEFT LoRA fine-tune of a Llama through the Trainer, as PEFT's quick tour writes one:
`python lora_script.py cpu|tpu OUT`. Default TrainingArguments otherwise; prints the device,
the trainable parameter count, the losses and the LoRA weights' sums as JSON, and saves the
adapter to OUT."""

import json
import sys

import torch
from peft import LoraConfig, TaskType, get_peft_model
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
lora = LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=32, lora_dropout=0.0)
model = get_peft_model(model, lora)
g = torch.Generator().manual_seed(1)
train_dataset = [
    {"input_ids": x, "labels": x} for x in torch.randint(0, 256, (16, 32), generator=g)
]
args = TrainingArguments(
    output_dir=out,
    max_steps=4,
    per_device_train_batch_size=4,
    learning_rate=1e-2,
    logging_steps=1,
    report_to=[],
    save_strategy="no",
    use_cpu=where == "cpu",
)
trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
trainer.train()
model.save_pretrained(out)
trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
print(
    json.dumps(
        {
            "device": str(next(model.parameters()).device),
            "trainable": sum(p.numel() for _, p in trained),
            "names": [n for n, _ in trained][:2],
            "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
            "sums": [p.detach().double().sum().item() for _, p in trained],
        }
    )
)
