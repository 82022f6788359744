"""sd_notify(3) as systemd's side sees it: a real AF_UNIX datagram socket the test reads."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.commands.sd_notify import Notifier, WatchdogPinger, watchdog_interval_s


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5.0)
    try:
        yield sock, str(path)
    finally:
        sock.close()


def _lines(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def test_ready_reaches_a_path_socket(notify_socket):
    sock, path = notify_socket
    n = Notifier({"NOTIFY_SOCKET": path})
    assert n.ready("serving") is True
    assert _lines(sock) == ["READY=1", "STATUS=serving"]
    assert n.stopping() is True
    assert _lines(sock) == ["STOPPING=1"]
    n.close()


def test_reloading_carries_a_monotonic_timestamp(notify_socket):
    sock, path = notify_socket
    n = Notifier({"NOTIFY_SOCKET": path})
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    n.reloading()
    lines = _lines(sock)
    assert lines[0] == "RELOADING=1"
    key, value = lines[1].split("=")
    assert key == "MONOTONIC_USEC" and int(value) >= before
    n.close()


def test_abstract_socket_name_with_at_sign():
    name = f"netd-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(5.0)
    try:
        n = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert n.send("READY=1")
        assert _lines(sock) == ["READY=1"]
        n.close()
    finally:
        sock.close()


def test_outside_systemd_nothing_is_sent():
    assert Notifier({}).send("READY=1") is False
    assert Notifier({"NOTIFY_SOCKET": "relative/path"}).enabled is False


def test_a_vanished_socket_is_reported_not_raised(tmp_path: Path):
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert n.send("READY=1") is False
    assert n.send("READY=1") is False
    n.close()


def test_watchdog_interval_is_half_of_watchdog_usec():
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}) == 15.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "soon"}) is None
    assert watchdog_interval_s({}) is None


def test_watchdog_pings_only_while_ticks_are_fresh(notify_socket):
    sock, path = notify_socket
    sock.settimeout(0.2)
    healthy = [True]
    pinger = WatchdogPinger(Notifier({"NOTIFY_SOCKET": path}), 1.0, lambda: healthy[0])
    assert pinger.beat() is True
    assert _lines(sock) == ["WATCHDOG=1"]
    healthy[0] = False  # the loop stalled: systemd must hear nothing, so WatchdogSec= restarts us
    assert pinger.beat() is False
    assert pinger.beat() is False
    with pytest.raises(TimeoutError):
        sock.recv(4096)
    healthy[0] = True
    assert pinger.beat() is True
    assert _lines(sock) == ["WATCHDOG=1"]
    assert pinger.skipped == 2
    pinger.notifier.close()


def test_watchdog_without_watchdog_usec_starts_no_thread(notify_socket):
    _, path = notify_socket
    pinger = WatchdogPinger(Notifier({"NOTIFY_SOCKET": path}), None, lambda: True)
    pinger.start()
    assert pinger._thread is None
    pinger.stop()
