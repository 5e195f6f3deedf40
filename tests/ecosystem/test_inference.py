"""Inference as the libraries' docs write it, on tpu and on CPU: transformers.pipeline
("text-generation", device="tpu") and sentence-transformers' encode(device="tpu"), with a
small Llama and BERT and a word-level tokenizer built here (the tests run offline)."""

from __future__ import annotations

import pytest
import torch
import transformers as hf
from tokenizers import Tokenizer, models, pre_tokenizers

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "mat",
    "log",
    "and",
    "quickly",
    "slowly",
    "big",
    "small",
    "red",
    "blue",
]


def tokenizer() -> hf.PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return hf.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        eos_token="[SEP]",
    )


def test_text_generation_pipeline_matches_cpu():
    cfg = hf.LlamaConfig(
        vocab_size=4 + len(WORDS),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=0,
        eos_token_id=None,
    )
    torch.manual_seed(0)
    model = hf.LlamaForCausalLM(cfg)
    texts = {}
    for device in ("cpu", "tpu"):
        pipe = hf.pipeline("text-generation", model=model, tokenizer=tokenizer(), device=device)
        assert pipe.device.type == device
        prompts = ["the cat sat on", "a big dog"]
        out = pipe(prompts, max_new_tokens=12, do_sample=False, return_tensors=True)
        texts[device] = [list(o[0]["generated_token_ids"]) for o in out]
    assert texts["tpu"] == texts["cpu"]
    assert [len(t) for t in texts["tpu"]] == [4 + 12, 3 + 12]  # the prompt and 12 new tokens


def test_sentence_transformers_encode_matches_cpu(tmp_path, monkeypatch):
    st = pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = hf.BertConfig(
        vocab_size=4 + len(WORDS),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    hf.BertModel(cfg).save_pretrained(tmp_path)
    tokenizer().save_pretrained(tmp_path)
    encoder = st.SentenceTransformer(str(tmp_path), device="cpu")  # a plain model: mean pooling
    sentences = ["the cat sat on the mat", "a dog ran", "red and blue and big and small"]
    want = encoder.encode(sentences, device="cpu", convert_to_tensor=True)
    got = encoder.encode(sentences, device="tpu", convert_to_tensor=True)
    assert got.device.type == "tpu" and got.shape == (3, 64)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_save_pretrained_and_from_pretrained_with_device_map(tmp_path):
    cfg = hf.LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    hf.LlamaForCausalLM(cfg).to("tpu").save_pretrained(tmp_path / "saved")  # from the device
    cpu = hf.LlamaForCausalLM.from_pretrained(tmp_path / "saved")
    model = hf.LlamaForCausalLM.from_pretrained(tmp_path / "saved", device_map="tpu")
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    x = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = cpu(input_ids=x).logits
        got = model(input_ids=x.to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
