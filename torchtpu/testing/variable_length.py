"""Variable-length training on real Hugging Face models: the matrix of issue 35.

Each model is a small configuration of a real transformers class, trained with AdamW on batches
whose length (or, for ViT, batch size) is new at every step, exactly as the same loop on CPU.
`run` returns the losses, the programs compiled per step and the seconds, so that
`tests/models/test_variable_length.py` can check them against CPU and
`benchmarks/variable_length.py` can print the figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

VOCAB = 1000


@dataclass
class Run:
    losses: list[float]
    compiles: list[int]  # programs compiled (or loaded from the disk cache) at each step
    seconds: float


def _bert(dropout: float) -> torch.nn.Module:
    import transformers as hf

    cfg = hf.BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout, num_labels=2,
    )  # fmt: skip
    return hf.BertForSequenceClassification(cfg)


def _roberta(dropout: float) -> torch.nn.Module:
    import transformers as hf

    cfg = hf.RobertaConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout, num_labels=2, max_position_embeddings=160,
    )  # fmt: skip
    return hf.RobertaForSequenceClassification(cfg)


def _gpt2(dropout: float) -> torch.nn.Module:
    import transformers as hf

    cfg = hf.GPT2Config(
        vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
    )  # fmt: skip
    return hf.GPT2LMHeadModel(cfg)


def _llama(dropout: float) -> torch.nn.Module:
    import transformers as hf

    cfg = hf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=128,
        attention_dropout=dropout,
    )  # fmt: skip
    return hf.LlamaForCausalLM(cfg)


def _t5(dropout: float) -> torch.nn.Module:
    import transformers as hf

    cfg = hf.T5Config(
        vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        dropout_rate=dropout, decoder_start_token_id=0,
    )  # fmt: skip
    return hf.T5ForConditionalGeneration(cfg)


def _vit(dropout: float) -> torch.nn.Module:
    import transformers as hf

    cfg = hf.ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout, num_labels=10,
    )  # fmt: skip
    return hf.ViTForImageClassification(cfg)


MODELS: dict[str, Callable[[float], torch.nn.Module]] = {
    "bert": _bert,
    "roberta": _roberta,
    "gpt2": _gpt2,
    "llama": _llama,
    "t5": _t5,
    "vit": _vit,
}


def batches(name: str, sizes: list[int], batch: int = 4, seed: int = 1) -> list[dict]:
    """The model's inputs at each size: a sequence length in [16, 128] (T5: the encoder's, its
    labels half as long), or for ViT a batch size. Half of each text batch is padding-masked
    from the middle on, as a tokenizer pads a batch."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        if name == "vit":
            out.append(
                {
                    "pixel_values": torch.randn(n, 3, 32, 32, generator=g),
                    "labels": torch.randint(0, 10, (n,), generator=g),
                }
            )
            continue
        ids = torch.randint(2, VOCAB, (batch, n), generator=g)
        mask = torch.ones(batch, n, dtype=torch.long)
        mask[: batch // 2, n // 2 :] = 0
        if name in ("bert", "roberta"):
            if name == "roberta":
                ids[: batch // 2, n // 2 :] = 1  # RoBERTa's pad id: its positions skip them
            labels = torch.randint(0, 2, (batch,), generator=g)
            out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
        elif name == "t5":
            labels = torch.randint(2, VOCAB, (batch, max(n // 2, 2)), generator=g)
            out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
        else:
            labels = ids.masked_fill(mask == 0, -100)
            out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return out


def lengths(steps: int, seed: int = 0, low: int = 16, high: int = 128) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, (steps,), generator=g).tolist()


def _programs() -> int:
    import torchtpu

    m = torchtpu.metrics()
    return m["compiles"] + m["disk_cache_hits"]


def run(
    name: str,
    device: str,
    sizes: list[int],
    *,
    dropout: float = 0.0,
    compiled: bool = False,
    marked: bool = False,
    seed: int = 0,
) -> Run:
    """Trains `name` on one batch per size (AdamW, `loss.item()` each step) on `device`: fused
    eager, or `torch.compile(backend="tpu")` when `compiled`; `marked` marks the varying dim of
    every input dynamic up to 128 (torchtpu.mark_dynamic: Dynamo's mark and fused eager's hint)."""
    import torchtpu

    torch.manual_seed(seed)
    model = MODELS[name](dropout).to(device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step_fn = model
    if compiled:
        step_fn = torch.compile(model, backend="tpu" if device != "cpu" else "eager")
    on_tpu = device != "cpu"
    losses, compiles = [], []
    start = time.perf_counter()
    for inputs in batches(name, sizes):
        inputs = {k: v.to(device) for k, v in inputs.items()}
        if marked:
            for v in inputs.values():
                if v.dim() >= 2 and name != "vit":
                    torchtpu.mark_dynamic(v, 1, min=4, max=128)
                elif name == "vit":
                    torchtpu.mark_dynamic(v, 0, min=4, max=128)
        before = _programs() if on_tpu else 0
        loss = step_fn(**inputs).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        compiles.append(_programs() - before if on_tpu else 0)
    return Run(losses, compiles, time.perf_counter() - start)
