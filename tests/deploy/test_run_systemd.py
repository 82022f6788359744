"""`netd run` as systemd runs it: NOTIFY_SOCKET and WATCHDOG_USEC set, SIGHUP to reload, SIGTERM to
stop. The test plays systemd's part: it owns the notification socket and reads what netd sends."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.processes import Child

pytestmark = pytest.mark.slow  # runs `netd run` as a process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Systemd:
    """The receiving end of $NOTIFY_SOCKET: every datagram, in order."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.received: list[list[str]] = []

    def wait_for(self, line: str, timeout_s: float = 60.0) -> int:
        """Read until a datagram holds ``line``; return how many WATCHDOG=1 came before it."""
        deadline = time.monotonic() + timeout_s
        pings = 0
        while time.monotonic() < deadline:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                msg = self.sock.recv(4096).decode().split("\n")
            except TimeoutError:
                break
            self.received.append(msg)
            if line in msg:
                return pings
            pings += msg.count("WATCHDOG=1")
        raise AssertionError(f"no {line!r} from netd; got {self.received}")

    def close(self) -> None:
        self.sock.close()


def _config(path: Path, port: int, interval: float = 0.5) -> None:
    path.write_text(f'listen = "127.0.0.1:{port}"\ninterval = {interval}\n')


def test_ready_watchdog_reload_and_stop(tmp_path: Path):
    systemd = Systemd(tmp_path / "notify.sock")
    conf = tmp_path / "netd.toml"
    first, second = _free_port(), _free_port()
    _config(conf, first)
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(tmp_path / "notify.sock"),
        "WATCHDOG_USEC": "400000",  # a ping every 0.2 s while ticks are fresh
        "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"),
        "NETD_SYSFS_ROOT": str(tmp_path),
    }
    proc = Child([sys.executable, "-m", "netd", "run", "--config", str(conf)], env=env)
    try:
        systemd.wait_for("READY=1")
        # READY means serving: the listener answers at once, with a tick already published
        assert httpx.get(f"http://127.0.0.1:{first}/readyz", timeout=5).status_code == 200

        systemd.wait_for("WATCHDOG=1")
        assert systemd.wait_for("WATCHDOG=1") == 0  # pings keep coming while the loop ticks

        # a reload that cannot load keeps the running service (no RELOADING, still answering)
        conf.write_text("interval = [not toml\n")
        proc.send_signal(signal.SIGHUP)
        systemd.wait_for("WATCHDOG=1")
        systemd.wait_for("WATCHDOG=1")
        assert not any("RELOADING=1" in m for m in systemd.received)
        assert proc.poll() is None
        assert httpx.get(f"http://127.0.0.1:{first}/healthz", timeout=5).status_code == 200

        # a FIFO where the file was: the reload runs on the thread that serves HTTP, and an open() that
        # waited for a writer would leave the service unanswering (the loop, and so the watchdog, going on)
        os.mkfifo(tmp_path / "fifo")
        os.replace(tmp_path / "fifo", conf)
        proc.send_signal(signal.SIGHUP)
        systemd.wait_for("WATCHDOG=1")
        systemd.wait_for("WATCHDOG=1")
        assert httpx.get(f"http://127.0.0.1:{first}/healthz", timeout=5).status_code == 200
        assert not any("RELOADING=1" in m for m in systemd.received)
        conf.unlink()

        # a good reload moves the listener: RELOADING, then READY again from the new configuration
        _config(conf, second)
        proc.send_signal(signal.SIGHUP)
        systemd.wait_for("RELOADING=1")
        systemd.wait_for("READY=1")
        assert proc.poll() is None
        assert httpx.get(f"http://127.0.0.1:{second}/readyz", timeout=5).status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{first}/healthz", timeout=5)

        proc.send_signal(signal.SIGTERM)
        systemd.wait_for("STOPPING=1")
        proc.wait(timeout=30)
        err = proc.stderr_text()
        assert proc.returncode == 0, err
        assert "keeping the running configuration" in err
        assert f"cannot read config file {conf}: not a regular file" in err
        assert "configuration reloaded (SIGHUP)" in err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        systemd.close()
