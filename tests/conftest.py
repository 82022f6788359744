"""Shared fixtures: fake trees built with the real tree writer, free ports, a clean environment."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.sources.ethtool import format_ethtool_text


@pytest.fixture(autouse=True)
def _clean_netd_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No NETD_* variable or /etc config of the developer's leaks into a test."""
    for key in list(os.environ):
        if key.startswith("NETD_"):
            monkeypatch.delenv(key)
    monkeypatch.setattr("netd.config.settings.DEFAULT_CONFIG_PATH", Path("/nonexistent/netd.toml"))


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


@pytest.fixture
def free_port() -> int:
    """A port no one listens on, below the kernel's ephemeral range: a port the kernel handed out
    with bind(0) can be handed out again as the local end of a client connection (a test opening
    2000 of them) before the server under test binds it, or a connection to it while nothing
    listens can connect to itself."""
    rng = random.Random()
    low = min(_ephemeral_low(), 32768)
    for _ in range(200 if low > 2048 else 0):
        port = rng.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # no room below the ephemeral range: take one from it
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mlx5_host(tmp_path: Path) -> Iterator[tuple[Path, SysfsTree]]:
    """A captured-looking host: one dual-port ConnectX (mlx5_0, mlx5_1) with ethtool captures, PFC on 3."""
    root = tmp_path / "sys"
    tree = SysfsTree(root)
    (root / "ethtool").mkdir(parents=True)
    for fn in range(2):
        netdev = f"ens1f{fn}np{fn}"
        tree.add_device(DeviceSpec(name=f"mlx5_{fn}", netdev=netdev, pci=f"0000:41:00.{fn}"))
        write_ethtool(root, netdev, dict.fromkeys(mlx5_ethtool_names((3,)), 0))
    yield root, tree
    tree.close()


def write_ethtool(root: Path, netdev: str, stats: dict[str, int]) -> None:
    (root / "ethtool" / netdev).write_text(format_ethtool_text(stats))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`lab` and `root` tests build namespaces, attach programs or start daemons: they take seconds,
    so they belong to the slow tier too (`pytest -m "not slow"` is the fast one; CI runs both)."""
    for item in items:
        if item.get_closest_marker("lab") or item.get_closest_marker("root"):
            item.add_marker(pytest.mark.slow)
