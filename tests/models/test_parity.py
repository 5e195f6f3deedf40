"""Parity at real sizes: a 17M-parameter HF Llama trained 6 steps on tpu and on CPU from the
same weights and data, as training scripts do it (2 micro-batches of gradient accumulation,
gradient clipping, AdamW, and a manual no_grad update of the embedding), with tied and untied
embeddings, each AdamW implementation, and a torch.compile'd model. Losses equal CPU's at every
step within FLOAT32_RTOL (see there). Issue 33 item 4, in part."""

from __future__ import annotations

import pytest
import torch
import transformers as hf

# Measured (XLA:CPU plugin, AMD EPYC with AVX-512): the largest relative loss difference over
# the 6 steps was 1.6e-7 (untied, fused AdamW) and 5.3e-8 for the other cases, in fused and strict
# mode alike; the tolerance is about 10x that. Issue 33's wrong gradient moved the loss of a
# smaller Llama by 2e-5 relative at step 3, a hundred times more.
FLOAT32_RTOL = 2e-6


def llama(tied: bool) -> torch.nn.Module:
    cfg = hf.LlamaConfig(
        vocab_size=8192,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    return hf.LlamaForCausalLM(cfg)


def train(device: str, tied: bool, optim: str, compiled: bool) -> list[float]:
    model = llama(tied).to(device)
    assert sum(p.numel() for p in model.parameters()) > 10_000_000
    kw = {"foreach": {"foreach": True}, "for-loop": {"foreach": False}, "fused": {"fused": True}}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, **kw[optim])
    forward = torch.compile(model, backend="tpu") if compiled and device != "cpu" else model
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(6):
        total = 0.0
        for _ in range(2):  # gradient accumulation over 2 micro-batches
            x = torch.randint(0, 8192, (2, 64), generator=g).to(device)
            loss = forward(input_ids=x, labels=x).loss / 2
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        with torch.no_grad():  # a manual update outside the optimizer
            model.get_input_embeddings().weight.mul_(0.999)
        losses.append(total)
    return losses


@pytest.mark.parametrize(
    "tied,optim,compiled",
    [
        (True, "foreach", False),
        (False, "fused", False),
        (True, "for-loop", False),
        (True, "fused", True),
    ],
)
def test_llama_17m_training_matches_cpu(device, tied, optim, compiled):
    got = train(device.type, tied, optim, compiled)
    want = train("cpu", tied, optim, compiled)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=FLOAT32_RTOL, atol=0)
