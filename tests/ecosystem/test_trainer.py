"""Hugging Face Trainer, unmodified, on tpu and on CPU: the same losses and weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("accelerate")

SCRIPT = os.path.join(os.path.dirname(__file__), "trainer_script.py")


def run(where: str, out: str) -> dict:
    done = subprocess.run(
        [sys.executable, SCRIPT, where, out],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_trainer_with_default_arguments_matches_cpu(tmp_path):
    """The default optimizer is adamw_torch_fused: torch.optim's fused AdamW kernel."""
    tpu = run("tpu", str(tmp_path / "tpu"))
    cpu = run("cpu", str(tmp_path / "cpu"))
    assert tpu["optim"] == "adamw_torch_fused" and tpu["device"] == "tpu:0"
    assert cpu["device"] == "cpu"
    assert len(tpu["losses"]) == 4
    for a, b in zip(tpu["losses"], cpu["losses"], strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    for a, b in zip(tpu["sums"], cpu["sums"], strict=True):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-4)
    assert os.path.exists(tmp_path / "tpu" / "model.safetensors")
