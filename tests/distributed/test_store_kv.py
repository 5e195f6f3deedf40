"""The key-value store a multi-process PJRT client (XLA:GPU) meets its peers through is the c10d
Store: the adapter PJRT's callbacks call, driven here over a real TCPStore on CPU."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from torchtpu import _C


@pytest.fixture()
def stores():
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30))
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False,
                           timeout=timedelta(seconds=30))
    yield (_C._StoreKV(dist.PrefixStore("torchtpu/pjrt/", server)),
           _C._StoreKV(dist.PrefixStore("torchtpu/pjrt/", client)))


def test_put_on_one_node_get_on_another(stores):
    a, b = stores
    a.put("gpu:topology/0", b"\x00\x01binary")
    assert b.get("gpu:topology/0", 1000) == b"\x00\x01binary"
    assert b.try_get("gpu:topology/0") == b"\x00\x01binary"
    assert b.try_get("gpu:topology/1") is None


def test_get_blocks_until_the_peer_puts(stores):
    a, b = stores
    threading.Timer(0.3, lambda: a.put("nccl_id", b"xyz")).start()
    start = time.monotonic()
    assert b.get("nccl_id", 10_000) == b"xyz"
    assert time.monotonic() - start >= 0.25


def test_get_times_out(stores):
    _, b = stores
    start = time.monotonic()
    with pytest.raises(Exception, match="[Tt]imeout|timed out"):
        b.get("never", 200)
    assert time.monotonic() - start < 5
