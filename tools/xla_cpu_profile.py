"""Where the CPU time of a fused Llama training step goes on the XLA:CPU plugin, from `perf`:
CPU milliseconds per step by thread (host: Python, autograd, our dispatch; XLA: its pool threads)
and by kind of work (dots, fused kernels by name, malloc, the thread pool, the kernel).

XLA:CPU compiles every fusion to machine code at run time, which perf cannot name by itself. The
plugin registers each object it loads with the GDB JIT interface (`__jit_debug_descriptor`), so
after warm-up this tool walks that list and writes `/tmp/perf-<pid>.map`, where perf finds the
kernels' names. The persistent compile cache is off, so the programs are compiled (and
registered) in this process. Unnamed code in a writable and executable anonymous mapping is
oneDNN's generated GEMM kernels, the inner loops of XLA:CPU's Eigen dots.

Needs `perf` (Debian: linux-perf) and the right to profile (perf_event_paranoid <= 1, or root).

python tools/xla_cpu_profile.py [--shape 16x40] [--seconds 5] [--mode fused|strict|compiled]

`compiled` is compile_llama.py's step under `torch.compile(backend="tpu")`. Under the profiler,
strict mode runs at about half its usual speed (a context switch per op).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

os.environ["TORCHTPU_CACHE_DIR"] = "off"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "examples")]

import torch
from compile_llama import make_step
from llama_train import train_step

import torchtpu
from torchtpu import _C

SHT_SYMTAB, STT_FUNC, STT_OBJECT = 2, 2, 1
HZ = 1999  # perf's sampling rate


def elf_symbols(elf: bytes, kind: int) -> list[tuple[int, int, int, str]]:
    """(section address, value, size, name) of an ELF64 image's symbols of one type."""
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    found = []
    for _, typ, _, _, off, size, link, _, _, _ in sections:
        if typ != SHT_SYMTAB:
            continue
        strings = sections[link][4]
        for j in range(size // 24):
            name, info, _, shndx, value, sym_size = struct.unpack_from("<IBBHQQ", elf, off + j * 24)
            if info & 0xF != kind or not 0 < shndx < len(sections):
                continue
            end = elf.index(b"\0", strings + name)
            found.append((sections[shndx][3], value, sym_size, elf[strings + name : end].decode()))
    return found


def maps() -> list[list[str]]:
    with open("/proc/self/maps") as f:
        return [line.split() for line in f]


def plugin_base(path: str) -> int:
    for parts in maps():
        if len(parts) >= 6 and parts[5] == path and int(parts[2], 16) == 0:
            return int(parts[0].split("-")[0], 16)
    raise RuntimeError(f"{path} is not mapped")


class JitEntry(ctypes.Structure):
    pass


JitEntry._fields_ = [
    ("next", ctypes.POINTER(JitEntry)),
    ("prev", ctypes.POINTER(JitEntry)),
    ("addr", ctypes.c_void_p),
    ("size", ctypes.c_uint64),
]


class JitDescriptor(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("action", ctypes.c_uint32),
        ("relevant", ctypes.POINTER(JitEntry)),
        ("first", ctypes.POINTER(JitEntry)),
    ]


def write_perf_map() -> int:
    """Names every JIT-compiled kernel of the plugin in /tmp/perf-<pid>.map; returns the count."""
    path = os.path.realpath(_C.plugin_path())
    with open(path, "rb") as f:
        image = f.read()
    offsets = [v for _, v, _, n in elf_symbols(image, STT_OBJECT) if n == "__jit_debug_descriptor"]
    if not offsets:
        raise RuntimeError(f"{path} has no __jit_debug_descriptor symbol")
    descriptor = JitDescriptor.from_address(plugin_base(path) + offsets[0])
    lines, entry = [], descriptor.first
    while entry:
        obj = ctypes.string_at(entry.contents.addr, entry.contents.size)
        for section, value, size, name in elf_symbols(obj, STT_FUNC):
            lines.append(f"{section + value:x} {max(size, 1):x} {name}\n")
        entry = entry.contents.next
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:
        f.writelines(lines)
    return len(lines)


def rwx_ranges() -> list[tuple[int, int]]:
    ranges = []
    for parts in maps():
        if parts[1] == "rwxp" and len(parts) == 5:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            ranges.append((lo, hi))
    return ranges


MALLOC = re.compile(r"malloc|free|_int_|unlink_chunk|consolidate|memalign")


FUSED, XLA, HOST = "XLA threads: fused kernels", "XLA threads", "host threads"
DOTS = "dots (Eigen packing, oneDNN GEMM)"


def category(comm: str, sym: str, dso: str, ip: int, rwx: list[tuple[int, int]]) -> tuple[str, str]:
    """(group, kind of work) of one sample."""
    side = XLA if comm.startswith("tf_") else HOST
    if MALLOC.search(sym):
        return side, "malloc/free"
    if "kernel.kallsyms" in dso:
        return side, "Linux kernel (scheduling, page faults)"
    if side == XLA:
        if re.search(r"gemm|dnnl|Contraction", sym) or any(lo <= ip < hi for lo, hi in rwx):
            return XLA, DOTS
        if "perf-" in dso or dso.startswith("[JIT]"):
            return FUSED, re.sub(r"\.\d+$", "", sym)
        if re.search(r"Eigen::|RunQueue|EventCount|tsl::thread", sym):
            return XLA, "thread pool (queues, stealing)"
        if "libm" in dso:
            return XLA, f"libm ({sym})"
        return XLA, f"other (runtime, {os.path.basename(dso)})"
    if "libpython" in dso or dso.endswith("python3") or "python3." in os.path.basename(dso):
        return HOST, "Python interpreter"
    if "libtorch" in dso or "libc10" in dso:
        return HOST, "PyTorch (dispatcher, autograd)"
    if "torchtpu" in dso:
        return HOST, "torchtpu (recording, keys, launch)"
    if "pjrt" in dso:
        return HOST, "PJRT client (execute, buffers)"
    return HOST, f"other ({os.path.basename(dso)})"


SAMPLE = re.compile(r"^\s*(\S+)\s+\d+\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="16x40")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--mode", choices=["fused", "strict", "compiled"], default="fused")
    p.add_argument("--top", type=int, default=12, help="rows listed per group")
    args = p.parse_args()
    batch, seq = (int(x) for x in args.shape.split("x"))
    torchtpu.set_mode("fused" if args.mode == "compiled" else args.mode)
    if args.mode == "compiled":
        step = make_step(torchtpu.get_device(), "tpu", batch, seq)
    else:
        step = train_step(torchtpu.get_device(), batch, seq)
    for _ in range(8):
        step()
    torch.tpu.synchronize()
    kernels = write_perf_map()
    rwx = rwx_ranges()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        perf = subprocess.Popen(
            [
                "perf",
                "record",
                "-q",
                "-F",
                str(HZ),
                "-p",
                str(os.getpid()),
                "-o",
                data,
                "--",
                "sleep",
                str(args.seconds),
            ],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        start, steps = time.perf_counter(), 0
        while perf.poll() is None:
            step()
            steps += 1
        torch.tpu.synchronize()
        wall = time.perf_counter() - start
        script = subprocess.run(
            ["perf", "script", "-i", data, "-F", "comm,tid,ip,sym,dso"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    totals: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in script.splitlines():
        m = SAMPLE.match(line)
        if m:
            comm, ip, sym, dso = m.groups()
            totals[category(comm, sym, dso, int(ip, 16), rwx)] += 1e3 / HZ
    # perf ran about args.seconds of the loop's wall time; scale samples to one step.
    per_step = steps / wall * args.seconds
    print(
        f"CPU ms per {args.mode} step at {args.shape} ({steps} steps, {wall / steps * 1e3:.1f} ms "
        f"wall per step, {kernels} JIT kernels named; 2 cores give 2 CPU ms per wall ms)"
    )
    for group in (FUSED, XLA, HOST):
        rows = sorted(
            ((kind, ms) for (g, kind), ms in totals.items() if g == group), key=lambda r: -r[1]
        )
        print(f"{group:60s} {sum(ms for _, ms in rows) / per_step:7.2f}")
        for kind, ms in rows[: args.top]:
            print(f"  {kind:58s} {ms / per_step:7.2f}")
    print(f"{'all threads':60s} {sum(totals.values()) / per_step:7.2f}")


if __name__ == "__main__":
    main()
