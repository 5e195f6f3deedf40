"""Bounded programs in fused eager mode (csrc/eager/bounded.h): flushes that differ only in sizes
(a KV cache that grows a row per step, batches of a new length) share one program per bound.
Every result is checked against the same computation on CPU at every length, and the tests
count the programs built."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torchtpu


@pytest.fixture(autouse=True)
def _bounded_fused():
    was = torchtpu._C._bounded()
    torchtpu._C._set_bounded(True)  # also forgets families other tests left
    with torchtpu.mode("fused"):
        yield
    torchtpu._C._set_bounded(was)


def new_programs() -> int:
    m = torchtpu.metrics()
    return m["compiles"] + m["disk_cache_hits"]


def bounded_runs() -> int:
    return torchtpu.metrics()["bounded_runs"]


def run_fused(script: str, **env: str) -> subprocess.CompletedProcess:
    """Runs `script` in a fresh process in fused mode, compile cache off, with `env` set; it must
    succeed."""
    env = {**os.environ, "TORCHTPU_CACHE_DIR": "off", "TORCHTPU_MODE": "fused", **env}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: int) -> torch.Tensor:
    """One decoding step's attention over the cache, heads-major, with a mask built from arange."""
    scores = q @ k.transpose(-1, -2) / 8**0.5
    allowed = torch.arange(k.shape[2], device=k.device) <= pos
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, -1) @ v + k.mean(2, keepdim=True)


def decode(device: torch.device, steps: int, start: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(0)
    k = torch.randn(1, 2, start, 8).to(device)
    v = torch.randn(1, 2, start, 8).to(device)
    outs = []
    for i in range(steps):
        new_k, new_v, q = (torch.randn(1, 2, 1, 8).to(device) for _ in range(3))
        k = torch.cat([k, new_k], 2)
        v = torch.cat([v, new_v], 2)
        out = attend(q, k, v, start + i)
        outs.append(out.cpu())  # a host read every step, as generate() makes
    outs.append(k.cpu())  # the grown cache itself, read back from its padded buffer
    return outs


def test_growing_cache_compiles_once_per_bound(device):
    ref = decode(torch.device("cpu"), 40)
    programs, runs = new_programs(), bounded_runs()
    got = decode(device, 40)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)
    # The first step is an exact program; the second gives the family's formula, and it and every
    # later step run the family's one program for their bound.
    assert bounded_runs() - runs == 39
    assert new_programs() - programs == 2


def per_length(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> list[torch.Tensor]:
    h = x @ w
    return [
        h.sum(0),
        h.mean(0),
        h.var(0),
        torch.softmax(h, 0)[:1],
        h.logsumexp(0),
        h.amax(0),
        F.layer_norm(h, (h.shape[1],)).abs().sum(0),
        F.cross_entropy(h, target),
        (torch.arange(x.shape[0], device=x.device, dtype=torch.float32) * h[:, 0]).sum(),
    ]


def across_lengths(fn, inputs, lengths, device, **tol) -> tuple[int, int]:
    """fn on tpu against CPU at every length (inputs(n) makes its CPU arguments); returns the new
    programs and the bounded runs."""
    programs, runs = new_programs(), bounded_runs()
    for n in lengths:
        args = inputs(n)
        got = fn(*(a.to(device) for a in args))
        for a, b in zip(got, fn(*args)):
            torch.testing.assert_close(a.cpu(), b, **tol)
    return new_programs() - programs, bounded_runs() - runs


def test_lengths_in_any_order_share_a_program(device):
    torch.manual_seed(0)
    w = torch.randn(16, 6)
    lengths = [37, 5, 90, 64, 17, 120, 33, 128, 2]
    programs, runs = across_lengths(
        per_length,
        lambda n: (torch.randn(n, 16) * 2, w, torch.randint(0, 6, (n,))),
        lengths,
        device,
        rtol=1e-4,
        atol=1e-4,
    )
    # Each length flushes twice (the first read runs what it needs first): the first length's
    # flushes run exact programs, every later one the bounded program of its family (one bound,
    # 128, holds them all).
    assert runs == 2 * (len(lengths) - 1)
    assert programs == 4


def test_gradients_at_every_length(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    tpu_model = copy.deepcopy(model).to(device)
    programs, runs = new_programs(), bounded_runs()
    for n in [12, 40, 7, 99, 64, 130, 3]:
        x, y = torch.randn(n, 8), torch.randint(0, 4, (n,))
        for m, dev in ((model, "cpu"), (tpu_model, device)):
            m.zero_grad()
            F.cross_entropy(m(x.to(dev)), y.to(dev)).backward()
        for p, q in zip(model.parameters(), tpu_model.parameters()):
            torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5)
    # Three flushes per length: exact programs for the first length, then each flush runs its
    # family's program for the length's bound (128, and 256 for 130).
    assert bounded_runs() - runs == 3 * 6
    assert new_programs() - programs == 3 + 3 * 2


def test_a_family_with_a_flip_runs_exact_programs(device):
    """Reversing a padded dim would move the padding in front of the data: such families are
    refused, and each length runs its own exact program."""
    runs = bounded_runs()
    for n in [9, 14, 21, 30]:
        x = torch.randn(n, 3)
        torch.testing.assert_close(
            (x.to(device).flip(0) * 2).cumsum(0).cpu(), (x.flip(0) * 2).cumsum(0)
        )
    assert bounded_runs() == runs


def prefill(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor) -> list[torch.Tensor]:
    """A prefill's causal attention: an n x n mask from arange, so values with two sized dims; and
    the cumsum generate() takes position ids from."""
    n = x.shape[0]
    scores = (x @ wq) @ (x @ wk).T / 4
    rows = torch.arange(n, device=x.device)
    scores = scores.masked_fill(rows[None, :] > rows[:, None], float("-inf"))
    return [torch.softmax(scores, -1) @ x, (x[:, 0] > 0).long().cumsum(0)]


def test_prefill_masks_and_cumsums_share_a_program(device):
    torch.manual_seed(0)
    wq, wk = torch.randn(8, 4), torch.randn(8, 4)
    lengths = [5, 9, 3, 12, 16, 7]
    programs, runs = across_lengths(
        prefill, lambda n: (torch.randn(n, 8), wq, wk), lengths, device, rtol=1e-4, atol=1e-5
    )
    # Each length flushes twice (the first read runs what it needs first): the first length's
    # flushes run exact programs, every later one the bounded program of its family.
    assert runs == 2 * (len(lengths) - 1)
    assert programs == 4


def test_a_marked_length_runs_bounded_from_its_first_size(device):
    """torchtpu.mark_dynamic names the size that varies, so the first length's programs are
    already bounded and the lengths after it compile nothing."""
    torch.manual_seed(0)
    wq, wk = torch.randn(6, 4), torch.randn(6, 4)  # not the shapes another test compiled
    lengths = [5, 9, 3, 12, 16, 7]

    def marked(x, wq, wk):
        torchtpu.mark_dynamic(x, 0)
        return prefill(x, wq, wk)

    programs, runs = across_lengths(
        marked, lambda n: (torch.randn(n, 6), wq, wk), lengths, device, rtol=1e-4, atol=1e-5
    )
    assert runs == 2 * len(lengths)
    assert programs == 2


def test_a_mark_that_matches_a_constant_stays_exact(device):
    """A marked size equal to a weight's dim (4 here) is taken for the varying size too: that
    guess serves no other length, which then compiles as without a mark, and stays right."""
    torch.manual_seed(0)
    wq, wk = torch.randn(7, 4), torch.randn(7, 4)

    def marked(x, wq, wk):
        torchtpu.mark_dynamic(x, 0)
        return prefill(x, wq, wk)

    programs, runs = across_lengths(
        marked, lambda n: (torch.randn(n, 7), wq, wk), [4, 6, 10, 13], device, rtol=1e-4, atol=1e-5
    )
    # No more programs than without the mark (two exact at the first length, two fitted from
    # the first two): each guess either is refused or runs in place of an exact program.
    assert programs <= 4
    assert runs >= 2 * 3  # the fitted programs serve the lengths after the second


def test_an_unconfirmed_guess_ends_with_its_mark(device):
    """A guess that only its one size ever ran (here it takes a weight's dim for the marked
    length) stops padding that size once the marked tensor is gone: it runs exact from then on."""
    torch.manual_seed(0)
    w = torch.randn(9, 5)
    on_w = w.to(device)
    x = torch.randn(5, 9)
    marked = x.to(device)
    torchtpu.mark_dynamic(marked, 0)
    runs = bounded_runs()
    torch.testing.assert_close((marked @ on_w).tanh().cpu(), (x @ w).tanh())
    assert bounded_runs() - runs == 1  # the guess
    del marked
    runs = bounded_runs()
    for _ in range(3):
        torch.testing.assert_close((x.to(device) @ on_w).tanh().cpu(), (x @ w).tanh())
    assert bounded_runs() == runs


def test_windows_at_the_end_of_a_fixed_buffer(device):
    """A window whose length varies, read from a buffer of fixed length: its program reads a
    window as wide as the bound, which must not move the start back to fit the buffer (XLA's
    dynamic_slice clamps its start)."""
    buf = torch.arange(1024.0)
    on = buf.to(device)
    runs = bounded_runs()
    for n in [20, 24, 9, 30, 17, 12]:
        torch.testing.assert_close((on[1024 - n :] * 2 + 1).cpu(), buf[1024 - n :] * 2 + 1)
        torch.testing.assert_close((on[1000 : 1000 + n] - 3).cpu(), buf[1000 : 1000 + n] - 3)
    assert bounded_runs() - runs >= 8


def test_equal_scalars_do_not_split_a_family(device):
    """Equal Python numbers share one buffer; each use is still its own parameter, so a length
    whose two numbers happen to be equal runs the family's program too."""
    programs, runs = new_programs(), bounded_runs()
    for n, (a, b) in zip([6, 10, 14, 20], [(2.0, 3.0), (1.5, 1.5), (4.0, 0.5), (3.0, 3.0)]):
        x = torch.randn(n, 4)
        torch.testing.assert_close((x.to(device) * a + b).sum(0).cpu(), (x * a + b).sum(0))
    assert bounded_runs() - runs == 3
    assert new_programs() - programs == 2


def test_a_bounded_program_keeps_its_donations(device):
    """A buffer nobody else holds is written over by the program (donated) in a bounded run as
    in an exact one, when its parameter and the result it becomes have one capacity."""
    programs, runs = new_programs(), bounded_runs()
    for n in [70, 90, 100, 120, 75]:
        x = torch.randn(n, 4096)  # over a MiB: large enough to donate
        before = torchtpu.metrics()["donated_buffers"]
        z = x.to(device) * 3
        z.mul_(2)
        torch.testing.assert_close(z.sum(0).cpu(), (x * 6).sum(0), rtol=1e-4, atol=1e-3)
        assert torchtpu.metrics()["donated_buffers"] - before == 1
    assert bounded_runs() - runs == 4
    assert new_programs() - programs == 2


def test_random_draws_in_a_bounded_program_are_the_exact_programs_draws(device):
    """Random ops draw for the bound's size in a bounded program; the draws are position-stable
    (entry k depends on the generator's seed, offset and k only), so the real entries are those
    an exact program draws: the same seed gives the same values whichever program ran."""

    def draws(n: int) -> list[float]:
        torch.manual_seed(n)
        x = torch.empty(n, device=device).uniform_(-1, 1)
        y = torch.randn(n, device=device)
        return (x.cumsum(0) + y).tolist() + [(torch.rand(n, device=device) < 0.5).sum().item()]

    lengths = [5, 9, 17, 30, 64, 3]
    runs = bounded_runs()
    bounded = [draws(n) for n in lengths]
    assert bounded_runs() - runs >= len(lengths) - 2  # all but the first two sizes ran bounded
    torchtpu._C._set_bounded(False)
    try:
        exact = [draws(n) for n in lengths]
    finally:
        torchtpu._C._set_bounded(True)
    for b, e in zip(bounded, exact):  # the same draws (a cumsum may round in another order)
        torch.testing.assert_close(torch.tensor(b), torch.tensor(e), rtol=1e-6, atol=1e-6)


def test_debug_output_names_why_a_new_size_compiles_exact():
    """TORCHTPU_FUSED_DEBUG=1 says why a family's program runs exact at a new size: here the
    flip, whose result depends on where the padding sits."""
    script = (
        "import torch, torchtpu\n"
        "for n in (20, 30):\n"
        "    x = torch.randn(4, n).to('tpu')\n"
        "    (x.flip(1) * torch.arange(n, device='tpu')).sum().item()\n"
    )
    done = run_fused(script, TORCHTPU_FUSED_DEBUG="1")
    assert "runs exact at a new size: stablehlo.reverse" in done.stderr


def test_debug_output_names_a_size_no_formula_gives():
    """A flattened [s, t] has s*t entries: one symbol explains the first two pairs (t, 2t), the
    third does not fit it, and no a*s + c*t + b gives s*t there. The message names the sizes and
    the op whose result holds them."""
    script = (
        "import torch, torchtpu\n"
        "for s, t in ((20, 10), (30, 15), (41, 20)):\n"
        "    a, b = torch.randn(s).to('tpu'), torch.randn(t).to('tpu')\n"
        "    torch.outer(a, b).reshape(-1).softmax(0).sum().item()\n"
    )
    done = run_fused(script, TORCHTPU_FUSED_DEBUG="1")
    assert "(41 where it gives 40: dim 0 of a parameter)" in done.stderr, done.stderr
    assert "nor a*s + c*t + b: 200, 450, 820 at dim 0 of stablehlo." in done.stderr, done.stderr


def test_layer_norm_and_index_checks_over_a_sized_dim(device):
    """Issue 35's BERT: native_layer_norm's composite kernel computed its statistics as a flat
    [4n] that the backward reshaped to [4, n] (padding moved), and an index check's lower bound
    -n fitted no formula whose constants could not shrink. Both now run bounded."""
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(32)
    tpu_norm = copy.deepcopy(norm).to(device)
    programs, runs = new_programs(), bounded_runs()
    lengths = [20, 27, 9, 31]
    for n in lengths:
        x = torch.randn(4, n, 32)
        pick = torch.randperm(n)
        for m, dev in ((norm, "cpu"), (tpu_norm, device)):
            m.zero_grad()
            xd = x.to(dev).detach().requires_grad_()
            out = m(xd)[:, pick.to(dev)]
            (out * out).sum().backward()
            if dev == "cpu":
                want = (out.detach(), xd.grad, [p.grad for p in m.parameters()])
            else:
                torch.testing.assert_close(out.cpu(), want[0])
                torch.testing.assert_close(xd.grad.cpu(), want[1], rtol=1e-4, atol=1e-5)
                for got, ref in zip(m.parameters(), want[2]):
                    torch.testing.assert_close(got.grad.cpu(), ref, rtol=1e-4, atol=1e-5)
    # Two flushes per length (the forward, read; the backward): the first length's run exact
    # programs, every later length's the two bounded programs of one bound.
    assert bounded_runs() - runs == 2 * (len(lengths) - 1)
    assert new_programs() - programs == 4


def test_an_attention_mask_s_by_s_drops_out_in_one_program(device):
    """Dropout over [4, n, n] draws [4n, n] random values (a flat 4n^2 would fit no formula),
    so every length after the first runs the family's bounded program. Its real part is
    distributed as CPU's: about p of it dropped, the rest scaled by 1 / (1 - p)."""
    torch.manual_seed(0)
    runs, dropped = bounded_runs(), []
    for n in [40, 57, 33, 61, 48]:
        scores = torch.randn(4, n, n).to(device)
        out = F.dropout(scores.softmax(-1), p=0.25).cpu()
        want = scores.cpu().softmax(-1)
        kept = out != 0
        torch.testing.assert_close(out[kept], want[kept] / 0.75)
        dropped.append(1 - kept.float().mean().item())
    assert bounded_runs() - runs == 4
    # 4 n^2 >= 4356 draws each: 0.25 within 5 standard deviations (0.033).
    assert all(abs(d - 0.25) < 0.033 for d in dropped), dropped


def test_a_compiled_bound_twice_the_size_serves_it():
    """Lengths 40, 100, 20, 50, 120, 30 with no widening (TORCHTPU_WIDE_BOUND=16): the bounds
    are 128, 32 and 64, but 50 runs the program compiled for 128, twice its bound: 2 bounded
    programs, not 3. The values are CPU's at every length."""
    script = (
        "import torch, torchtpu\n"
        "w = torch.randn(8, 8)\n"
        "wd = w.to('tpu')\n"
        "compiles = []\n"
        "for n in (40, 100, 20, 50, 120, 30):\n"
        "    x = torch.randn(n, 8)\n"
        "    before = torchtpu.metrics()['compiles']\n"
        "    got = (x.to('tpu') @ wd).softmax(0).sum(1).cpu()\n"
        "    compiles.append(torchtpu.metrics()['compiles'] - before)\n"
        "    torch.testing.assert_close(got, (x @ w).softmax(0).sum(1))\n"
        "print(compiles)\n"
    )
    done = run_fused(script, TORCHTPU_WIDE_BOUND="16")
    # The first length's exact program, then bounds 128 (100) and 32 (20); 50, 120, 30 reuse.
    assert done.stdout.split("\n")[-2] == "[1, 1, 1, 0, 0, 0]", done.stdout


def test_a_loop_over_two_sizes_that_vary_apart(device):
    """PyTorch's test_index_put_accumulate_duplicate_indices: a loop over i that draws i values
    and randn of a data-dependent n, then index_put(accumulate=True). Its flushes have two sizes
    that vary apart; families of two symbols (s, t) serve all 511 sizes with a few programs."""
    torch.manual_seed(0)
    programs = new_programs()
    for i in range(1, 512):
        delta = torch.empty(i, dtype=torch.double, device=device).uniform_(-1, 1)
        indices = delta.cumsum(0).long()
        input = torch.randn(indices.abs().max() + 1, device=device)
        values = torch.randn(indices.size(0), device=device)
        output = input.index_put((indices,), values, accumulate=True)
        want = input.cpu().index_put((indices.cpu(),), values.cpu(), accumulate=True)
        torch.testing.assert_close(output.cpu(), want, msg=f"i = {i}")
        torch.testing.assert_close(indices.cpu(), delta.cpu().cumsum(0).long(), msg=f"i = {i}")
    assert new_programs() - programs <= 10


def test_cross_attention_over_two_lengths(device):
    """A decoder's queries (t) attend to an encoder's keys (s): lengths that vary apart share a
    program once a third pair shows that two symbols explain them."""
    torch.manual_seed(0)
    w = torch.randn(8, 8)
    pairs = [(20, 7), (33, 9), (41, 30), (17, 25), (60, 3), (5, 50), (64, 64)]

    def attend(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        scores = (y @ w) @ x.transpose(0, 1) / 8**0.5
        return torch.softmax(scores, -1) @ x + y.mean(0)

    programs = new_programs()
    for s, t in pairs:
        x, y = torch.randn(s, 8), torch.randn(t, 8)
        got = attend(x.to(device), y.to(device), w.to(device)).cpu()
        torch.testing.assert_close(got, attend(x, y, w), rtol=1e-5, atol=1e-5, msg=f"{s}, {t}")
    # The first pair's exact program, the second's (one symbol explains two pairs), and one
    # program of two symbols for the rest (bounds (64, 64) hold them all).
    assert new_programs() - programs <= 3


def test_an_index_check_over_two_sized_dims_keeps_a_family(device):
    """T5's relative positions: an [s, s] index tensor into a table. Its bounds check finds the
    first bad index without a flat [s*s] copy, whose size no a*s + b gives."""
    torch.manual_seed(0)
    table = torch.randn(9, 4)
    programs = new_programs()
    for n in [20, 33, 41, 17, 60, 9, 50]:
        rel = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        want = table[rel.abs() % 9].sum(-1).softmax(-1)
        rel = rel.to(device)
        got = table.to(device)[rel.abs() % 9].sum(-1).softmax(-1)
        torch.testing.assert_close(got.cpu(), want, msg=f"n = {n}")
    assert new_programs() - programs <= 3


def test_a_relative_position_bias_trained_at_new_lengths(device):
    """T5's relative-position bias: an embedding over [n, n] buckets, permuted to heads-first,
    added to [b, heads, n, n] scores under a mask (whose result keeps the bias's permuted
    layout), trained at a new n each step. Embedding's composite kernel flattened the buckets to
    [n * n], and the permuted results went through flat copies of their storages: sizes that are
    products of n, which no a*s + b gives, so every length compiled. Now the flushes of every
    length after the first two run bounded programs, and values and gradients are CPU's."""
    torch.manual_seed(0)
    bias = torch.nn.Embedding(8, 4)
    tpu_bias = copy.deepcopy(bias).to(device)

    def step(table: torch.nn.Embedding, q: torch.Tensor, keep: torch.Tensor) -> list:
        n = q.shape[2]
        pos = torch.arange(n, device=q.device)
        rel = (pos[None, :] - pos[:, None]).abs().clamp(max=7)
        b = table(rel).permute(2, 0, 1).unsqueeze(0)  # [1, 4, n, n]
        b = torch.where(keep[:, None, None, :], b, torch.finfo(b.dtype).min)
        scores = q @ q.transpose(-1, -2) + b
        loss = scores.softmax(-1).square().sum()
        loss.backward()
        grad = table.weight.grad.clone()
        table.weight.grad = None
        return [loss.detach(), grad]

    lengths = [17, 45, 30, 51, 108, 18, 85]
    programs = []
    for n in lengths:
        q = torch.randn(2, 4, n, 8)
        keep = torch.rand(2, n) > 0.2
        before = new_programs()
        got = step(tpu_bias, q.to(device), keep.to(device))
        got = [g.cpu() for g in got]
        programs.append(new_programs() - before)
        for g, w in zip(got, step(bias, q, keep)):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=f"n = {n}")
    # One symbol explains two lengths; families of programs whose sizes are all multiples of n
    # need no third. (Before: a program per length.)
    assert sum(programs[2:]) <= 4, programs


def test_two_marked_lengths_run_bounded_from_the_first_pair(device):
    """A decoder's queries (t) attend to an encoder's keys (s), both lengths marked: the first
    pair's flush already runs a program of two symbols, and no later pair compiles."""
    torch.manual_seed(0)
    w = torch.randn(8, 8)

    def attend(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        scores = (y @ w) @ x.transpose(0, 1) / 8**0.5
        return torch.softmax(scores, -1) @ x + y.mean(0)

    compiles, runs = [], bounded_runs()
    for s, t in [(37, 23), (20, 7), (33, 9), (41, 30), (17, 25), (60, 3), (64, 64)]:
        x, y = torch.randn(s, 8), torch.randn(t, 8)
        xd, yd = x.to(device), y.to(device)
        torchtpu.mark_dynamic(xd, 0, max=64)
        torchtpu.mark_dynamic(yd, 0, max=64)
        before = new_programs()
        got = attend(xd, yd, w.to(device)).cpu()
        compiles.append(new_programs() - before)
        torch.testing.assert_close(got, attend(x, y, w), rtol=1e-5, atol=1e-5, msg=f"{s}, {t}")
    assert compiles == [1, 0, 0, 0, 0, 0, 0], compiles
    assert bounded_runs() - runs == 7
