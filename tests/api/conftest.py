"""Serving an app for real over loopback HTTP (uvicorn in a thread), and a hardware-shaped host."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI

from netd.api.server import Server
from netd.emulated.fabric_topology import lldp_document

LEAF_FILE = """version: 1
spines: [spine-1]
tors:
  leaf-1: {spines: [spine-1], mgmt_address: 192.0.2.21}
"""


@contextmanager
def serving(app: FastAPI, port: int) -> Iterator[str]:
    """netd's listener (uvicorn with netd's connection limits) on 127.0.0.1:port in a thread (it
    installs no signal handlers off the main thread)."""
    server = Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        thread.join(timeout=10)


def write_host_topology(root: Path, host: str = "gpu-01", tor: int = 0) -> None:
    """A captured host's LLDP (both ports on one ToR) and static file, as the topology service reads them."""
    doc = lldp_document(0, 8, 2, host, ["ens1f0np0", "ens1f1np1"])
    text = json.dumps(doc).replace("emu-tor0", f"leaf-{tor + 1}")
    (root / "lldp.json").write_text(text)
    (root / "topology.yaml").write_text(LEAF_FILE)


@pytest.fixture
def serve():
    return serving
