"""Where the fabric audit gets every host's QoS from, and the audit it keeps.

* ``netd fabric`` with Prometheus: each host daemon exports ``netd_qos_setting_info``; joined with
  ``netd_port_info`` on (job, instance, device, port) for the host and ToR names (:func:`from_prometheus`).
* ``netd run`` on the emulated fabric: this process can read every emulated host's trees, so it audits
  them directly (:func:`from_emulated_trees`) — the same comparison, no Prometheus needed.

:class:`FabricQos` re-audits at most once per ``max_age_s`` and keeps the last good answer when a
refresh fails, saying why.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from netd.config.qos import QosConfig
from netd.errors import NetdError
from netd.qos.audit import Audit, PortSettings, audit_ports
from netd.sources.prometheus import PrometheusClient
from netd.sources.qos import QosSource
from netd.sources.qos_dcb import CapturedDcbReader

__all__ = ["FabricQos", "from_emulated_trees", "from_prometheus"]

PortsFn = Callable[[], Sequence[PortSettings]]


def _key(labels: Mapping[str, str]) -> tuple[str, str, str, str]:
    """(job, instance, device, port): what joins a host's series to its ``netd_port_info``."""
    return (
        labels.get("job", ""),
        labels.get("instance", ""),
        labels.get("device", ""),
        labels.get("port", ""),
    )


def from_prometheus(client: PrometheusClient) -> PortsFn:
    def ports() -> list[PortSettings]:
        where = {
            _key(labels): (labels.get("host") or labels.get("instance", ""), labels.get("tor") or None)
            for labels, _ in client.query("netd_port_info")
        }
        settings: dict[tuple[str, str, str, str], dict[str, str]] = {}
        netdevs: dict[tuple[str, str, str, str], str | None] = {}
        for labels, _ in client.query("netd_qos_setting_info"):
            key = _key(labels)
            settings.setdefault(key, {})[labels.get("setting", "")] = labels.get("value", "")
            netdevs[key] = labels.get("netdev") or None
        out = []
        for key, values in settings.items():
            host, tor = where.get(key, (key[1], None))
            port = int(key[3]) if key[3].isdigit() else 1
            out.append(PortSettings(host, tor, key[2], port, netdevs[key], values))
        return out

    return ports


def from_emulated_trees(host_roots: Mapping[str, tuple[Path, str]]) -> PortsFn:
    """``host name -> (its tree root, its ToR)``; each tree is read as a real host's would be."""

    def ports() -> list[PortSettings]:
        out = []
        for host, (root, tor) in host_roots.items():
            for p in QosSource(root, CapturedDcbReader(root)).read():
                out.append(PortSettings(host, tor, p.device, p.port, p.netdev, p.settings()))
        return out

    return ports


class FabricQos:
    def __init__(self, ports: PortsFn, cfg: QosConfig, origin: str, max_age_s: float = 10.0) -> None:
        self._ports = ports
        self.cfg = cfg
        self.origin = origin
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._audit: Audit | None = None
        self._at = 0.0
        self.last_error: str | None = None

    def current(self) -> Audit | None:
        with self._lock:
            if self._audit is None or time.monotonic() - self._at >= self.max_age_s:
                try:
                    self._audit = audit_ports(
                        self._ports(), self.cfg.expected, self.cfg.scope, self.cfg.ignore
                    )
                    self.last_error = None
                except NetdError as exc:
                    self.last_error = str(exc)
                self._at = time.monotonic()
            return self._audit

    def document(self) -> dict[str, Any]:
        result = self.current()
        doc: dict[str, Any] = {"origin": self.origin, "error": self.last_error}
        if result is not None:
            doc.update(result.to_dict())
        return doc
