"""The synthetic cluster view of `netd bench api`: ``nodes`` nodes x ``rails`` ports re-scored by the
real scorer, shared by the bench's own listener and its 5000-node fabric listener process
(:mod:`netd.bench.fabric_listener`), whose view is refreshed in a process of its own as `netd fabric`'s
is: ``python -m netd.bench.synthetic FD`` (netd.cluster.remote; setup ``{"nodes", "rails", "seed",
"refresh"}``)."""

from __future__ import annotations

import random
import signal
import socket
import sys
import time
from collections.abc import Mapping

from netd.api.heap import SettledHeap
from netd.api.service_view import ClusterSnapshot
from netd.cluster.remote import publish, read_setup
from netd.cluster.stats import FabricStats, FabricSummary, summarize
from netd.congestion.score import Components
from netd.congestion.scorer import CongestionScorer, ScoreInput
from netd.model.topology import PortPlacement, SourceNote, Switch, Topology

__all__ = ["SyntheticCluster", "main"]

SPINES = ("spine-a", "spine-b")


def _topology(nodes: int, rails: int) -> Topology:
    """Every node's ports under its ToR (8 nodes per ToR), each ToR under both spines."""
    spine = "+".join(SPINES)
    ports = tuple(
        PortPlacement(
            f"node-{n:03d}",
            f"mlx5_{r}",
            1,
            f"ens{r}np0",
            "ACTIVE",
            "Ethernet",
            r,
            f"leaf-{n // 8}",
            None,
            spine,
        )
        for n in range(nodes)
        for r in range(rails)
    )
    tors = sorted({p.tor for p in ports if p.tor})
    return Topology(
        generated_at=time.time(),
        hosts=tuple(sorted({p.host for p in ports})),
        ports=ports,
        tors={t: Switch(t, "tor", spines=SPINES) for t in tors},
        spines={s: Switch(s, "spine") for s in SPINES},
        sources=(SourceNote("synthetic", True, "netd bench api", len(ports)),),
    )


class SyntheticCluster:
    """A cluster view of ``nodes`` nodes x ``rails`` ports (ToRs of 8 nodes, two spines), re-scored by
    the real scorer at every :meth:`refresh` with fresh random signals (10% of ports hot), the way
    ``netd fabric`` re-scores at every Prometheus refresh. Two views built with the same ``seed``
    hold the same signals refresh for refresh."""

    def __init__(self, nodes: int, rails: int = 8, seed: int = 1) -> None:
        self.nodes, self.rails = nodes, rails
        self._rng = random.Random(seed)
        self._scorer = CongestionScorer()
        self.topology = _topology(nodes, rails)
        self.snap: ClusterSnapshot | None = None
        self.stats = FabricStats()
        # each refresh's CongestionScorer.update in CPU ms of its thread (the first: every port new); CPU,
        # not wall time: beside a serving listener the wall time also counts the other threads' turns
        self.update_ms: list[float] = []
        self._heap = SettledHeap()
        self.refresh()

    def refresh(self) -> ClusterSnapshot | None:
        t0 = time.monotonic()
        with self._heap.refresh() as settle:  # as netd fabric's view refresh (netd.api.heap)
            self._refresh()
            settle.ports = self.nodes * self.rails
        self.stats.refreshes += 1
        self.stats.last_ok = time.monotonic()
        self.stats.last_duration_s = self.stats.last_ok - t0
        self.stats.last_score_cpu_s = self.update_ms[-1] / 1000.0
        return self.snap

    def inputs(self) -> list[ScoreInput]:
        """The next refresh's scorer inputs (fresh random signals)."""
        rng, inputs = self._rng, []
        for n in range(self.nodes):
            for r in range(self.rails):
                hot = rng.random() < 0.1
                comps = Components(
                    ce_fraction=rng.uniform(0.01, 0.06) if hot else rng.uniform(0, 0.002),
                    cnp_per_packet=rng.uniform(0, 0.003),
                    pause_fraction=rng.uniform(0, 0.05),
                    loss_per_packet=0.0,
                )
                inputs.append(
                    ScoreInput(
                        f"node-{n:03d}",
                        f"mlx5_{r}",
                        1,
                        comps,
                        netdev=f"ens{r}np0",
                        tor=f"leaf-{n // 8}",
                        spine="spine-a+spine-b",
                        rail=r,
                    )
                )
        return inputs

    def _refresh(self) -> None:
        inputs = self.inputs()
        now = time.time()
        t0 = time.thread_time()
        report = self._scorer.update(inputs, now)
        self.update_ms.append(round((time.thread_time() - t0) * 1000.0, 3))
        note = "synthetic cluster for netd bench api"
        self.snap = ClusterSnapshot("fabric", now, True, self.topology, report, note)

    def current(self) -> ClusterSnapshot | None:
        return self.snap

    def summary(self) -> FabricSummary | None:
        return summarize(self.snap)

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        return None


def main(fd: int) -> int:
    """The view process of the bench's fabric listener (netd.cluster.remote's child protocol)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the listener decides when this process stops
    sock = socket.socket(fileno=fd)
    try:
        given = read_setup(sock)
    except (EOFError, OSError):
        return 0
    view = SyntheticCluster(given["nodes"], given.get("rails", 8), given.get("seed", 1))
    publish(view, sock, given["refresh"] or None)  # 0: never re-scored
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
