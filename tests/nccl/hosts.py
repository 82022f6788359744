"""Test "hosts": a sysfs tree with measured congestion, read by the real sources, and a netd pin socket.

:func:`host_state` builds two dual-port-as-two-devices ConnectX hosts' worth of counters, collects
them twice through the real :class:`~netd.sources.collect.Sampler` with the second snapshot exactly one
second after the first, and returns the daemon's published state. :class:`HostDaemon` is what
``netd run`` starts for the plugin (netd.nccl.service) on such a state.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from netd.config.settings import load_config
from netd.daemon.state import PublishedState
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.nccl.pin_client import RemotePins
from netd.nccl.pins import PinAuthority
from netd.nccl.policy import ModelParams
from netd.nccl.publisher import HintPublisher
from netd.nccl.socket_server import PinResolver, PinSocketServer
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler
from tests.conftest import write_ethtool

NETDEVS = ("ens1f0np0", "ens1f1np1")


def host_state(root: Path, host: str, *, pause_us: int = 0, cnp: int = 0, ecn: int = 0) -> PublishedState:
    """A host whose two 200G RoCE ports saw, over one second: ``pause_us`` µs paused on priority 3,
    ``cnp`` CNPs handled and ``ecn`` CE-marked packets out of 1,000,000 received."""
    tree = SysfsTree(root)
    (root / "ethtool").mkdir(parents=True, exist_ok=True)
    names = mlx5_ethtool_names((3,))
    for fn, netdev in enumerate(NETDEVS):
        tree.add_device(DeviceSpec(name=f"mlx5_{fn}", netdev=netdev, pci=f"0000:41:00.{fn}"))
        write_ethtool(root, netdev, dict.fromkeys(names, 0))
    cfg = load_config(environ={"NETD_VERBS_ENABLED": "false"}, overrides={"host": host})
    collector = Sampler.from_config(cfg, root, host=host)
    try:
        tracker = SeriesTracker()
        first = collector.collect()
        tracker.update(first)
        for fn, netdev in enumerate(NETDEVS):
            tree.set_counters(
                f"mlx5_{fn}",
                1,
                {
                    "port_rcv_packets": 1_000_000,
                    "port_xmit_packets": 1_000_000,
                    "np_ecn_marked_roce_packets": ecn,
                    "rp_cnp_handled": cnp,
                },
            )
            stats = dict.fromkeys(names, 0)
            stats.update({"rx_prio3_pause": pause_us // 10, "rx_prio3_pause_duration": pause_us})
            write_ethtool(root, netdev, stats)
        second = dataclasses.replace(collector.collect(), monotonic=first.monotonic + 1.0)
        return PublishedState(observation=tracker.update(second), ticks=2)
    finally:
        collector.close()
        tree.close()


CONGESTED = {"pause_us": 200_000, "cnp": 2_000, "ecn": 20_000}  # 20 % paused, 2000 CNP/s, 2 % CE


class HostDaemon:
    """The plugin-facing part of one netd: its table publisher and its pin socket."""

    def __init__(
        self,
        socket_path: Path,
        state: PublishedState,
        host: str,
        pin_service: str | None = None,
        token: str | None = None,
        window_s: float = 3.0,
    ) -> None:
        self.state = state
        self.publisher = HintPublisher(lambda: self.state, valid_for_s=30.0, params=ModelParams())
        remote = RemotePins(pin_service, token, timeout_s=window_s + 5, host=host) if pin_service else None
        self.resolver = PinResolver(PinAuthority(window_s=window_s), remote, self.publisher.table_bytes, host)
        self.server = PinSocketServer(socket_path, self.resolver)

    def __enter__(self) -> HostDaemon:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()

    def table(self) -> bytes:
        data = self.publisher.table_bytes()
        assert data is not None
        return data
