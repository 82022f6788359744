"""The cluster view for ``netd fabric``: every host's ports from Prometheus, scored per port, ToR, spine.

Each refresh (``cluster.refresh_interval``, 10 s) runs three instant queries:

* ``timestamp(netd_port_info)`` — every host's ports with their ``host``, ``tor``, ``spine``,
  ``rail`` and ``state`` labels (the cluster topology) and when each was last scraped: hosts not
  scraped for ``cluster.host_stale_after`` (60 s; their netd died) are left out;
* ``avg_over_time(netd_port_congestion_signal[<window>])`` — each port's four score inputs, averaged
  over ``cluster.window`` (1m);
* ``netd_port_pfc_stormed`` — each host's own PFC-storm flag;

joined on (job, instance, device, port), and feeds the same scorer (:mod:`netd.congestion.scorer`) a
host daemon uses, so a ToR's score here is the documented aggregate over *all* its hosts' ports.

At fleet size one answer is too big for one query (8000 ports: 32,000 signal series, 4.1 s against
a 5 s timeout), so the queries are paged by ToR: ``count by (tor) (netd_port_info)`` lists the ToRs,
and each page of ``cluster.tors_per_query`` ToRs runs the three queries restricted to its ports
(``... and on (job, instance, device, port) netd_port_info{tor=~"<page>"}``), each within its own
timeout. A failed refresh keeps the previous snapshot (the *last good view*) and says in its note
whether Prometheus was slow or unreachable and how old the view is. Pod-group peers for the
scheduler: netd.cluster.peers.

``netd fabric`` runs this view in a process of its own (netd.cluster.remote): a 5000-node refresh is
~0.3-0.5 s of interpreter time, and in the listener's process every request waited for it.
"""

from __future__ import annotations

import logging
import operator
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import cast

from netd.api.heap import SettledHeap
from netd.api.service_view import ClusterSnapshot
from netd.cluster.peers import GroupPeers
from netd.cluster.stats import FabricStats, FabricSummary, summarize
from netd.config.service import ClusterConfig
from netd.congestion.score import SIGNALS, Components
from netd.congestion.scorer import CongestionScorer, ScoreInput
from netd.errors import NetdError
from netd.model.topology import PortPlacement, SourceNote, Switch, Topology
from netd.sources.prometheus import PrometheusClient, Sample, promql_string
from netd.topology.build import natural_key

__all__ = ["FabricView"]

log = logging.getLogger(__name__)
Key = tuple[str, str, str, str]  # job, instance, device, port


def _fresh(info: list[Sample], now: float, stale_after_s: float) -> tuple[list[Sample], set[str]]:
    """The ports of hosts scraped within ``stale_after_s``, and the hosts left out. Prometheus keeps
    answering a series for 5 minutes after its last scrape, so a host whose netd died would keep its
    last (calm) scores and outrank live hosts; it is left out, and becomes an unknown node."""
    fresh: list[Sample] = []
    silent: set[str] = set()
    for labels, scraped_at in info:
        if now - scraped_at <= stale_after_s:
            fresh.append((labels, scraped_at))
        else:
            silent.add(labels.get("host") or labels.get("instance", ""))
    live = {labels.get("host") or labels.get("instance", "") for labels, _ in fresh}
    return fresh, silent - live


_JOIN = "and on (job, instance, device, port)"


_KEY_LABELS = ("job", "instance", "device", "port")
# C: a few times faster than four .get() at 160,000 samples
_key_present: Callable[[Mapping[str, str]], Key] = operator.itemgetter(*_KEY_LABELS)


def _key(labels: Mapping[str, str]) -> Key:
    try:
        return _key_present(labels)
    except KeyError:  # a label Prometheus dropped (empty): ""
        return cast(Key, tuple(labels.get(name, "") for name in _KEY_LABELS))


def _topology(info: list[Sample], now: float) -> tuple[Topology, list[PortPlacement]]:
    """The topology, and each port's placement in the order of ``info``."""
    ports: list[PortPlacement] = []
    tors: dict[str, set[str]] = {}
    placed: set[tuple[str | None, str | None]] = set()  # (tor, spine) labels: a few per ToR
    warnings: list[str] = []
    for labels, _ in info:
        tor, spine = labels.get("tor") or None, labels.get("spine") or None
        rail = labels.get("rail", "")
        p = PortPlacement(
            host=labels.get("host") or labels.get("instance", ""),
            device=labels.get("device", ""),
            port=int(labels.get("port", "0") or 0),
            netdev=labels.get("netdev") or None,
            state=labels.get("state") or None,
            link_layer=labels.get("link_layer") or None,
            rail=int(rail) if rail.isdigit() else None,
            tor=tor,
            tor_port=None,
            spine=spine,
            placed_by="prometheus" if tor else "none",
        )
        ports.append(p)
        placed.add((tor, spine))
        if tor is None:
            warnings.append(f"{p.host} {p.device}/{p.port}: no ToR label (its netd has no topology)")
    for tor, spine in placed:
        for t in (tor or "").split("+"):
            if t:
                tors.setdefault(t, set()).update(s for s in (spine or "").split("+") if s)
    placements = list(ports)
    device_key = {d: natural_key(d) for d in {p.device for p in ports}}  # a few devices, 40,000 ports
    ports.sort(key=lambda p: (p.host, device_key[p.device], p.port))
    spines = {s for ss in tors.values() for s in ss}
    return Topology(
        generated_at=now,
        hosts=tuple(sorted({p.host for p in ports})),
        ports=tuple(ports),
        tors={t: Switch(t, "tor", spines=tuple(sorted(s))) for t, s in sorted(tors.items())},
        spines={s: Switch(s, "spine") for s in sorted(spines)},
        sources=(SourceNote("prometheus", True, "netd_port_info", len(ports)),),
        warnings=tuple(warnings),
    ), placements


class FabricView:
    """A :class:`~netd.api.service_view.ServiceView` over Prometheus."""

    def __init__(
        self,
        cfg: ClusterConfig,
        scorer: CongestionScorer,
        client: PrometheusClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self.scorer = scorer
        self.client = client or PrometheusClient(cfg.prometheus_url, cfg.query_timeout)
        self._clock = clock
        self._snapshot: ClusterSnapshot | None = None
        self._heap = SettledHeap()
        self._group_peers = GroupPeers(cfg, self.client)
        self.stats = FabricStats()
        self.generation = object()  # replaced after every refresh attempt, good or not

    def current(self) -> ClusterSnapshot | None:
        return self._snapshot

    def summary(self) -> FabricSummary | None:
        return summarize(self._snapshot)

    def view_age_s(self) -> float | None:
        """Seconds since the last good refresh (the age of the view served), None before one."""
        last = self.stats.last_ok
        return None if last is None else time.monotonic() - last

    def _pages(self, at: float) -> list[str]:
        """One label matcher per page of ToRs ("" when not paging)."""
        n = self.cfg.tors_per_query
        if n <= 0:
            return [""]
        tors = sorted(
            {
                labels.get("tor", "")
                for labels, _ in self.client.query("count by (tor) (netd_port_info)", at=at)
            }
        )
        pages = [tors[i : i + n] for i in range(0, len(tors), n)] or [[]]
        return [f"tor=~{promql_string('|'.join(re.escape(t) for t in page))}" for page in pages]

    def _query_all(self, at: float) -> tuple[list[Sample], list[Sample], list[Sample]]:
        """Every query of one refresh evaluated at the same instant ``at``: pages asked one after
        another must not mix scrapes, or a port's ToR would be judged on newer data than its peers."""
        info: list[Sample] = []
        signals: list[Sample] = []
        stormed: list[Sample] = []
        pages = self._pages(at)
        for matcher in pages:
            ports = f"netd_port_info{{{matcher}}}"
            join = f" {_JOIN} {ports}" if matcher else ""
            # labels kept, value: the last scrape
            info += self.client.query(f"timestamp({ports})", at=at)
            signals += self.client.query(
                f"avg_over_time(netd_port_congestion_signal[{self.cfg.window}]){join}", at=at
            )
            stormed += self.client.query(f"netd_port_pfc_stormed{join}", at=at)
        self.stats.queries = 3 * len(pages) + (self.cfg.tors_per_query > 0)
        return info, signals, stormed

    def refresh(self) -> ClusterSnapshot | None:
        try:
            with self._heap.refresh() as settle:  # a 5000-node view is not walked by every collection
                snap = self._refresh()
                settle.ports = len(snap.congestion.ports) if snap and snap.congestion else 0
                return snap
        finally:
            self.generation = object()

    def _refresh(self) -> ClusterSnapshot | None:
        t0 = time.monotonic()
        self.stats.refreshes += 1
        now = self._clock()
        try:
            info, signals, stormed = self._query_all(now)
        except NetdError as exc:
            self.stats.errors += 1
            self.stats.last_error = str(exc)
            self.stats.prometheus = self.client.last_failure or "error"
            log.warning("fabric refresh failed (Prometheus %s): %s", self.stats.prometheus, exc)
            old = self._snapshot
            if old is not None:
                age = self.view_age_s() or 0.0
                note: str | None = (
                    f"Prometheus {self.stats.prometheus} ({exc}); serving the last good view, "
                    f"{age:.0f} s old (from {time.ctime(old.timestamp)})"
                )
                self._snapshot = old.with_note(note)
            return self._snapshot
        info, silent = _fresh(info, now, self.cfg.host_stale_after)
        self.stats.silent_hosts = len(silent)
        if silent:
            log.info(
                "fabric: %d hosts silent for over %g s left out: %s",
                len(silent),
                self.cfg.host_stale_after,
                sorted(silent)[:10],
            )
        by_port: dict[Key, dict[str, float]] = {}
        for labels, value in signals:
            signal = labels.get("signal")
            if signal in SIGNALS:
                by_port.setdefault(_key(labels), {})[signal] = value
        storms = {_key(labels) for labels, value in stormed if value >= 1}
        topology, placements = _topology(info, now)
        inputs = []
        for (labels, _), p in zip(info, placements, strict=True):  # a placement has the labels read
            key = _key(labels)
            sig = by_port.get(key, {})
            inputs.append(
                ScoreInput(
                    p.host,
                    p.device,
                    p.port,
                    Components(*map(sig.get, SIGNALS)),  # SIGNALS are Components' first fields, in order
                    p.state is None or p.state == "ACTIVE",  # a missing or empty state label: up
                    p.netdev,
                    p.tor,
                    p.spine,
                    p.rail,
                    key in storms,
                )
            )
        cpu = time.thread_time()
        report = self.scorer.update(inputs, now)
        self.stats.last_score_cpu_s = time.thread_time() - cpu
        emulated = any(labels.get("emulated") == "true" for labels, _ in info)
        note = None if info else f"Prometheus at {self.cfg.prometheus_url} has no netd_port_info series yet"
        if silent:
            note = (
                f"{len(silent)} hosts left out: their netd was last scraped over "
                f"{self.cfg.host_stale_after:g} s ago (scheduler.unknown_nodes applies to them)"
            )
        self._snapshot = ClusterSnapshot("fabric", now, emulated, topology, report, note)
        self.stats.last_ok = time.monotonic()
        self.stats.last_duration_s = self.stats.last_ok - t0
        self.stats.last_error = None
        self.stats.prometheus = "ok"
        return self._snapshot

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        return self._group_peers(label, group)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.cfg.refresh_interval):
            try:
                self.refresh()
            except Exception:  # the service outlives one bad refresh
                log.exception("fabric refresh raised")

    def close(self) -> None:
        self.client.close()
