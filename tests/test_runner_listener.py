"""The listener netd run serves on: socket options and interpreter settings that latency depends on."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading

import pytest
import uvicorn

from netd.api.server import SWITCH_INTERVAL_S, Server, bind, share_interpreter_lock
from netd.errors import NetdError


def test_accepted_connections_have_nagle_off():
    """asyncio (hence uvicorn) turns Nagle off on an accepted connection only when the listening
    socket names its protocol; with it on, each keep-alive response waited ~40 ms for a delayed ACK."""
    listener = bind("127.0.0.1", 0)
    seen: list[int] = []

    async def main() -> None:
        accepted = asyncio.Event()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            accepted.set()

        server = await asyncio.start_server(on_connect, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(*listener.getsockname())
            await asyncio.wait_for(accepted.wait(), 10)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0


def test_a_busy_port_fails_clearly():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(NetdError, match=r"cannot listen on 127\.0\.0\.1:\d+"):
            bind("127.0.0.1", taken.getsockname()[1])


def test_lock_sharing_is_scoped_to_serving():
    before = sys.getswitchinterval()
    with share_interpreter_lock():
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == before


def _served(period_s: float) -> tuple[Server, threading.Thread, socket.socket]:
    from fastapi import FastAPI

    sock = bind("127.0.0.1", 0)
    server = Server(uvicorn.Config(FastAPI(), log_level="critical", lifespan="off"))
    server.MAIN_LOOP_PERIOD_S = period_s
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive()
        threading.Event().wait(0.01)
    return server, thread, sock


def test_stop_starts_the_shutdown_at_once_not_at_the_next_wake_up():
    """The main loop wakes once per MAIN_LOOP_PERIOD_S (uvicorn's woke ten times a second, a tenth of
    an idle daemon's CPU); stop() must not wait for it: here the period is an hour."""
    server, thread, sock = _served(3600.0)
    try:
        server.stop()
        thread.join(30)
        assert not thread.is_alive()
    finally:
        sock.close()
