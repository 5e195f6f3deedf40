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


def torchrun(where: str, out: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    return subprocess.run(
        [*cmd, SCRIPT, where, out], check=False, capture_output=True, text=True, timeout=300
    )


def results(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stderr[-3000:]
    # The ranks share one stdout: a line of one may run into the other's.
    decoder, out, found = json.JSONDecoder(), done.stdout, []
    at = out.find('{"optim"')
    while at != -1:
        value, end = decoder.raw_decode(out, at)
        found.append(value)
        at = out.find('{"optim"', end)
    return sorted(found, key=lambda r: r["device"])


def test_trainer_under_torchrun_trains_one_model_with_ddp_as_on_cpu(tmp_path):
    """accelerate reports DistributedType.NO for tpu; torchtpu runs the job as MULTI_CPU on
    tpu:LOCAL_RANK (torchtpu/_accelerate.py): each rank on its own device, gradients averaged
    by DDP, the ranks equal at the end, and equal to the same script's 2-process CPU run."""
    tpu = results(torchrun("tpu", str(tmp_path / "tpu")))
    cpu = results(torchrun("cpu", str(tmp_path / "cpu")))
    assert [r["device"] for r in tpu] == ["tpu:0", "tpu:1"]
    assert len(cpu) == 2 and cpu[0]["sums"] == cpu[1]["sums"]
    assert tpu[0]["sums"] == tpu[1]["sums"]  # DDP: one model
    assert tpu[0]["losses"] == pytest.approx(cpu[0]["losses"], rel=1e-5)
    assert tpu[0]["sums"] == pytest.approx(cpu[0]["sums"], rel=1e-5, abs=1e-4)
    assert os.path.exists(tmp_path / "tpu" / "model.safetensors")  # saved by rank 0


def test_an_accelerate_loop_matches_cpu(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "accelerate_script.py")
    results = {}
    for where in ("tpu", "cpu"):
        done = subprocess.run(
            [sys.executable, script, where, str(tmp_path / where)],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results[where] = json.loads(done.stdout.strip().splitlines()[-1])
    tpu, cpu = results["tpu"], results["cpu"]
    assert tpu["device"] in ("tpu", "tpu:0") and cpu["device"] == "cpu"
    assert tpu["restored"] and cpu["restored"]
    assert tpu["losses"] == pytest.approx(cpu["losses"], rel=1e-5)
    assert tpu["sum"] == pytest.approx(cpu["sum"], rel=1e-5)
