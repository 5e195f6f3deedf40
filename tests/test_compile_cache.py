"""The persistent compile cache: a second process compiles nothing, concurrent processes compile
once, corrupt entries are replaced, unsafe directories are refused, the size cap holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = r"""
import json, torch, torchtpu
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2)).to("tpu")
x = torch.randn(4, 8).to("tpu")
loss = m(x).pow(2).mean()
value = loss.item()  # two host reads: at least two programs in every mode
loss.backward()
value += sum(p.grad.sum() for p in m.parameters()).item()
torch.tpu.synchronize()
s = torchtpu.cache_stats()
print(json.dumps({"loss": value, "compiles": s["compiles"], "hits": s["hits"],
                  "corrupt": s["corrupt"], "disk_hits": torchtpu.metrics()["disk_cache_hits"]}))
"""


def launch(cache_dir: str, **env: str) -> subprocess.Popen:
    e = dict(os.environ, TORCHTPU_CACHE_DIR=cache_dir, **env)
    return subprocess.Popen(
        [sys.executable, "-c", PROGRAM],
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(p: subprocess.Popen) -> tuple[dict, str]:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def run(cache_dir: str, **env: str) -> tuple[dict, str]:
    return finish(launch(cache_dir, **env))


def entries(d) -> list[str]:
    return [f for f in os.listdir(d) if f.endswith(".xla")]


def test_second_process_compiles_nothing(tmp_path):
    first, _ = run(str(tmp_path))
    assert first["compiles"] > 0 and first["hits"] == 0
    assert oct(os.stat(tmp_path).st_mode & 0o777) == "0o700" or tmp_path.exists()
    second, _ = run(str(tmp_path))
    assert second["compiles"] == 0
    assert second["disk_hits"] == first["compiles"]
    assert second["loss"] == first["loss"]


def test_directory_created_private(tmp_path):
    d = tmp_path / "new" / "cache"
    run(str(d))
    assert d.stat().st_mode & 0o777 == 0o700
    assert entries(d)


def test_concurrent_processes_compile_once(tmp_path):
    alone, _ = run(str(tmp_path / "alone"))
    shared = str(tmp_path / "shared")
    a, b = launch(shared), launch(shared)
    ra, _ = finish(a)
    rb, _ = finish(b)
    assert ra["compiles"] + rb["compiles"] == alone["compiles"]
    assert ra["loss"] == rb["loss"] == alone["loss"]


def test_corrupt_entries_are_recompiled(tmp_path):
    first, _ = run(str(tmp_path))
    files = sorted(entries(tmp_path))
    with open(tmp_path / files[0], "r+b") as f:  # truncate one entry
        f.truncate(10)
    with open(tmp_path / files[1], "r+b") as f:  # flip a byte in another's payload
        f.seek(-1, os.SEEK_END)
        byte = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    second, _ = run(str(tmp_path))
    assert second["corrupt"] == 2 and second["compiles"] == 2
    assert second["loss"] == first["loss"]
    third, _ = run(str(tmp_path))
    assert third["compiles"] == 0


def test_unsafe_directory_is_refused(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    result, err = run(str(d))
    assert "writable by other users" in err
    assert result["compiles"] > 0 and not entries(d)


def test_cache_off_and_size_cap(tmp_path):
    result, _ = run("off")
    assert result["compiles"] > 0
    capped = tmp_path / "capped"
    run(str(capped), TORCHTPU_CACHE_MAX_BYTES="20000")
    assert sum(os.path.getsize(capped / f) for f in entries(capped)) <= 20000
