"""The crash finder (torchtpu/testing/crashes.py): a slice of the sweep that
`python -m torchtpu.coverage --crashes` runs whole, with every dtype CPU supports and the
error_inputs, finds no crash and no hang; and a crash is found, named and survived."""

from __future__ import annotations

import torch
from torch.testing._internal.opinfo.core import SampleInput

from torchtpu.testing import crashes


def test_a_slice_of_op_db_in_every_dtype_never_crashes():
    # Every 31st op of op_db (about 22), two samples per dtype, and every error input.
    result = crashes.sweep(every=31, offset=5, max_samples=2, timeout_s=120)
    assert result.cases > 200 and len(result.ops) > 15, result.summary()
    assert result.crashes == [] and result.hangs == []


def test_a_crash_is_named_and_the_sweep_goes_on(monkeypatch):
    monkeypatch.setenv(crashes.CRASH_HOOK, "abs")
    result = crashes.sweep(max_samples=1, ops={"abs", "neg"}, timeout_s=120)
    assert result.crashes == ["abs float32 sample 0 (exit -11)"]
    assert {"abs", "neg"} <= result.ops  # the cases after it ran, in a new child
    assert result.cases > 10


def test_inputs_the_sample_keeps_on_cpu_stay_there():
    # tensor_split's tensor of split points must be on CPU on every device: moved to tpu, CPU's
    # own kernel rejects it, and every sample counted as a failure.
    result = crashes.sweep(max_samples=4, ops={"tensor_split"}, timeout_s=120)
    assert result.cases >= 8 and result.failures == {}, result.summary()


def test_silent_acceptance_is_a_failure_not_ok():
    def op(x: torch.Tensor) -> torch.Tensor:  # accepts on tpu what CPU rejects
        if x.device.type == "cpu":
            raise RuntimeError("bad input")
        return x

    sample = SampleInput(torch.ones(2))
    assert crashes._run_sample(op, sample) == "ran where CPU raises RuntimeError"


def test_group_norm_of_an_empty_batch(device):
    """Found by the sweep: it reached batch norm with shape (1, 0) and divided by 0 channels
    (SIGFPE, the process gone)."""
    x = torch.ones(0, 2, requires_grad=True)
    w, b = torch.ones(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    want = torch.nn.functional.group_norm(x, 1, w, b)
    xt, wt, bt = (t.detach().to(device).requires_grad_() for t in (x, w, b))
    got = torch.nn.functional.group_norm(xt, 1, wt, bt)
    assert got.shape == want.shape == (0, 2)
    want.sum().backward()
    got.sum().backward()
    for t, c in ((xt, x), (wt, w), (bt, b)):
        torch.testing.assert_close(t.grad.cpu(), c.grad)
