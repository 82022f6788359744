"""The topology publisher of `netd fabric publish`: keeps node labels, HyperNodes, Kueue's Topology,
the health condition and the optional taint in the cluster, from the cluster view.

Each round (``kube.publish_interval``) computes every object from the latest snapshot and writes
only the ones whose content changed since netd last wrote them, at most ``kube.max_writes_per_s``
writes a second. Labels, HyperNodes, the Topology and the node condition use server-side apply
under ``kube.field_manager``: netd owns exactly its keys, and a label or HyperNode it stops
producing is removed by the API server (labels) or deleted by netd (HyperNodes it created, found by
``app.kubernetes.io/managed-by=netd``). Node taints are an atomic list in the API, so server-side
apply would replace other owners' taints: the taint is added or removed with a JSON patch whose
``test`` on ``resourceVersion`` makes a concurrent writer win, and netd retries next round.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from netd.api.service_view import ClusterSnapshot
from netd.config.kube import KubeConfig
from netd.errors import KubeError
from netd.kube.client import HYPERNODES, KUEUE_TOPOLOGIES, KubeClient, node_path
from netd.kube.health import HealthTracker, HostHealth, condition, taint
from netd.kube.objects import MANAGED_BY, hypernodes, kueue_topology, node_labels, node_name
from netd.kube.tiers import fabric_tiers

__all__ = ["Publisher", "RoundResult", "TokenBucket"]

log = logging.getLogger(__name__)


class TokenBucket:
    """``rate`` writes a second with bursts of ``rate`` (at least one)."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate, self.capacity = rate, max(rate, 1.0)
        self.tokens, self._clock, self._sleep = self.capacity, clock, sleep
        self._at = clock()
        self.waited_s = 0.0

    def take(self) -> None:
        now = self._clock()
        self.tokens = min(self.capacity, self.tokens + (now - self._at) * self.rate)
        self._at = now
        if self.tokens < 1.0:
            wait = (1.0 - self.tokens) / self.rate
            self.waited_s += wait
            self._sleep(wait)
            self.tokens, self._at = 1.0, self._clock()
        self.tokens -= 1.0


@dataclass
class RoundResult:
    writes: int = 0
    unchanged: int = 0
    deleted: int = 0
    errors: list[str] = field(default_factory=list)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Publisher:
    def __init__(
        self,
        client: KubeClient,
        cfg: KubeConfig,
        current: Callable[[], ClusterSnapshot | None],
        bucket: TokenBucket | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client, self.cfg, self.current = client, cfg, current
        self.bucket = bucket or TokenBucket(cfg.max_writes_per_s)
        self.health = HealthTracker(cfg)
        self._clock = clock
        self._written: dict[str, str] = {}  # path -> digest of what netd last wrote there
        self._ours: set[str] | None = None  # HyperNode names netd manages (listed on the first round)

    @staticmethod
    def _step(result: RoundResult, write: Callable[..., None], what: str, *args: Any) -> None:
        """One object's write; a refusal is reported and the round goes on (retried next round)."""
        try:
            write(what, *args, result)
        except KubeError as exc:
            result.errors.append(str(exc))

    def _apply(self, path: str, obj: dict[str, Any], result: RoundResult) -> None:
        digest = _digest(obj)
        if self._written.get(path) == digest:
            result.unchanged += 1
            return
        self.bucket.take()
        self.client.apply(path, obj, self.cfg.field_manager)
        self._written[path] = digest
        result.writes += 1

    def _set_taint(self, name: str, h: HostHealth, result: RoundResult) -> None:
        path = node_path(name)
        key = f"{path}#taint"
        if self._written.get(key) == str(h.degraded):
            result.unchanged += 1
            return
        node = self.client.get(path)
        if node is None:
            return
        current = (node.get("spec") or {}).get("taints") or []
        ours = [t for t in current if t.get("key") == self.cfg.taint_key and t.get("effect") == "NoSchedule"]
        if bool(ours) == h.degraded:
            self._written[key] = str(h.degraded)
            result.unchanged += 1
            return
        keep = [t for t in current if t not in ours]
        wanted = [*keep, taint(self.cfg)] if h.degraded else keep
        self.bucket.take()
        ops = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
            {"op": "add", "path": "/spec/taints", "value": wanted},
        ]
        if self.client.json_patch(path, ops, self.cfg.field_manager):
            self._written[key] = str(h.degraded)
            result.writes += 1
        else:
            result.errors.append(
                f"{name}: taint not changed (the node changed meanwhile); retried next round"
            )

    def publish(self) -> RoundResult:
        """One round; a failed write is reported in the result and retried next round."""
        result = RoundResult()
        snap = self.current()
        if snap is None or snap.topology is None:
            result.errors.append("no cluster view yet")
            return result
        t = fabric_tiers(snap.topology)
        desired_hn = hypernodes(t, self.cfg)
        for patch in node_labels(t, self.cfg):
            self._step(result, self._apply, node_path(patch["metadata"]["name"]), patch)
        topo = kueue_topology(self.cfg)
        self._step(result, self._apply, f"{KUEUE_TOPOLOGIES}/{topo['metadata']['name']}", topo)
        for hn in desired_hn:
            self._step(result, self._apply, f"{HYPERNODES}/{hn['metadata']['name']}", hn)
        ports = snap.congestion.ports if snap.congestion is not None else ()
        for host, h in self.health.update(ports, self._clock()).items():
            name = node_name(host)
            if name is None:
                continue
            status = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"conditions": [condition(h, self.cfg, _rfc3339(h.since))]},
            }
            self._step(result, self._apply, node_path(name, "status"), status)
            if self.cfg.taint:
                self._step(result, self._set_taint, name, h)
        self._prune({hn["metadata"]["name"] for hn in desired_hn}, result)
        return result

    def _prune(self, desired: set[str], result: RoundResult) -> None:
        try:
            if self._ours is None:
                self._ours = set(self.client.list_names(HYPERNODES, MANAGED_BY))
            for name in sorted(self._ours - desired):
                self.bucket.take()
                self.client.delete(f"{HYPERNODES}/{name}")
                self._written.pop(f"{HYPERNODES}/{name}", None)
                result.deleted += 1
            self._ours = set(desired)
        except KubeError as exc:
            result.errors.append(f"stale HyperNodes: {exc}")

    def run(self, stop: threading.Event) -> None:
        while True:
            try:
                r = self.publish()
                for err in r.errors:
                    log.warning("publish: %s", err)
            except Exception:  # the publisher outlives one bad round
                log.exception("publish round raised")
            if stop.wait(self.cfg.publish_interval):
                return
