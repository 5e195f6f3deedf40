"""generate() with a KV cache on tpu: greedy tokens identical to CPU; with a static cache, a
repeated generation compiles nothing new."""

import copy

import pytest
import torch
import transformers as hf

import torchtpu


def tiny_llama() -> hf.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = hf.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
        pad_token_id=0,
        eos_token_id=None,
    )
    return hf.LlamaForCausalLM(cfg).eval()


def greedy(model, ids, cache):
    with torch.no_grad():
        out = model.generate(
            ids,
            max_new_tokens=12,
            min_new_tokens=12,
            do_sample=False,
            cache_implementation=cache,
            pad_token_id=0,
        )
    return out[0].tolist()


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_greedy_tokens_match_cpu(cache):
    model = tiny_llama()
    ids = torch.tensor([[5, 9, 3, 17, 2]])
    ref = greedy(model, ids, cache)
    tpu_model = copy.deepcopy(model).to("tpu")
    assert greedy(tpu_model, ids.to("tpu"), cache) == ref
    if cache == "static":
        before = torchtpu.metrics()["compiles"]
        assert greedy(tpu_model, ids.to("tpu"), cache) == ref
        assert torchtpu.metrics()["compiles"] == before
