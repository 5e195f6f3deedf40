"""Several Python threads dispatching tpu ops at once give the right results, and DataLoader
workers that create tpu tensors either work (spawned workers: tensors travel by value) or raise
CUDA's error for a forked subprocess in the main process, which survives."""

import copy
import threading

import pytest
import torch
from torch.utils.data import DataLoader
from tpu_dataset import TpuRows  # a module of its own: spawned workers import it by name


def train_against_cpu(seed: int, device: torch.device, steps: int) -> float:
    """Trains one model on tpu and its copy on CPU with the same batches: largest difference."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = copy.deepcopy(ref).to(device)
    pairs = [
        (model, torch.optim.SGD(model.parameters(), lr=0.1), device),
        (ref, torch.optim.SGD(ref.parameters(), lr=0.1), torch.device("cpu")),
    ]
    for _ in range(steps):
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        for m, opt, d in pairs:
            loss = torch.nn.functional.mse_loss(m(x.to(d)), y.to(d))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return max(
        (a.detach().cpu() - b.detach()).abs().max().item()
        for a, b in zip(model.parameters(), ref.parameters())
    )


def test_models_trained_in_four_threads_match_cpu(device):
    errors: dict[int, float | BaseException] = {}

    def body(seed: int) -> None:
        try:
            errors[seed] = train_against_cpu(seed, device, steps=25)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors[seed] = e

    threads = [threading.Thread(target=body, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a training thread hung"
    for seed, err in errors.items():
        assert isinstance(err, float) and err < 1e-5, (seed, err)
    assert len(errors) == 4


def test_forked_dataloader_workers_raise_cudas_error(device):
    loader = DataLoader(
        TpuRows(8), batch_size=4, num_workers=2, timeout=120, multiprocessing_context="fork"
    )
    with pytest.raises(RuntimeError, match="Cannot re-initialize tpu in forked subprocess.*spawn"):
        list(loader)
    assert (torch.ones(3, device=device) * 2).sum().item() == 6.0  # the main process survives


def test_spawned_dataloader_workers_send_tpu_tensors(device):
    loader = DataLoader(
        TpuRows(8), batch_size=4, num_workers=2, timeout=120, multiprocessing_context="spawn"
    )
    batches = list(loader)
    assert [b.device.type for b in batches] == ["tpu", "tpu"]
    got = torch.cat([b.cpu() for b in batches])
    torch.testing.assert_close(got, torch.arange(8.0).repeat_interleave(3).view(8, 3) * 2)
