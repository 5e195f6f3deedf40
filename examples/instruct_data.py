"""A small instruction-tuning data set generated on the fly (no downloads), with a character
tokenizer. Shared by finetune_llama.py, generate.py and benchmarks/llama_train.py."""

from __future__ import annotations

import random

import torch

CHARS = "\0\n abcdefghijklmnopqrstuvwxyz0123456789+-=:?.,'ABCDEFGHIJKLMNOPQRSTUVWXYZ"
PAD, EOS = 0, 1  # "\0" pads, "\n" ends a response
WORDS = ["tpu", "torch", "graph", "tensor", "eager", "kernel", "shape", "batch", "model", "train",
         "cache", "layer", "token", "float", "scale", "device"]


def encode(text: str) -> list[int]:
    return [CHARS.index(c) for c in text]


def decode(ids: list[int]) -> str:
    return "".join(CHARS[i] for i in ids)


def example(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(4)
    if kind == 0:
        a, b = rng.randrange(50), rng.randrange(50)
        return f"Q: add {a} and {b}? A:", f" {a + b}\n"
    if kind == 1:
        w = rng.choice(WORDS)
        return f"Q: reverse {w}? A:", f" {w[::-1]}\n"
    if kind == 2:
        w = rng.choice(WORDS)
        return f"Q: upper {w}? A:", f" {w.upper()}\n"
    w1, w2 = rng.sample(WORDS, 2)
    return f"Q: first of {w1} {w2}? A:", f" {w1}\n"


def batches(num: int, batch_size: int, seq_len: int, seed: int) -> list[dict[str, torch.Tensor]]:
    """Fixed-length batches: input_ids and labels (-100 on the prompt and padding)."""
    rng = random.Random(seed)
    out = []
    for _ in range(num):
        ids = torch.full((batch_size, seq_len), PAD, dtype=torch.long)
        labels = torch.full((batch_size, seq_len), -100, dtype=torch.long)
        for row in range(batch_size):
            prompt, answer = example(rng)
            p, a = encode(prompt), encode(answer)
            seq = (p + a)[:seq_len]
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, len(p) : len(seq)] = torch.tensor(seq[len(p) :])
        out.append({"input_ids": ids, "labels": labels})
    return out
