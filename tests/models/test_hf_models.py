"""Small configurations of real Hugging Face and torchvision models: forward outputs match CPU,
three AdamW steps match CPU losses, and no op falls back to the CPU."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import transformers as hf

import torchtpu

VOCAB = 128


def llama() -> torch.nn.Module:
    cfg = hf.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    return hf.LlamaForCausalLM(cfg)


def qwen2() -> torch.nn.Module:
    cfg = hf.Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    return hf.Qwen2ForCausalLM(cfg)


def gpt2() -> torch.nn.Module:
    cfg = hf.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        attn_implementation="sdpa",
    )
    return hf.GPT2LMHeadModel(cfg)


def bert() -> torch.nn.Module:
    cfg = hf.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa",
    )
    return hf.BertForMaskedLM(cfg)


def t5() -> torch.nn.Module:
    cfg = hf.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        decoder_start_token_id=0,
    )
    return hf.T5ForConditionalGeneration(cfg)


def vit() -> torch.nn.Module:
    cfg = hf.ViTConfig(
        image_size=16,
        patch_size=4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        num_labels=5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa",
    )
    return hf.ViTForImageClassification(cfg)


def resnet18() -> torch.nn.Module:
    import torchvision

    return torchvision.models.resnet18(num_classes=10)


def text_batch(gen: torch.Generator) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (2, 12), generator=gen)
    return {"input_ids": ids, "labels": ids}


def seq2seq_batch(gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(0, VOCAB, (2, 10), generator=gen),
        "labels": torch.randint(0, VOCAB, (2, 6), generator=gen),
    }


def image_batch(gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "pixel_values": torch.randn(2, 3, 16, 16, generator=gen),
        "labels": torch.randint(0, 5, (2,), generator=gen),
    }


def resnet_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])


def resnet_batch(gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "x": torch.randn(4, 3, 64, 64, generator=gen),
        "y": torch.randint(0, 10, (4,), generator=gen),
    }


def hf_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch).loss


def hf_output(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch).logits


def resnet_output(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(batch["x"])


MODELS: dict[str, tuple[Callable, Callable, Callable, Callable]] = {
    "llama": (llama, text_batch, hf_output, hf_loss),
    "qwen2": (qwen2, text_batch, hf_output, hf_loss),
    "gpt2": (gpt2, text_batch, hf_output, hf_loss),
    "bert": (bert, text_batch, hf_output, hf_loss),
    "t5": (t5, seq2seq_batch, hf_output, hf_loss),
    "vit": (vit, image_batch, hf_output, hf_loss),
    "resnet18": (resnet18, resnet_batch, resnet_output, resnet_loss),
}


def to(batch: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


def train_losses(
    model: torch.nn.Module, batches: list, loss_fn: Callable, device: str
) -> list[float]:
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for batch in batches:
        loss = loss_fn(model, to(batch, device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_cpu(name):
    make, make_batch, output_fn, loss_fn = MODELS[name]
    torch.manual_seed(0)
    model = make()
    gen = torch.Generator().manual_seed(1)
    batches = [make_batch(gen) for _ in range(3)]
    before = torchtpu.metrics()["cpu_fallbacks"]

    ref = output_fn(copy.deepcopy(model).eval(), batches[0])
    with torch.no_grad():
        out = output_fn(copy.deepcopy(model).to("tpu").eval(), to(batches[0], "tpu"))
    torch.testing.assert_close(out.cpu(), ref.detach(), atol=1e-4, rtol=1e-4)

    cpu = train_losses(copy.deepcopy(model), batches, loss_fn, "cpu")
    tpu = train_losses(copy.deepcopy(model), batches, loss_fn, "tpu")
    # AdamW's first steps move every weight by about +-lr whatever the gradient's size, so a
    # gradient element that is ~0 on CPU can step the other way here: losses after the first
    # step agree to ~1e-3, not to the 1e-6 of a single forward.
    torch.testing.assert_close(torch.tensor(tpu[:1]), torch.tensor(cpu[:1]), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), atol=2e-3, rtol=2e-3)
    assert torchtpu.metrics()["cpu_fallbacks"] == before, "an op fell back to the CPU"
