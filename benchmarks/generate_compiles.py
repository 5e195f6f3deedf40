"""Programs each greedy generate() call compiles when every call brings a new prompt length:
the tests' small Llama, Hugging Face's default dynamic KV cache, 64 new tokens, in fused eager
and with the forward under torch.compile, each with and without the prompt's length marked
(torchtpu.mark_dynamic). Each row runs in a fresh process with the compile cache off; every
call's tokens are checked against PyTorch CPU eager.

python benchmarks/generate_compiles.py [--lengths 5,9,3,12] [--tokens 64]
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys

ROWS = {
    "fused eager": [],
    "fused eager, prompt marked": ["--mark"],
    'torch.compile(backend="tpu", dynamic=True)': ["--compile", "dynamic"],
    'torch.compile(backend="tpu", dynamic=True), prompt marked': ["--compile", "dynamic", "--mark"],
    'torch.compile(backend="tpu") (automatic dynamic)': ["--compile", "auto"],
    'torch.compile(backend="tpu") (automatic dynamic), prompt marked': [
        "--compile", "auto", "--mark"
    ],
}


def one_row(args: argparse.Namespace) -> None:
    import torch

    import torchtpu

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tests.models.test_hf_models import llama

    torch.manual_seed(0)
    model = llama().eval()
    tpu_model = copy.deepcopy(model).to("tpu")
    if args.compile:
        dynamic = True if args.compile == "dynamic" else None
        tpu_model.forward = torch.compile(tpu_model.forward, backend="tpu", dynamic=dynamic)

    def greedy(m: torch.nn.Module, ids: torch.Tensor) -> list[int]:
        with torch.no_grad():
            out = m.generate(ids, max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                             do_sample=False, cache_implementation="dynamic", pad_token_id=0)
        return out[0].tolist()

    counts = []
    for n in args.lengths:
        ids = torch.randint(1, 100, (1, n), generator=torch.Generator().manual_seed(n))
        on_tpu = ids.to("tpu")
        if args.mark:
            torchtpu.mark_dynamic(on_tpu, 1)
        before = torchtpu.metrics()["compiles"]
        got = greedy(tpu_model, on_tpu)
        counts.append(torchtpu.metrics()["compiles"] - before)
        assert got == greedy(model, ids), f"tokens differ from CPU's at prompt length {n}"
    print("COUNTS " + " ".join(map(str, counts)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="5,9,3,12")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--compile", choices=["dynamic", "auto"])
    p.add_argument("--mark", action="store_true")
    p.add_argument("--row", action="store_true", help="(internal) run one row here")
    args = p.parse_args()
    args.lengths = [int(n) for n in args.lengths.split(",")]
    if args.row:
        return one_row(args)
    env = dict(os.environ, TORCHTPU_CACHE_DIR="off", TORCHTPU_MODE="fused")
    head = " | ".join(f"{i + 1} ({n})" for i, n in enumerate(args.lengths))
    print(f"| call (prompt tokens) | {head} |")
    print("|---" * (len(args.lengths) + 1) + "|")
    for name, flags in ROWS.items():
        cmd = [sys.executable, os.path.abspath(__file__), "--row", "--tokens", str(args.tokens),
               "--lengths", ",".join(map(str, args.lengths)), *flags]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200,
                             check=False)
        line = [x for x in out.stdout.splitlines() if x.startswith("COUNTS ")]
        if out.returncode != 0 or not line:
            print(f"| {name} | failed: {(out.stdout + out.stderr)[-300:]!r} |")
            continue
        print(f"| {name} | " + " | ".join(line[0].split()[1:]) + " |", flush=True)
    print("(compiles per call; tokens identical to PyTorch CPU eager in every call)")


if __name__ == "__main__":
    main()
