"""Buffer donation in fused mode: a buffer that nothing holds any more after an in-place update is
given to the program that computes its new value, which writes into its memory. These tests
switch to fused mode themselves, so they run in every suite mode."""

import pytest
import torch

import torchtpu

N = 1 << 18  # float32 elements: 1 MiB, the smallest buffer donated


@pytest.fixture
def fused(device):
    with torchtpu.mode("fused"):
        yield device


def donated() -> int:
    return torchtpu.metrics()["donated_buffers"]


def test_an_in_place_loop_donates_and_keeps_values(fused):
    x = torch.zeros(N, device=fused)
    y = torch.arange(N, dtype=torch.float32, device=fused)
    torch.tpu.synchronize()
    before = donated()
    ref_x, ref_y = torch.zeros(N), torch.arange(N, dtype=torch.float32)
    for _ in range(5):
        x.mul_(0.5).add_(y)
        ref_x.mul_(0.5).add_(ref_y)
        torch.tpu.synchronize()
    assert donated() - before == 5
    torch.testing.assert_close(x.cpu(), ref_x)
    torch.testing.assert_close(y.cpu(), ref_y)  # read by every program, never donated


def test_a_buffer_another_tensor_holds_is_not_donated(fused):
    a = torch.full((N,), 2.0, device=fused)
    b = a.clone()
    view = a.view(512, -1)  # the same storage
    a.add_(1)
    assert b[0].item() == 2.0  # the clone kept the old value
    assert view[0, 0].item() == 3.0 and a[-1].item() == 3.0
    c = torch.full((N,), 2.0, device=fused)
    torch.tpu.synchronize()
    old = c.clone()  # may share c's buffer: then it must not be given away
    keep = c.detach()  # the same storage: the update is seen through both
    c.add_(1)
    assert keep[5].item() == 3.0 and old[5].item() == 2.0
    d = torch.full((N,), 2.0, device=fused)
    torch.tpu.synchronize()
    before = donated()
    d.add_(1)
    assert d[0].item() == 3.0
    assert donated() - before == 1


def test_an_update_that_ends_a_program_is_donated(fused):
    """A program cut after an in-place update runs once the update's caller has let go of the
    value it overwrote: run while the caller held it, the buffer looked held and was kept."""
    x = torch.zeros(N, device=fused)
    torch.tpu.synchronize()
    old = torchtpu._C._fused_max_ops()
    torchtpu._C._set_fused_max_ops(1)  # every op is a program of its own
    try:
        before = donated()
        for _ in range(3):
            x.add_(1)
        assert x[-1].item() == 3.0
        assert donated() - before == 3
    finally:
        torchtpu._C._set_fused_max_ops(old)


def test_a_padded_buffer_is_donated_to_its_bounded_program(fused):
    """Once sizes form a family, values live in padded buffers; the family's program updates one
    in place (parameter and result have one capacity), and the padding never shows."""
    runs = []
    for k in range(1, 5):
        d = torch.full((N + 100 * k,), 2.0, device=fused)
        torch.tpu.synchronize()
        before, bounded = donated(), torchtpu.metrics()["bounded_runs"]
        d.mul_(3)
        assert d.sum().item() == 6.0 * d.numel() and d.shape == (N + 100 * k,)
        runs.append((donated() - before, torchtpu.metrics()["bounded_runs"] - bounded))
    # From the second size on, `full` and `mul_` run as their families' programs: each update
    # was in place, on a padded buffer (an exact program could not have taken it).
    assert all(n == 1 and b > 0 for n, b in runs[1:]), runs


def test_events_recorded_before_a_donation_still_complete(fused):
    x = torch.ones(N, device=fused)
    x.mul_(3)
    start = torch.tpu.Event(enable_timing=True)
    start.record()  # waits on the last output: x's buffer, given away by the next program
    x.add_(1)
    end = torch.tpu.Event(enable_timing=True)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert start.elapsed_time(end) >= 0
    assert x[0].item() == 4.0


def test_adamw_gives_the_same_bits_with_and_without_donation(fused):
    def train(donate: bool) -> tuple[torch.Tensor, int]:
        torchtpu._C._set_donation(donate)
        torch.tpu.synchronize()
        # Where a program ends depends on the loops seen so far, and XLA may round a value
        # differently in another program: setting the limit starts both runs from the same state.
        torchtpu._C._set_fused_max_ops(torchtpu._C._fused_max_ops())
        try:
            torch.manual_seed(0)
            model = torch.nn.Linear(512, 1024).to(fused)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            before = donated()
            for _ in range(4):
                opt.zero_grad()
                model(torch.randn(8, 512).to(fused)).square().mean().backward()
                opt.step()
            return model.weight.cpu(), donated() - before
        finally:
            torchtpu._C._set_donation(True)

    with_donation, n = train(True)
    without, none = train(False)
    assert n > 0 and none == 0  # the 2 MiB weight and its AdamW state were updated in place
    assert torch.equal(with_donation, without)


def test_tied_llama_training_equals_cpu_with_donation(fused):
    """The case donation first broke: a tied-embedding HF Llama (2 MiB embedding) trained with
    AdamW in fused mode. Each step's program wrote the new weight into the old one's memory, and
    XLA:CPU's XNNPACK fusions, which keep packed weights while an argument's address is unchanged,
    read the previous step's weight in the next backward (losses off from CPU from step 3)."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=True)
    g = torch.Generator().manual_seed(1)
    data = [torch.randint(0, 2048, (8, 128), generator=g) for _ in range(4)]

    def train(dev: str) -> list[float]:
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for x in data:
            x = x.to(dev)
            loss = model(input_ids=x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return losses

    before = donated()
    got = train(fused)
    assert donated() - before > 0  # the embedding and its AdamW state were donated
    # float32 over 4 steps of a 4-layer model: CPU and XLA:CPU agree to about 1e-5 here.
    torch.testing.assert_close(torch.tensor(got), torch.tensor(train("cpu")), rtol=2e-5, atol=2e-5)
