"""Rank 0's rendezvous store listens on the port the OS gave it as it bound, so no other process can take the
port between choosing and binding (the EADDRINUSE of a port chosen first and bound later)."""

from __future__ import annotations

import socket

import pytest

from vla_rl.runtime.distributed import connect_rendezvous, open_rendezvous


def test_the_store_holds_its_port_and_clients_reach_it():
    store = open_rendezvous(timeout_s=10)
    assert store.port > 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other, pytest.raises(OSError):
        other.bind(("0.0.0.0", store.port))  # taken from the moment the store exists
    client = connect_rendezvous("127.0.0.1", store.port, timeout_s=10)
    client.set("rank1", "ready")
    assert store.get("rank1") == b"ready"
