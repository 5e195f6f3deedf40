"""Variable-length training on real Hugging Face models in fused eager, and ViT under
torch.compile (issue 35's matrix;
`benchmarks/variable_length.py` prints the figures): a new sequence length (ViT: batch size) at
every step, AdamW, `loss.item()` each step. The losses must be CPU's at every step, and after the
first two lengths (the exact programs, then the family's bounded ones) a model compiles at most
4 programs more. T5's decoder length varies apart from its encoder's: its warm-up is three
lengths (a formula in two symbols needs three sizes)."""

from __future__ import annotations

import pytest
import torch

import torchtpu
from torchtpu.testing import variable_length as vl

# Six lengths in [16, 128]; the first two are the warm-up.
SIZES = vl.lengths(6)


@pytest.fixture(autouse=True)
def _bounded_fused():
    was = torchtpu._C._bounded()
    torchtpu._C._set_bounded(True)  # no family from another test
    with torchtpu.mode("fused"):
        yield
    torchtpu._C._set_bounded(was)


def check(name: str, got: vl.Run, want: vl.Run) -> None:
    torch.testing.assert_close(got.losses, want.losses, rtol=1e-5, atol=1e-6)
    after_warm_up = sum(got.compiles[2:])
    assert after_warm_up <= 4, f"{name}: programs per step {got.compiles}"


@pytest.mark.parametrize("name", ["bert", "roberta", "gpt2", "llama", "vit"])
def test_training_at_new_lengths_matches_cpu_without_recompiling(name):
    check(name, vl.run(name, "tpu", SIZES), vl.run(name, "cpu", SIZES))


def test_t5_at_new_encoder_and_decoder_lengths_matches_cpu():
    """T5 with labels half as long as its inputs: two lengths, and a relative-position bias of
    [t, t] (whose flat copies, t*t, fit no formula: every length compiled, 3-5 programs each)."""
    got = vl.run("t5", "tpu", SIZES)
    torch.testing.assert_close(got.losses, vl.run("t5", "cpu", SIZES).losses, rtol=1e-5, atol=1e-6)
    assert sum(got.compiles[3:]) <= 4, f"t5: programs per step {got.compiles}"


def test_marked_lengths_run_bounded_from_the_first():
    got = vl.run("bert", "tpu", SIZES, marked=True)
    check("bert marked", got, vl.run("bert", "cpu", SIZES))


@pytest.mark.parametrize("name", ["gpt2", "vit"])
def test_dropout_keeps_one_program_per_bound(name):
    """Dropout's draws are made for the padded shape ([16s, s] for GPT-2's attention mask, not a
    flat 16s^2): the real part is distributed as CPU's (tests/test_bounded_eager.py checks the
    draws), so only the counts are checked here."""
    got = vl.run(name, "tpu", SIZES, dropout=0.1)
    assert all(torch.isfinite(torch.tensor(got.losses)))
    assert sum(got.compiles[2:]) <= 4, got.compiles


def test_compiled_vit_at_new_batch_sizes_matches_cpu():
    """ViT under torch.compile(backend="tpu") at a new batch size every step: its backward graphs
    take [17 * batch, hidden] activations, and its Linear layers view [batch, 17, hidden] as
    [17 * batch, hidden] and back (a split XLA once took the wrong dim of, giving a mean a wrong
    count). Losses are CPU's at every step."""
    torch._dynamo.reset()
    got = vl.run("vit", "tpu", SIZES, compiled=True)
    torch._dynamo.reset()
    torch.testing.assert_close(got.losses, vl.run("vit", "cpu", SIZES).losses, rtol=1e-5, atol=1e-6)
    assert sum(got.compiles[2:]) <= 5, got.compiles
