"""One tick of collection: run every configured source and assemble a Snapshot.

Each source is timed and isolated: a source that raises is recorded as failed
for this tick (``SourceStatus.ok = False``) and the snapshot is built from the
others. Absent data is not a failure (the sources return nothing for it).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from netd.config.settings import Config
from netd.errors import NetdError
from netd.model.snapshot import EthtoolSample, PortSample, Snapshot, SourceStatus, frozen_map
from netd.sources.bpf import BpfSource
from netd.sources.ethtool import EthtoolSource, make_reader
from netd.sources.rdma import RdmaSysfs
from netd.vocabulary.ethtool_names import used

__all__ = ["Sampler"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Sampler:
    """Samples every source of one sysfs root into a Snapshot. Not thread-safe: one loop calls
    :meth:`collect`. (Not a Prometheus collector: that is :class:`netd.exporter.NetdCollector`.)"""

    def __init__(
        self,
        sysfs_root: Path,
        *,
        rdma_include: tuple[str, ...] = ("*",),
        rdma_exclude: tuple[str, ...] = (),
        rescan_interval_s: float = 30.0,
        slow_interval_s: float = 0.0,
        ethtool_enabled: bool = True,
        ethtool_backend: str = "auto",
        ethtool_include: tuple[str, ...] = ("*",),
        ethtool_exclude: tuple[str, ...] = (),
        host: str | None = None,
        emulated: bool = False,
    ) -> None:
        self.sysfs_root = sysfs_root
        self.host = host or socket.gethostname()
        self.emulated = emulated
        self.rdma = RdmaSysfs(
            sysfs_root,
            include=rdma_include,
            exclude=rdma_exclude,
            rescan_interval_s=rescan_interval_s,
            slow_interval_s=slow_interval_s,
        )
        self.ethtool: EthtoolSource | None = None
        if ethtool_enabled:
            self.ethtool = EthtoolSource(
                make_reader(ethtool_backend, sysfs_root),
                include=ethtool_include,
                exclude=ethtool_exclude,
                keep=used,  # only the statistics netd reads: not the ~4000 per-ring ones of mlx5
            )
        self.ethtool_absent: dict[str, str] = {}  # netdev -> why it had no statistics last tick
        self.bpf: BpfSource | None = None  # eBPF probes, set by the daemon when [bpf] is enabled

    @classmethod
    def from_config(
        cls, cfg: Config, sysfs_root: Path, host: str | None = None, emulated: bool = False
    ) -> Sampler:
        return cls(
            sysfs_root,
            rdma_include=cfg.rdma.include,
            rdma_exclude=cfg.rdma.exclude,
            rescan_interval_s=cfg.rdma.rescan_interval,
            slow_interval_s=cfg.rdma.slow_interval,
            ethtool_enabled=cfg.ethtool.enabled,
            ethtool_backend=cfg.ethtool.backend,
            ethtool_include=cfg.ethtool.include,
            ethtool_exclude=cfg.ethtool.exclude,
            host=cfg.host or host or None,
            emulated=emulated,
        )

    def collect(self) -> Snapshot:
        start = time.monotonic()
        statuses: list[SourceStatus] = []
        ports: tuple[PortSample, ...] = self._timed("rdma", statuses, self.rdma.read, (), len)
        ethtool: dict[str, EthtoolSample] = {}
        if self.ethtool is not None:
            netdevs = sorted({p.netdev for p in ports if p.netdev})
            source = self.ethtool
            result = self._timed(
                "ethtool", statuses, lambda: source.read(netdevs), None, lambda r: len(r[0]) if r else 0
            )
            if result is not None:
                ethtool, self.ethtool_absent = result
        bpf = None
        if self.bpf is not None:
            attached = lambda b: sum(p.attached for p in b.probes) if b else 0  # noqa: E731
            bpf = self._timed("bpf", statuses, self.bpf.read, None, attached)
        end = time.monotonic()
        return Snapshot(
            timestamp=time.time(),
            monotonic=end,
            host=self.host,
            ports=ports,
            ethtool=frozen_map(ethtool),
            sources=tuple(statuses),
            emulated=self.emulated,
            tick_duration_s=end - start,
            bpf=bpf,
        )

    def counters_moved(self, names: frozenset[str]) -> bool:
        """Whether an RDMA counter with a vocabulary name in ``names`` moved since the last
        :meth:`collect` (:meth:`RdmaSysfs.moved`); a source error counts as moved."""
        try:
            return self.rdma.moved(names)
        except NetdError:
            return True

    def _timed(
        self,
        name: str,
        statuses: list[SourceStatus],
        fn: Callable[[], T],
        default: T,
        count: Callable[[T], int],
    ) -> T:
        t0 = time.monotonic()
        try:
            value = fn()
        except NetdError as exc:
            statuses.append(SourceStatus(name, False, time.monotonic() - t0, str(exc)))
            log.warning("source %s failed: %s", name, exc)
            return default
        except Exception as exc:  # a bug in one source must not stop the daemon
            statuses.append(SourceStatus(name, False, time.monotonic() - t0, f"{type(exc).__name__}: {exc}"))
            log.exception("source %s raised unexpectedly", name)
            return default
        statuses.append(SourceStatus(name, True, time.monotonic() - t0, None, count(value)))
        return value

    def close(self) -> None:
        self.rdma.close()
        if self.ethtool is not None:
            self.ethtool.close()
        if self.bpf is not None:
            self.bpf.close()
