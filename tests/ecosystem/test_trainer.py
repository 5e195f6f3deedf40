"""Hugging Face Trainer, unmodified, on tpu and on CPU: the same losses and weights, in one
process and under torchrun, a checkpoint resumed, and a PEFT LoRA fine-tune."""

from __future__ import annotations

import os
from operator import itemgetter

import pytest

from .launch import run

pytest.importorskip("accelerate")


def close(got: list[float], want: list[float], rel: float = 1e-5, abs: float = 0.0) -> None:
    assert got == pytest.approx(want, rel=rel, abs=abs)


def test_trainer_with_default_arguments_matches_cpu(tmp_path):
    """The default optimizer is adamw_torch_fused: torch.optim's fused AdamW kernel."""
    [tpu] = run("trainer_script.py", "tpu", str(tmp_path / "tpu"))
    [cpu] = run("trainer_script.py", "cpu", str(tmp_path / "cpu"))
    assert tpu["optim"] == "adamw_torch_fused" and tpu["device"] == "tpu:0"
    assert cpu["device"] == "cpu"
    assert len(tpu["losses"]) == 4
    close(tpu["losses"], cpu["losses"])
    close(tpu["sums"], cpu["sums"], abs=1e-4)
    assert os.path.exists(tmp_path / "tpu" / "model.safetensors")


def test_trainer_resumes_from_a_checkpoint_as_if_uninterrupted(tmp_path):
    """save_steps=2, then a new Trainer on fresh weights with resume_from_checkpoint: model,
    optimizer, scheduler and RNG state come back from checkpoint-2 on tpu."""
    [tpu] = run("trainer_script.py", "tpu", str(tmp_path / "tpu"), "resume")
    [cpu] = run("trainer_script.py", "cpu", str(tmp_path / "cpu"), "resume")
    assert os.path.exists(tmp_path / "tpu" / "checkpoint-2" / "optimizer.pt")
    assert tpu["resumed"]["losses"] == tpu["losses"]  # bit for bit
    assert tpu["resumed"]["sums"] == tpu["sums"]
    close(tpu["losses"], cpu["losses"])
    close(tpu["sums"], cpu["sums"], abs=1e-4)


def test_trainer_under_torchrun_trains_one_model_with_ddp_as_on_cpu(tmp_path):
    """accelerate reports DistributedType.NO for tpu; torchtpu runs the job as MULTI_CPU on
    tpu:LOCAL_RANK (torchtpu/_accelerate.py): each rank on its own device, gradients averaged
    by DDP, the ranks equal at the end, and equal to the same script's 2-process CPU run; a
    checkpoint saved under torchrun resumes."""
    tpu = run("trainer_script.py", "tpu", str(tmp_path / "tpu"), "resume", nproc=2)
    tpu.sort(key=itemgetter("device"))
    cpu = run("trainer_script.py", "cpu", str(tmp_path / "cpu"), nproc=2)
    for r in tpu:  # resumed from checkpoint-2 under torchrun too
        assert r["resumed"]["losses"] == r["losses"]
        # Strict mode gives the same bits; in fused mode the resumed job's programs are cut
        # elsewhere, and XLA rounds a few weights 1 ulp differently (measured 1e-8 relative).
        close(r["resumed"]["sums"], r["sums"], rel=1e-6, abs=1e-6)
    assert [r["device"] for r in tpu] == ["tpu:0", "tpu:1"]
    assert cpu[0]["sums"] == cpu[1]["sums"]
    assert tpu[0]["sums"] == tpu[1]["sums"]  # DDP: one model
    close(tpu[0]["losses"], cpu[0]["losses"])
    close(tpu[0]["sums"], cpu[0]["sums"], abs=1e-4)
    assert os.path.exists(tmp_path / "tpu" / "model.safetensors")  # saved by rank 0


def test_peft_lora_through_the_trainer_matches_cpu(tmp_path):
    [tpu] = run("lora_script.py", "tpu", str(tmp_path / "tpu"))
    [cpu] = run("lora_script.py", "cpu", str(tmp_path / "cpu"))
    assert tpu["device"] == "tpu:0" and tpu["trainable"] == cpu["trainable"] == 3584
    assert "lora_A" in tpu["names"][0]
    close(tpu["losses"], cpu["losses"])
    close(tpu["sums"], cpu["sums"], abs=1e-5)
    assert os.path.exists(tmp_path / "tpu" / "adapter_model.safetensors")
