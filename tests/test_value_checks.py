"""Value checks: a bad index, class target or probability raises PyTorch's own error (type and
message) instead of returning a clamped number. Strict mode raises at the op, before anything is
written; fused mode raises at the next host read or sync, naming the op and the user's line. The
process and every other tensor survive."""

import os
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torchtpu

# name -> fn(device) performing one op with a bad input
BAD = {
    "index": lambda d: torch.arange(5.0, device=d)[torch.tensor([0, 7], device=d)],
    "index negative": lambda d: torch.arange(5.0, device=d)[torch.tensor([-9], device=d)],
    "index_put_": lambda d: torch.zeros(5, device=d).index_put_(
        (torch.tensor([9], device=d),), torch.ones(1, device=d)
    ),
    "index_select": lambda d: torch.ones(5, 3, device=d).index_select(
        0, torch.tensor([0, 5], device=d)
    ),
    "index_select negative": lambda d: torch.ones(5, 3, device=d).index_select(
        0, torch.tensor([-1], device=d)
    ),
    "gather": lambda d: torch.ones(5, 3, device=d).gather(0, torch.tensor([[0, 9, 1]], device=d)),
    "scatter": lambda d: torch.zeros(5, 3, device=d).scatter(
        0, torch.tensor([[0, 9, 1]], device=d), 1.0
    ),
    "scatter_add": lambda d: torch.zeros(5, 3, device=d).scatter_add(
        0, torch.tensor([[0, -1, 1]], device=d), torch.ones(1, 3, device=d)
    ),
    "scatter_reduce": lambda d: torch.zeros(5, device=d).scatter_reduce(
        0, torch.tensor([6], device=d), torch.ones(1, device=d), "amax"
    ),
    "index_add": lambda d: torch.zeros(5, 3, device=d).index_add(
        0, torch.tensor([5], device=d), torch.ones(1, 3, device=d)
    ),
    "index_copy": lambda d: torch.zeros(5, 3, device=d).index_copy(
        0, torch.tensor([-1], device=d), torch.ones(1, 3, device=d)
    ),
    "index_fill": lambda d: torch.zeros(5, device=d).index_fill(
        0, torch.tensor([7], device=d), 1.0
    ),
    "take": lambda d: torch.ones(3, 5, device=d).take(torch.tensor([100], device=d)),
    "embedding": lambda d: F.embedding(
        torch.tensor([[1, 10]], device=d), torch.ones(10, 4, device=d)
    ),
    "cross_entropy": lambda d: F.cross_entropy(
        torch.ones(2, 3, device=d), torch.tensor([0, 5], device=d)
    ),
    "nll_loss negative": lambda d: F.nll_loss(
        torch.ones(2, 3, device=d), torch.tensor([0, -5], device=d)
    ),
    "multinomial negative": lambda d: torch.multinomial(torch.tensor([0.5, -1.0], device=d), 1),
    "multinomial nan": lambda d: torch.multinomial(torch.tensor([0.5, float("nan")], device=d), 1),
    "multinomial zero": lambda d: torch.multinomial(torch.zeros(2, 3, device=d), 1),
    "bernoulli": lambda d: torch.bernoulli(torch.tensor([0.5, 1.5], device=d)),
    "multi_margin_loss": lambda d: F.multi_margin_loss(
        torch.ones(2, 3, device=d), torch.tensor([0, 3], device=d)
    ),
}

# The same ops with good inputs (negative indices where PyTorch lets them wrap, ignore_index).
GOOD = {
    "index negative": lambda d: torch.arange(5.0, device=d)[torch.tensor([-5, 4], device=d)],
    "index_fill negative": lambda d: torch.zeros(5, device=d).index_fill(
        0, torch.tensor([-1], device=d), 1.0
    ),
    "take negative": lambda d: torch.arange(15.0, device=d).take(torch.tensor([-15], device=d)),
    "cross_entropy ignore_index": lambda d: F.cross_entropy(
        torch.ones(2, 3, device=d), torch.tensor([0, -100], device=d)
    ),
    "embedding": lambda d: F.embedding(
        torch.tensor([[0, 9]], device=d), torch.ones(10, 4, device=d)
    ),
    "multinomial": lambda d: torch.multinomial(torch.tensor([0.0, 1.0], device=d), 1),
    "bernoulli": lambda d: torch.bernoulli(torch.tensor([0.0, 1.0], device=d)),
}


def cpu_error(name):
    with pytest.raises(Exception) as info:
        BAD[name]("cpu")
    return type(info.value), str(info.value).split("\n")[0]


@pytest.mark.parametrize("name", BAD.keys())
def test_strict_mode_raises_cpu_error_at_the_op(device, name):
    kind, message = cpu_error(name)
    with torchtpu.mode("strict"), pytest.raises(kind) as info:
        BAD[name](device)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("name", BAD.keys())
def test_fused_mode_raises_at_the_next_read_naming_the_line(device, name):
    kind, message = cpu_error(name)
    with torchtpu.mode("fused"):
        kept = torch.arange(4.0, device=device) * 2
        out = BAD[name](device)  # recorded: nothing has run yet
        with pytest.raises(kind) as info:
            out.cpu()
    text = str(info.value)
    assert text.startswith(message)
    assert re.search(r"recorded at .*test_value_checks\.py:\d+", text), text
    # The process and other tensors survive; the failure is raised once.
    torch.testing.assert_close(kept.cpu(), torch.arange(4.0) * 2)
    torch.tpu.synchronize()


@pytest.mark.parametrize("name", GOOD.keys())
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_good_inputs_do_not_raise(device, mode, name):
    with torchtpu.mode(mode):
        out = GOOD[name](device).cpu()
        torch.tpu.synchronize()
    if name not in ("multinomial", "bernoulli"):  # random: only the values' range is checked
        torch.testing.assert_close(out, GOOD[name]("cpu"))


def test_strict_mode_failure_leaves_the_target_unchanged(device):
    with torchtpu.mode("strict"):
        x = torch.arange(5.0, device=device)
        with pytest.raises(IndexError):
            x.index_put_((torch.tensor([1, 9], device=device),), torch.zeros(2, device=device))
        torch.testing.assert_close(x.cpu(), torch.arange(5.0))


def test_fused_mode_sync_raises_a_failure_no_read_waited_for(device):
    with torchtpu.mode("fused"):
        torch.ones(5, device=device).index_select(0, torch.tensor([5], device=device))
        with pytest.raises(IndexError, match="index out of range in self"):
            torch.tpu.synchronize()
        torch.tpu.synchronize()  # raised once


def test_training_step_with_a_bad_label_raises_at_loss_item(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Embedding(10, 8), torch.nn.Flatten(), torch.nn.Linear(16, 3)
    )
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tokens = torch.tensor([[1, 2], [3, 4]], device=device)
    with torchtpu.mode("fused"):
        loss = F.cross_entropy(model(tokens), torch.tensor([0, 2], device=device))
        loss.backward()
        opt.step()
        loss.item()  # a good step
        loss = F.cross_entropy(model(tokens), torch.tensor([0, 3], device=device))
        with pytest.raises(IndexError, match=r"Target 3 is out of bounds\..*recorded at"):
            loss.item()
        # The model survives: its parameters are still readable.
        assert all(torch.isfinite(p.cpu()).all() for p in model.parameters())


def test_checks_can_be_turned_off():
    code = (
        "import torch, torchtpu\n"
        "d = torchtpu.get_device()\n"
        "x = torch.arange(5.0, device=d).index_select(0, torch.tensor([7], device=d))\n"
        "print(x.cpu().tolist())\n"
    )
    env = dict(os.environ, TORCHTPU_CHECKS="0")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[4.0]"  # XLA's clamped gather
