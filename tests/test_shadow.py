"""torchtpu.debug.shadow(): every tpu op checked against the same op on CPU, on shadows that
follow views and in-place updates; the first op that differs is named."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
import transformers

from torchtpu.debug import ShadowMismatch, shadow

_lib = torch.library.Library("torchtpu_shadow_test", "DEF")
_lib.define("wrong(Tensor x) -> Tensor")
# The test's "bug": tpu's kernel is off by one part in a thousand, CPU's is right.
_lib.impl("wrong", lambda x: x * 2, "CPU")
_lib.impl("wrong", lambda x: x * 2.002, "PrivateUse1")


def test_views_and_in_place_updates_are_followed(device):
    with shadow() as checker:
        base = torch.arange(12.0, device=device)
        view = base.view(3, 4)[1:]  # a view with an offset
        view.mul_(2)  # written through the view: base's shadow sees it
        base.add_(1)
        out = (base.view(3, 4) @ torch.ones(4, 2, device=device)).softmax(-1)
        flag = (out > 0.4).any().item()
    assert flag in (True, False)
    assert checker.checked >= 6 and checker.mismatches == []


def test_the_first_wrong_op_is_named_with_the_users_line(device):
    x = torch.randn(4, 3, device=device)
    with pytest.raises(ShadowMismatch) as info, shadow():
        y = x.exp()
        z = torch.ops.torchtpu_shadow_test.wrong(y)  # the line the report must name
        (z + 1).sum()
    message = str(info.value)
    assert "torchtpu_shadow_test::wrong" in message
    assert "test_shadow.py" in message and "torchtpu_shadow_test.wrong(y)" in message
    assert "largest error" in message
    assert torch.allclose(x.exp().cpu(), x.cpu().exp())  # the process and its tensors go on


def test_warn_mode_reports_each_wrong_op_and_goes_on(device):
    x = torch.randn(8, device=device)
    with warnings.catch_warnings(record=True) as caught, shadow("warn") as checker:
        warnings.simplefilter("always")
        a = torch.ops.torchtpu_shadow_test.wrong(x)
        b = torch.ops.torchtpu_shadow_test.wrong(a)
        c = (a + b).sum().item()
    assert len(checker.mismatches) == 2 and len(caught) >= 2
    assert c == pytest.approx(((x * 2.002) + (x * 2.002 * 2.002)).sum().item(), rel=1e-5)


def test_a_training_step_has_no_false_alarms(device):
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 128, (2, 16)).to(device)
    with shadow() as checker:
        for _ in range(2):
            model(input_ids=x, labels=x).loss.backward()
            opt.step()
            opt.zero_grad()
    assert checker.checked > 300 and checker.mismatches == []
    assert checker.unchecked == {}  # attention too is checked, against a CPU reference


SCRIPT = """
import torch, transformers, torchtpu
cfg = transformers.LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=688,
    num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=True)
g = torch.Generator().manual_seed(1)
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(cfg).to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(2):
    x = torch.randint(0, 2048, (8, 128), generator=g).to("tpu")
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    opt.zero_grad()
print("no mismatch")
"""


def test_the_donation_bug_is_found_at_its_first_wrong_op(tmp_path):
    """TORCHTPU_XLA_CPU_XNNPACK=1 brings back the bug of issue 33: XNNPACK reused the packed
    tied weight of the previous step in the lm_head's backward matmul. TORCHTPU_SHADOW=1
    stops the second step at that op."""
    env = {
        **os.environ,
        "TORCHTPU_SHADOW": "1",
        "TORCHTPU_XLA_CPU_XNNPACK": "1",
        "TORCHTPU_CACHE_DIR": "off",
        "TORCHTPU_MODE": "fused",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0 and "no mismatch" not in done.stdout, done.stdout
    assert "ShadowMismatch: tpu and CPU disagree on aten::mm.default" in done.stderr
    assert "computing MmBackward0" in done.stderr and "[(1024, 2048), (2048, 256)]" in done.stderr


def test_where_cpu_rounds_worse_float64_decides(device):
    """CPU's float32 norm of 16M elements is ~7e-4 off (it accumulates in float32), beyond the
    checker's 1e-4; tpu's is within 1e-8. A mismatch is recomputed in float64 and dropped when
    tpu is that close to it: a checker that blames tpu for CPU's rounding is not trusted."""
    x = torch.randn(1 << 24, generator=torch.Generator().manual_seed(0))
    exact = x.double().norm().item()
    assert abs(x.norm().item() - exact) > 3e-4 * exact  # CPU's own error, which the test needs
    t = x.to(device)
    with shadow() as checker:
        y = t.norm()
    assert checker.checked == 1 and not checker.mismatches
    assert abs(y.item() - exact) < 1e-6 * exact
    with pytest.raises(ShadowMismatch, match="largest error"), shadow():  # a wrong op still is
        torch.ops.torchtpu_shadow_test.wrong(t[:1000])
