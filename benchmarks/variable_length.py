"""A variable-length fine-tune: packed batches of 16 to 256 tokens, a new length every step.

The same model and batches, in one run:
- tpu fused eager with bounded programs (the default: one program per bound for the steps that
  differ only in length, csrc/eager/bounded.h);
- tpu fused eager with bounded programs and the length marked (torchtpu.mark_dynamic, max 256:
  the first length already runs bounded programs, all at the one bound 256);
- tpu fused eager, each length its own programs (TORCHTPU_BOUNDED=0);
- tpu torch.compile with the length marked dynamic up to 256 (one program per graph);
- tpu torch.compile with Dynamo's automatic dynamic shapes (no mark: lengths bucket by powers of
  two);
- tpu torch.compile on batches padded to 256 (the static-shape baseline; padded labels are
  ignored by the loss);
- PyTorch CPU eager at the real lengths.

Each is a pass over the same lengths twice: the first pass includes compiling, the second is the
steady state. Prints the programs the compiled graphs captured (forward and backward), the
compiles of the run (eager programs such as the SGD step compile once per process, so only the
first tpu run counts them) and ms per step (forward, backward, SGD step, `loss.item()`).

python benchmarks/variable_length.py [--steps N]

With --matrix, issue 35's model matrix instead (torchtpu/testing/variable_length.py): small
configurations of real Hugging Face models (BERT, RoBERTa, GPT-2, Llama, T5, ViT), one batch per
new length in [16, 128] (ViT: batch size), AdamW, in fused eager and under
torch.compile(backend="tpu"), without and with marks (torchtpu.mark_dynamic), dropout off, each
next to the same loop on CPU eager: programs compiled (all, and after the first two lengths),
seconds, and the largest relative loss difference from CPU over every step.

python benchmarks/variable_length.py --matrix [--steps 24] [--models bert,gpt2] [--modes fused]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import torchtpu
from torchtpu import _dynamo

VOCAB, HIDDEN, MAX_LEN = 2000, 256, 256


class PackedModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, HIDDEN)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.LayerNorm(HIDDEN),
                torch.nn.Linear(HIDDEN, 4 * HIDDEN),
                torch.nn.GELU(),
                torch.nn.Linear(4 * HIDDEN, HIDDEN),
            )
            for _ in range(2)
        )
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        for block in self.blocks:
            h = h + block(h)
        return F.cross_entropy(self.head(h), labels, ignore_index=-100)


def make_run(device: torch.device, mode: str) -> Callable[[torch.Tensor, torch.Tensor], float]:
    torch.manual_seed(0)
    model = PackedModel().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    fn: Callable[..., torch.Tensor] = model
    if mode not in ("eager", "fused", "fused-bounded", "fused-marked"):
        fn = torch.compile(lambda i, lab: model(i, lab), backend="tpu")

    def step(ids: torch.Tensor, labels: torch.Tensor) -> float:
        if mode == "padded":
            n = ids.shape[0]
            ids = F.pad(ids, (0, MAX_LEN - n))
            labels = F.pad(labels, (0, MAX_LEN - n), value=-100)
        ids, labels = ids.to(device), labels.to(device)
        if mode == "fused-marked":
            torchtpu.mark_dynamic(ids, 0, max=MAX_LEN)
        if mode == "marked":
            torch._dynamo.mark_dynamic(ids, 0, min=2, max=MAX_LEN)
            torch._dynamo.mark_dynamic(labels, 0, min=2, max=MAX_LEN)
        loss = fn(ids, labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    return step


def matrix_row(steps: int, name: str, compiled: bool, marked: bool) -> str:
    """One row of the matrix: CPU eager, then tpu, in this process."""
    from torchtpu.testing import variable_length as vl

    sizes = vl.lengths(steps)
    cpu = vl.run(name, "cpu", sizes)
    with torchtpu.mode("fused"):
        got = vl.run(name, "tpu", sizes, compiled=compiled, marked=marked)
    diff = max(abs(a - b) / abs(b) for a, b in zip(got.losses, cpu.losses))
    return (
        f"| {name} | {'torch.compile' if compiled else 'fused eager'} "
        f"| {'marked' if marked else 'none'} | {sum(got.compiles)} "
        f"| {sum(got.compiles[2:])} | {got.seconds:.1f} | {cpu.seconds:.1f} | {diff:.1e} |"
    )


def matrix(steps: int, models: list[str], modes: list[str]) -> None:
    """Each row in a process of its own: programs an earlier row compiled (kept in memory by
    exact key) would otherwise serve a later one."""
    import subprocess
    import sys

    from torchtpu.testing import variable_length as vl

    print(f"{steps} steps, sizes {vl.lengths(steps)}")
    print(
        "| model | mode | marks | compiles | after 2 lengths | tpu s | CPU s | max rel. loss diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in models:
        for mode in modes:
            for marked in (False, True):
                row = f"{name},{mode},{int(marked)}"
                done = subprocess.run(
                    [sys.executable, __file__, "--steps", str(steps), "--row", row],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                lines = [x for x in done.stdout.splitlines() if x.startswith("| ")]
                print(lines[-1] if lines else f"| {row} failed: {done.stderr[-300:]} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--matrix", action="store_true")
    p.add_argument("--models", default="bert,roberta,gpt2,llama,t5,vit")
    p.add_argument("--modes", default="fused,compile")
    p.add_argument("--row", help="model,mode,marked: one matrix row (what --matrix runs)")
    args = p.parse_args()
    if args.row:
        name, mode, marked = args.row.split(",")
        print(matrix_row(args.steps or 24, name, mode == "compile", marked == "1"))
        return
    if args.matrix:
        matrix(args.steps or 24, args.models.split(","), args.modes.split(","))
        return
    args.steps = args.steps or 30
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(16, MAX_LEN + 1, (args.steps,), generator=gen).tolist()
    data = [
        (torch.randint(0, VOCAB, (n,), generator=gen), torch.randint(0, VOCAB, (n,), generator=gen))
        for n in lengths
    ]
    tpu = torchtpu.get_device()
    runs = [
        # Bounded first: the exact run's programs, once loaded, would be used instead.
        ("tpu fused eager, bounded programs", tpu, "fused-bounded"),
        ("tpu fused eager, bounded programs, length marked (max 256)", tpu, "fused-marked"),
        ("tpu fused eager, programs per length", tpu, "fused"),
        ("tpu torch.compile, length marked dynamic (max 256)", tpu, "marked"),
        ("tpu torch.compile, automatic dynamic (no mark)", tpu, "auto"),
        ("tpu torch.compile, padded to 256 (static)", tpu, "padded"),
        ("PyTorch CPU eager, real lengths", torch.device("cpu"), "eager"),
    ]
    print(f"{args.steps} steps, lengths {min(lengths)}..{max(lengths)} tokens, 2 CPU cores")
    print("| run | graph programs | compiles | first pass ms/step | steady ms/step | final loss |")
    print("|---|---|---|---|---|---|")
    for name, device, mode in runs:
        torch._dynamo.reset()
        torchtpu._C._set_bounded(mode in ("fused-bounded", "fused-marked"))
        step = make_run(device, mode)
        compiles = torchtpu.metrics()["compiles"]
        before = {id(g) for g in _dynamo.compiled_graphs()}
        passes = []
        for _ in range(2):
            start = time.perf_counter()
            for ids, labels in data:
                loss = step(ids, labels)
            passes.append((time.perf_counter() - start) / len(data) * 1e3)
        tpu_run = device.type == "tpu"
        compiled = torchtpu.metrics()["compiles"] - compiles if tpu_run else "-"
        graphs = [g for g in _dynamo.compiled_graphs() if id(g) not in before]
        programs = sum(g.captures for g in graphs) if tpu_run and graphs else "-"
        print(
            f"| {name} | {programs} | {compiled} | {passes[0]:.1f} | {passes[1]:.1f} | {loss:.4f} |"
        )


if __name__ == "__main__":
    main()
