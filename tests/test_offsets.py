"""A view's storage offset is a run-time parameter of the programs that read or write it: a
Python loop over positions (rows of a matrix, a KV cache's time steps) compiles once, in every
mode, and gives the values PyTorch gives on CPU."""

import pytest
import torch
from test_fused import max_ops

import torchtpu


def new_programs() -> int:
    """Executables built since the last reset: compiled now or loaded from the disk cache."""
    m = torchtpu.metrics()
    return m["compiles"] + m["disk_cache_hits"]


N = 40


def row_writes(x, positions):
    for i in positions:
        x[i] = torch.full((8,), float(i), device=x.device)


def column_writes(x, positions):
    for i in positions:
        x[:, i] = float(i)


def cache_writes(x, positions):
    k = torch.arange(24.0, device=x.device).view(2, 3, 1, 4)
    for i in positions:
        x[:, :, i : i + 1] = k * i


def row_reads(x, positions):
    acc = torch.zeros(8, device=x.device)
    for i in positions:
        acc = acc + x[i] * i
    x[0] += acc


def column_reads(x, positions):
    for i in positions:
        x[0, 0] += x[:, i].sum()


LOOPS = {
    row_writes: (N, 8),
    column_writes: (6, N),
    cache_writes: (2, 3, N, 4),
    row_reads: (N, 8),
    column_reads: (6, N),
}


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("loop", LOOPS.keys(), ids=[f.__name__ for f in LOOPS])
def test_loop_over_positions_compiles_once(device, mode, loop):
    shape = LOOPS[loop]
    ref = torch.arange(float(torch.Size(shape).numel())).view(shape)
    x = ref.to(device)
    # In fused mode a short size limit cuts the loop into many programs, which without offsets as
    # parameters would each be compiled for their own positions.
    with torchtpu.mode(mode), max_ops(8):
        loop(x, range(2))  # builds what the loop needs
        torch.tpu.synchronize()
        torchtpu.reset_metrics()
        loop(x, range(2, N))
        torch.tpu.synchronize()
        programs = new_programs()
    loop(ref, range(N))
    torch.testing.assert_close(x.cpu(), ref)
    # Strict mode: none (the body's programs exist). Fused mode: the loop's cuts can fall at
    # other points of the body than in the first two iterations, and the last cut is shorter.
    assert programs <= (0 if mode == "strict" else 3), programs


def test_loop_of_row_writes_in_strict_mode_compiles_at_most_two(device):
    with torchtpu.mode("strict"):
        x = torch.zeros(300, 8, device=device)
        rows = torch.arange(8.0, device=device)
        torch.tpu.synchronize()
        torchtpu.reset_metrics()
        for i in range(300):
            x[i] = rows + i
        out = x.cpu()
    assert new_programs() <= 2
    expected = torch.arange(8.0) + torch.arange(300.0)[:, None]
    torch.testing.assert_close(out, expected)


# Views of every shape the view programs handle, each written and read at several offsets.
VIEWS = {
    "row": lambda x, i: x[i],
    "column": lambda x, i: x[:, i],
    "block": lambda x, i: x[i : i + 2, 1:4],
    "transposed block": lambda x, i: x.t()[1:3, i : i + 3],
    "every other": lambda x, i: x[i, ::2],
    "diagonal": lambda x, i: x.diagonal(offset=i),
    "wraps a row": lambda x, i: x.view(-1)[i * 7 + 5 : i * 7 + 9],
    "wraps as 2-d": lambda x, i: x.as_strided((2, 3), (8, 1), 6 + i),
    "overlapping": lambda x, i: x.as_strided((3, 4), (1, 1), i),
    "int32 as bytes": lambda x, i: x.view(torch.int32)[i].view(torch.uint8),
}


@pytest.mark.parametrize("view", VIEWS.keys())
def test_views_read_and_write_at_each_offset(device, view):
    take = VIEWS[view]
    base = torch.arange(48.0).view(6, 8)
    x, ref = base.clone().to(device), base.clone()
    for i in range(3):
        torch.testing.assert_close(take(x, i).cpu(), take(ref, i))
        if view != "overlapping":  # writing overlapping elements has no defined order
            take(ref, i).copy_(take(ref, i) * -1 - i)
            take(x, i).copy_(take(x, i) * -1 - i)
            torch.testing.assert_close(x.cpu(), ref, equal_nan=True)


def test_kv_cache_decoding_loop_matches_cpu(device):
    """A decoding loop: write position t of the cache, then attend over positions [0, t]."""

    def decode(dev):
        torch.manual_seed(0)
        q = torch.randn(6, 2, 1, 8).to(dev)
        new_k = torch.randn(6, 2, 1, 8).to(dev)
        cache = torch.zeros(2, 6, 8, device=dev)
        outs = []
        for t in range(6):
            cache[:, t : t + 1] = new_k[t]
            keys = cache[:, : t + 1]
            outs.append(torch.softmax(q[t] @ keys.transpose(-1, -2), -1) @ keys)
        return torch.cat(outs, 1)

    torch.testing.assert_close(decode(device).cpu(), decode("cpu"))


@pytest.mark.parametrize("mode", ["fused", "strict"])
def test_permuted_tensors_through_their_storages_match_cpu(device, mode):
    """An op on a permuted tensor returns one laid out the same way (T5's masked position bias);
    its storage holds its dims in memory order, and reads of every kind (the permuted view
    again, another permutation, a slice, a reinterpreting dtype view, a write into part of it)
    see the values CPU sees."""

    def run(dev):
        torch.manual_seed(0)
        bias = torch.randn(5, 7, 4).to(dev).permute(2, 0, 1).unsqueeze(0)  # [1, 4, 5, 7]
        mask = (torch.arange(7) % 3 == 0).to(dev)
        out = torch.where(mask, bias, -1.5) * 2  # strides follow bias's
        back = out.squeeze(0).permute(1, 2, 0)  # [5, 7, 4], contiguous in memory
        part = out[:, 1:3, 2:].clone()
        out[:, :, 0] = 9.0  # a write into part of the permuted tensor
        bits = back.view(torch.int32) & 0xFF
        return [out.stride(), out, back.contiguous(), part, out.transpose(2, 3), bits]

    with torchtpu.mode(mode):
        got = run(device)
    want = run("cpu")
    assert got[0] == want[0]  # the same layout as CPU's
    for g, w in zip(got[1:], want[1:]):
        torch.testing.assert_close(g.cpu(), w)
