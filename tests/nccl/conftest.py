"""Fixtures of the cross-rank tests: a pin service (the real router on uvicorn), two congested and
clean host states, and the built plugin."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI

from netd.nccl.pins import PinAuthority
from netd.nccl.routes import nccl_router
from tests.nccl.hosts import CONGESTED, host_state
from tests.nccl.plugin_harness import build_plugin

TOKEN = "consistency-test-token"


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # a test thread, not the main one
        pass


@pytest.fixture
def pin_service(free_port: int) -> Iterator[tuple[str, PinAuthority]]:
    authority = PinAuthority(window_s=10.0)  # generous: slow process starts must not abandon a pin
    app = FastAPI()
    app.include_router(nccl_router(token=TOKEN, authority=authority, current=lambda: None, env=lambda: None))
    server = _Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="pin-service", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"http://127.0.0.1:{free_port}", authority
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hosts")
    return host_state(root / "a", "hostA", **CONGESTED), host_state(root / "b", "hostB")


@pytest.fixture(scope="module")
def plugin_so() -> Path:
    return build_plugin()
