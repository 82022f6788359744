"""The synthetic cluster view of `netd bench api`: ``nodes`` nodes x ``rails`` ports re-scored by the
real scorer, shared by the bench's own listener and its 5000-node fabric listener process
(:mod:`netd.bench.fabric_listener`)."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping

from netd.api.heap import SettledHeap
from netd.api.service_view import ClusterSnapshot
from netd.congestion.score import Components
from netd.congestion.scorer import CongestionScorer, ScoreInput

__all__ = ["SyntheticCluster"]


class SyntheticCluster:
    """A cluster view of ``nodes`` nodes x ``rails`` ports (ToRs of 8 nodes, two spines), re-scored by
    the real scorer at every :meth:`refresh` with fresh random signals (10% of ports hot), the way
    ``netd fabric`` re-scores at every Prometheus refresh. Two views built with the same ``seed``
    hold the same signals refresh for refresh."""

    def __init__(self, nodes: int, rails: int = 8, seed: int = 1) -> None:
        self.nodes, self.rails = nodes, rails
        self._rng = random.Random(seed)
        self._scorer = CongestionScorer()
        self.snap: ClusterSnapshot | None = None
        # each refresh's CongestionScorer.update in CPU ms of its thread (the first: every port new); CPU,
        # not wall time: beside a serving listener the wall time also counts the other threads' turns
        self.update_ms: list[float] = []
        self._heap = SettledHeap()
        self.refresh()

    def refresh(self) -> None:
        with self._heap.refresh() as settle:  # as netd fabric's view refresh (netd.api.heap)
            self._refresh()
            settle.ports = self.nodes * self.rails

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
        self.snap = ClusterSnapshot("fabric", now, True, None, report, "synthetic cluster for netd bench api")

    def current(self) -> ClusterSnapshot | None:
        return self.snap

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        return None
