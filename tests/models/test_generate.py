"""generate() with a KV cache on tpu: greedy tokens identical to CPU; with a static cache, a
repeated generation compiles nothing new."""

import copy

import pytest
import torch

import torchtpu

from .test_hf_models import llama


def tiny_llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return llama().eval()


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
