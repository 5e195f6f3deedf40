"""torch.compile(backend="tpu"): each graph is one program, lowered through the eager kernels.

Compiled results are checked against eager on the same device (and so against CPU, which the eager
tests cover), with the number of programs each call runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import torchtpu
from torchtpu import _dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def executions() -> int:
    return torchtpu.metrics()["executions"]


def replays() -> int:
    return sum(g.replays for g in _dynamo.compiled_graphs())


class Mlp(torch.nn.Module):
    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.drop = torch.nn.Dropout(p)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(torch.nn.functional.gelu(self.fc1(x))))


def test_forward_is_one_program(device):
    torch.manual_seed(0)
    m = Mlp().to(device)
    x = torch.randn(8, 16).to(device)
    cm = torch.compile(m, backend="tpu")
    ref = m(x).detach().cpu()
    cm(x)  # captures
    for _ in range(3):
        before = executions()
        y = cm(x)
        assert executions() - before == 1
    torch.testing.assert_close(y.detach().cpu(), ref, atol=1e-6, rtol=1e-6)


def test_train_step_is_three_programs(device):
    """Forward, backward and the optimizer step: one program each, same losses as eager."""

    def run(compiled: bool) -> tuple[list[float], list[int]]:
        torch.manual_seed(0)
        m = Mlp().to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        x, y = torch.randn(8, 16).to(device), torch.randn(8, 4).to(device)

        def step() -> torch.Tensor:
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if compiled:
            step = torch.compile(step, backend="tpu")
        losses, counts = [], []
        for _ in range(6):
            e0, r0 = executions(), replays()
            loss = step()
            counts.append((replays() - r0, executions() - e0))
            losses.append(loss.item())
        return losses, counts

    eager, _ = run(False)
    compiled, counts = run(True)
    # Three compiled programs and nothing else: autograd's seed, ones_like(loss), is an upload.
    assert counts[2:] == [(3, 3)] * 4
    # One program fuses differently from eager's: float32 rounding, amplified by AdamW.
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), atol=1e-5, rtol=1e-5)


def test_batch_norm_stats_written_back(device):
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(6).to(device).train()
    ref = torch.nn.BatchNorm1d(6).to(device).train()
    cbn = torch.compile(bn, backend="tpu")
    for i in range(3):
        x = torch.randn(5, 6).to(device) + i
        torch.testing.assert_close(cbn(x).cpu(), ref(x).cpu())
    torch.testing.assert_close(bn.running_mean.cpu(), ref.running_mean.cpu())
    torch.testing.assert_close(bn.running_var.cpu(), ref.running_var.cpu())
    assert bn.num_batches_tracked.item() == 3


def test_dropout_draws_from_the_device_generator(device):
    """The same seed gives the same masks compiled and eager; each call draws new ones, and
    eager ops after a compiled call continue from the same generator offset."""
    torch.manual_seed(0)
    m = Mlp(p=0.5).to(device).train()
    x = torch.randn(8, 16).to(device)
    cm = torch.compile(m, backend="tpu")

    def three(f) -> list[torch.Tensor]:
        torch.manual_seed(7)
        out = [f(x).detach().cpu() for _ in range(2)]
        return out + [torch.rand(5, device=device).cpu()]

    eager = three(m)
    compiled = three(cm)
    again = three(cm)  # replayed, not captured
    assert not torch.equal(eager[0], eager[1])
    for e, c, a in zip(eager, compiled, again):
        torch.testing.assert_close(c, e, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(a, e, atol=1e-6, rtol=1e-6)


def test_graph_break_runs_pieces_compiled(device):
    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.sin(x) * 2
        if y.sum().item() > 0:  # a graph break: the value is read on the host
            return torch.cos(y) + 1
        return torch.tanh(y) - 1

    cf = torch.compile(f, backend="tpu")
    for sign in (1, -1, 1):
        x = (sign * torch.rand(4, 5) + 0.1 * sign).to(device)
        torch.testing.assert_close(cf(x).cpu(), f(x).cpu())
    graphs = [g for g in _dynamo.compiled_graphs() if g.replayable]
    assert len(graphs) >= 2 and all(g.captures == 1 for g in graphs)
    assert sum(g.replays for g in graphs) >= 2


def test_new_input_layout_captures_again(device):
    cf = torch.compile(lambda a, b: a @ b + 1, backend="tpu")
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    ta, tb = a.to(device), b.to(device)
    torch.testing.assert_close(cf(ta, tb).cpu(), a @ b + 1)
    tbt = b.t().contiguous().to(device).t()  # same sizes, other strides
    torch.testing.assert_close(cf(ta, tbt).cpu(), a @ b + 1, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(cf(ta, tb).cpu(), a @ b + 1)


def test_mode_and_fullgraph_accepted(device):
    m = Mlp().to(device)
    x = torch.randn(2, 16).to(device)
    for mode in ("default", "reduce-overhead", "max-autotune"):
        torch._dynamo.reset()
        cm = torch.compile(m, backend="tpu", mode=mode, fullgraph=True)
        torch.testing.assert_close(cm(x).detach().cpu(), m(x).detach().cpu())


def test_default_backend_names_tpu(device):
    m = Mlp().to(device)
    with pytest.raises(RuntimeError, match=r'backend="tpu"'):
        torch.compile(m)(torch.randn(2, 16).to(device))


def test_shape_error_points_at_user_line(device):
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b  # the bad line

    # Dynamo runs the graph on fake tensors first: PyTorch's own message, with the user's line.
    with pytest.raises(RuntimeError, match="same reduction dim") as info:
        torch.compile(f, backend="tpu")(torch.ones(2, 3).to(device), torch.ones(4, 5).to(device))
    assert "the bad line" in str(info.value)


def test_op_without_rule_names_op_and_line(device):
    w, scales = torch.ones(4, 8, dtype=torch.int8).to(device), torch.ones(4).to(device)

    def f(x: torch.Tensor) -> torch.Tensor:
        # A Meta kernel, so Dynamo keeps it in the graph, but no tpu lowering.
        return torch.ops.aten._weight_int8pack_mm(x * 2, w, scales)  # no tpu lowering

    with pytest.raises(NotImplementedError, match="_weight_int8pack_mm") as info:
        torch.compile(f, backend="tpu")(torch.ones(3, 8).to(device))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "no tpu lowering" in notes and "test_compile.py" in notes
    # The process and its tensors survive.
    x = torch.ones(3).to(device)
    assert (x + 1).sum().item() == 6


PROGRAM = r"""
import json, torch, torchtpu
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2)).to("tpu")
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(4, 8).to("tpu")

@torch.compile(backend="tpu")
def step():
    loss = m(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

losses = [step().item() for _ in range(3)]
print(json.dumps({"losses": losses, "compiles": torchtpu.cache_stats()["compiles"]}))
"""


def test_second_process_compiles_nothing(tmp_path):
    def run() -> dict:
        env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))
        p = subprocess.run(
            [sys.executable, "-c", PROGRAM],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert first["compiles"] > 0
    assert second["compiles"] == 0
    assert second["losses"] == first["losses"]


def test_finetune_llama_train_step_20_steps(device):
    """The finetune_llama.py model's whole train step compiled: 3 programs per step and no other
    execution, and the losses of 20 steps match eager within 1e-5."""
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    sys.path.insert(0, examples)
    try:
        from instruct_data import batches
        from llama_config import small_llama_config
        from transformers import LlamaForCausalLM
    finally:
        sys.path.remove(examples)
    data = [{k: v.to(device) for k, v in b.items()} for b in batches(20, 8, 24, seed=0)]

    def run(compiled: bool) -> tuple[list[float], list[int]]:
        torch.manual_seed(0)
        model = LlamaForCausalLM(small_llama_config()).to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)

        def step(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        if compiled:
            step = torch.compile(step, backend="tpu")
        losses, counts = [], []
        for batch in data:
            r0, e0 = replays(), executions()
            losses.append(step(batch).item())
            counts.append((replays() - r0, executions() - e0))
        return losses, counts

    # Against fused eager (the default mode): strict mode rounds op by op, which over 20 AdamW
    # steps drifts from any fused program by a few 1e-5.
    with torchtpu.mode("fused"):
        eager, _ = run(False)
    compiled, counts = run(True)
    assert counts[2:] == [(3, 3)] * 18  # forward, backward, optimizer step; nothing else runs
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), atol=1e-5, rtol=1e-5)


def test_inputs_mutated_in_place(device):
    """copy_/fill_ into inputs inside the graph are written back on every call."""

    def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        x.fill_(2.0)
        z.mul_(y)
        return y * x

    cf = torch.compile(f, backend="tpu")
    for i in range(3):
        x, y, z = torch.zeros(4), torch.arange(4.0) + i, torch.full((4,), 3.0)
        tx, ty, tz = x.to(device), y.to(device), z.to(device)
        out = cf(tx, ty, tz)
        torch.testing.assert_close(out.cpu(), f(x, y, z))
        torch.testing.assert_close(tx.cpu(), x)
        torch.testing.assert_close(tz.cpu(), z)
    assert [g.replays for g in _dynamo.compiled_graphs() if g.replayable][-1] == 2
