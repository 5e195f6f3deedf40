"""Bounded dynamic shapes under torch.compile(backend="tpu"): a graph traced with a symbolic
length is one program for every length within its bound (torchtpu/_bounded.py), and padding
never reaches results, losses or gradients. Each check is against the same function on CPU."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import _dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiles() -> int:
    return torchtpu.metrics()["compiles"]


def graphs_of(before: set[int]) -> list[_dynamo.CompiledGraph]:
    """The graphs compiled since `before` (the ids of graphs alive then)."""
    return [g for g in _dynamo.compiled_graphs() if id(g) not in before]


def alive() -> set[int]:
    return {id(g) for g in _dynamo.compiled_graphs()}


def dynamic(t: torch.Tensor, dim: int = 0, max: int = 32, min: int = 2) -> torch.Tensor:
    torch._dynamo.mark_dynamic(t, dim, min=min, max=max)
    return t


def reductions(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        x.sum(0),
        x.mean(0),
        x.var(0),
        torch.softmax(x, 0),
        x.logsumexp(0),
        x.amax(0),
        x @ w,
        F.mse_loss(x, torch.zeros_like(x)),
    )


def test_one_program_for_every_length(device):
    w = torch.randn(8, 5)
    f = torch.compile(reductions, backend="tpu")
    before = alive()
    for i, n in enumerate([3, 7, 20, 32, 11]):
        x = torch.randn(n, 8) * 3 + 1
        start = compiles()
        got = f(dynamic(x.to(device)), w.to(device))
        if i > 0:
            assert compiles() == start, f"length {n} compiled again"
        for g, e in zip(got, reductions(x, w)):
            assert g.shape == e.shape
            torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=1e-4)
    (graph,) = graphs_of(before)
    assert graph.bounded is not None and graph.captures == 1 and graph.replays == 4


class TokenModel(torch.nn.Module):
    """Packed tokens: every tensor's variable dim is its first."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(40, 16)
        self.fc1 = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 40)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = self.norm(F.gelu(self.fc1(self.emb(ids))))
        return F.cross_entropy(self.fc2(h), labels)


def test_training_matches_cpu_at_every_length(device):
    torch.manual_seed(0)
    cpu = TokenModel()
    tpu = TokenModel().to(device)
    tpu.load_state_dict(cpu.state_dict())
    step = torch.compile(lambda ids, labels: tpu(ids, labels), backend="tpu")
    before = alive()
    for i, n in enumerate([5, 12, 31, 2]):
        ids, labels = torch.randint(0, 40, (n,)), torch.randint(0, 40, (n,))
        start = compiles()
        loss = step(dynamic(ids.to(device)), dynamic(labels.to(device)))
        loss.backward()
        ref = cpu(ids, labels)
        ref.backward()
        if i > 0:
            assert compiles() == start, f"length {n} compiled again"
        torch.testing.assert_close(loss.cpu(), ref, atol=1e-5, rtol=1e-5)
        for (name, p), q in zip(cpu.named_parameters(), tpu.parameters()):
            torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-5, rtol=1e-4, msg=name)
        cpu.zero_grad()
        tpu.zero_grad()
    forward, backward = graphs_of(before)
    assert forward.bounded is not None and backward.bounded is not None
    assert forward.captures == 1 and backward.captures == 1


def test_length_used_as_a_value(device):
    """mean's and var's backward divide by the symbolic length: a value computed from the real
    size on the device, not the padded one."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x.mean(0) ** 2).sum() + x.var(0).sum()

    cf = torch.compile(f, backend="tpu")
    before = alive()
    for n in [4, 9, 30]:
        x = torch.randn(n, 3)
        xt = dynamic(x.to(device)).requires_grad_()
        cf(xt).backward()
        xc = x.clone().requires_grad_()
        f(xc).backward()
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, atol=1e-5, rtol=1e-5)
    assert [g.bounded is not None for g in graphs_of(before)] == [True, True]


def test_unbounded_lengths_bucket_by_powers_of_two(device):
    f = torch.compile(lambda x: torch.softmax(x, 0) * x.sum(), backend="tpu", dynamic=True)
    before = alive()
    for n in [5, 9, 17, 30, 3]:
        x = torch.randn(n)
        torch.testing.assert_close(f(x.to(device)).cpu(), torch.softmax(x, 0) * x.sum())
    (graph,) = graphs_of(before)
    assert graph.bounded is not None
    assert sorted(graph.bounded_programs) == [(16,), (32,)] and graph.captures == 2


def test_a_capture_for_twice_the_bound_serves_it(device):
    """40 captures at 64 and 5 at 16; 20's bound, 32, is served by the capture at 64."""
    f = torch.compile(lambda x: torch.softmax(x, 0) * x.sum(), backend="tpu", dynamic=True)
    before = alive()
    for n in [40, 5, 20, 50]:
        x = torch.randn(n)
        torch.testing.assert_close(f(x.to(device)).cpu(), torch.softmax(x, 0) * x.sum())
    (graph,) = graphs_of(before)
    assert sorted(graph.bounded_programs) == [(16,), (64,)] and graph.captures == 2


def test_outputs_come_back_at_their_length_and_feed_back(device):
    f = torch.compile(lambda x: torch.tanh(x) * 2, backend="tpu")
    x = torch.randn(6, 4)
    y = f(dynamic(x.to(device)))
    assert y.shape == (6, 4)
    z = f(dynamic(y))  # an output is a narrowed view of a padded buffer: widened in place
    torch.testing.assert_close(z.cpu(), torch.tanh(torch.tanh(x) * 2) * 2)


def test_layouts_padding_would_move_run_as_before(device):
    """A batch dim before the variable one: XLA would pack the real entries across the batch,
    which the flat storages do not follow, so the graph has no bounded plan (it is captured at
    its first length, and runs in fused mode's bounded programs from its second)."""
    w = torch.randn(8, 5)
    f = torch.compile(lambda x, w: torch.softmax(x @ w, 1), backend="tpu")
    before = alive()
    for n in [3, 7]:
        x = torch.randn(4, n, 8)
        got = f(dynamic(x.to(device), 1), w.to(device))
        torch.testing.assert_close(got.cpu(), torch.softmax(x @ w, 1), atol=1e-5, rtol=1e-5)
    graphs = graphs_of(before)
    assert graphs and all(g.bounded is None for g in graphs)


@pytest.mark.parametrize("how", ["dynamo", "torchtpu", "dynamic=True"])
def test_a_reduced_dim_that_is_not_outermost_compiles_once(device, how):
    """Softmax, sum and mean over a marked dim 1 of (4, L): one program for every length."""
    f = torch.compile(
        lambda x: (x.softmax(-1) * 2).sum(-1) + x.mean(-1),
        backend="tpu",
        dynamic=True if how == "dynamic=True" else None,
    )
    counts = []
    with torchtpu.mode("fused"):
        for n in [5, 9, 17, 30, 64, 100, 7, 128]:
            x = torch.randn(4, n)
            xt = x.to(device)
            if how == "dynamo":
                torch._dynamo.mark_dynamic(xt, 1, min=2, max=128)
            elif how == "torchtpu":
                torchtpu.mark_dynamic(xt, 1, min=2, max=128)
            start = torchtpu.metrics()["compiles"] + torchtpu.metrics()["disk_cache_hits"]
            got = f(xt).cpu()
            counts.append(
                torchtpu.metrics()["compiles"] + torchtpu.metrics()["disk_cache_hits"] - start
            )
            want = (x.softmax(-1) * 2).sum(-1) + x.mean(-1)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # With no max (dynamic=True), bounds are powers of two: 16, 32, 64 and 128 here.
    assert sum(counts) <= (4 if how == "dynamic=True" else 1), counts


def _heads(x: torch.Tensor) -> torch.Tensor:
    """Self-attention over dim 1 of (b, s, 16) with 2 heads: views that regroup static dims
    around s, batched matmuls, softmax over s, and an output whose s is not outermost."""
    b, s, h = x.shape
    q = x.view(b, s, 2, 8).transpose(1, 2)
    a = torch.softmax(q @ q.transpose(-1, -2) / 8**0.5, -1) @ q
    return a.transpose(1, 2).reshape(b, s, h)


@pytest.mark.parametrize(
    "fn",
    [
        _heads,
        lambda x: F.log_softmax(x, 1) * 3,  # a result laid out [b, s, h], s not outermost
        lambda x: (x.transpose(1, 2) * 2).exp(),  # a transposed result
        lambda x: (x.unsqueeze(-1) * x.unsqueeze(-2)).softmax(-1).sum(2),
        lambda x: F.scaled_dot_product_attention(x, x * 2, x),
    ],
    ids=["heads", "log_softmax", "transposed", "outer", "sdpa"],
)
def test_a_dynamic_dim_inside_results_and_gradients_matches_cpu(device, fn):
    """A marked dim 1 of (3, L, 16): one graph plan for every length, and each result and
    gradient equals CPU's, however the result lays the dynamic dim out in memory."""
    f = torch.compile(fn, backend="tpu")
    before = alive()
    for n in [3, 7, 12, 30, 5]:
        x = torch.randn(3, n, 16)
        xt = dynamic(x.to(device), 1, max=32).requires_grad_()
        xc = x.clone().requires_grad_()
        got, want = f(xt), fn(xc)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
        g = torch.randn(want.shape)
        got.backward(g.to(device))
        want.backward(g)
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)
    graphs = graphs_of(before)
    assert graphs and all(g.bounded is not None for g in graphs)
    assert all(len(g.bounded_programs) == 1 for g in graphs), [
        list(g.bounded_programs) for g in graphs
    ]


def test_a_linear_over_a_dynamic_batch_then_a_mean_matches_cpu(device):
    """(n, 17, 8) with n dynamic through Linear, GELU, LayerNorm, Linear and a mean: Linear views
    [n, 17, h] as [17n, h] and back, and XLA took another dim than n as the dynamic one of the
    split, so the mean divided by a wrong count (the loss was off by 0.009 to 0.03 at each new
    n, gradients right). The backward graph takes [17n, h] inputs and 17n as a number: one
    bounded program each for every n up to the bound."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    )
    moved = copy.deepcopy(model).to(device)
    f = torch.compile(lambda x: moved(x).logsumexp(1).mean(), backend="tpu")
    before = alive()
    for n in [4, 6, 9, 12, 20, 7]:
        x = torch.randn(n, 17, 8)
        got, want = f(x.to(device)), model(x).logsumexp(1).mean()
        torch.testing.assert_close(got.cpu(), want)
        got.backward()
        want.backward()
        for a, b in zip(moved.parameters(), model.parameters()):
            torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-6)
            a.grad, b.grad = None, None
    graphs = graphs_of(before)
    bounded = [g for g in graphs if g.bounded is not None]
    assert len(bounded) >= 2, "the forward and backward graphs run bounded"
    assert all(len(g.bounded_programs) <= 2 for g in bounded)  # bounds 16 and 32


def test_an_op_that_may_flatten_an_inner_dynamic_dim_keeps_its_graph_per_shape(device):
    """Embedding flattens its (b, s) indices inside its lowering, where XLA would pack the real
    entries (each result was off by up to 4 when it ran bounded): the plan refuses it, and the
    values and the weight's gradient are CPU's at every length."""
    w = torch.randn(10, 4)
    f = torch.compile(lambda ids, w: F.embedding(ids, w) * 2, backend="tpu")
    before = alive()
    for n in [3, 5, 9]:
        ids = torch.randint(0, 10, (4, n))
        wt, wc = w.to(device).requires_grad_(), w.clone().requires_grad_()
        got, want = f(dynamic(ids.to(device), 1), wt), F.embedding(ids, wc) * 2
        torch.testing.assert_close(got.cpu(), want)
        g = torch.randn(want.shape)
        got.backward(g.to(device))
        want.backward(g)
        torch.testing.assert_close(wt.grad.cpu(), wc.grad, rtol=1e-5, atol=1e-5)
    assert all(g.bounded is None for g in graphs_of(before))


def test_prefix_of_a_dynamic_dim_and_in_place_writes(device):
    def head(x: torch.Tensor) -> torch.Tensor:
        return x[:3].sum(0) + x[0] * x.mean(0)

    f = torch.compile(head, backend="tpu")
    before = alive()
    for n in [4, 10]:
        x = torch.randn(n, 5)
        torch.testing.assert_close(
            f(dynamic(x.to(device), min=3)).cpu(), head(x), atol=1e-5, rtol=1e-5
        )
    assert [g.bounded is not None for g in graphs_of(before)] == [True]

    def scale_(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x.sum()

    g = torch.compile(scale_, backend="tpu")
    x = torch.randn(7, 3)
    xt = dynamic(x.to(device))
    torch.testing.assert_close(g(xt).cpu(), (x * 2).sum())
    torch.testing.assert_close(xt.cpu(), x * 2)  # the caller's tensor, not a padded copy


def test_an_input_a_bounded_eager_program_left_padded_is_read_on_every_call(device):
    """A live mark of 17 makes fused eager run the program that makes `pos` ([1, 17, 8]) bounded
    from its first member, which leaves pos's buffer padded. A capture reading it used to take
    the unpadded copy as a constant: every later call saw pos as it was at the capture (a ViT's
    position embeddings under AdamW; its losses drifted from CPU's from the 4th step)."""
    keep = torch.empty(17, device=device)
    torchtpu.mark_dynamic(keep, 0, min=4, max=64)
    torch.manual_seed(0)
    pos_tpu = torch.nn.Parameter(torch.randn(1, 17, 8, device=device))
    pos_cpu = torch.nn.Parameter(pos_tpu.detach().cpu())
    losses: dict[str, list[float]] = {}
    for pos in (pos_cpu, pos_tpu):
        opt = torch.optim.AdamW([pos], lr=0.1)
        f = torch.compile(lambda x, p=pos: ((x + p) ** 2).mean(), backend="tpu")
        g = torch.Generator().manual_seed(1)
        out = losses.setdefault(pos.device.type, [])
        for n in [20, 30, 40, 50]:
            x = torch.randn(n, 17, 8, generator=g).to(pos.device)
            loss = f(dynamic(x, max=64))
            loss.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item())
        torch._dynamo.reset()
    torch.testing.assert_close(losses[device.type], losses["cpu"], rtol=1e-5, atol=0)
    del keep


def test_debug_names_the_node_that_keeps_a_graph_per_shape(device, monkeypatch, capsys):
    """TORCHTPU_FUSED_DEBUG=1: a graph without a bounded plan names the node and the reason."""
    monkeypatch.setenv("TORCHTPU_FUSED_DEBUG", "1")
    f = torch.compile(lambda x: x.flip(0) * 2, backend="tpu")
    x = torch.randn(6, 4)
    torch.testing.assert_close(f(dynamic(x.to(device))).cpu(), x.flip(0) * 2)
    err = capsys.readouterr().err
    assert "runs per shape, not bounded" in err and "flip" in err
    assert "its result depends on where the padding sits" in err


def test_a_new_input_where_a_freed_one_was_is_padded_afresh(device):
    """Host-padded inputs are kept for the backward of the same step. A new batch whose storage
    took a freed one's data pointer (and shape) was given the freed batch's padded copy: a ViT
    under torch.compile trained on a stale batch now and then (losses 1e-2 off CPU's). Freeing
    each input before the next is made makes that happen 5 to 8 times in 300 calls here."""
    import gc

    f = torch.compile(lambda x: (x * 2).sum(1), backend="tpu")
    torch.manual_seed(0)
    for i in range(300):
        x = torch.randn(6, 4)
        y = f(dynamic(x.to(device)))
        gc.collect(1)  # the input's storage is freed now
        torch.testing.assert_close(y.cpu(), (x * 2).sum(1), msg=f"call {i}")
