"""The scheduler's per-report index: the unknown-node policies, the stale view, and a big report's
table rolled out to the extender's workers by a thread while they keep answering from the previous one."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from netd.api.app import create_app
from netd.api.extender_pool import ExtenderPool, Tables
from netd.bench.api import SyntheticCluster
from netd.config.service import SchedulerConfig
from netd.congestion.scheduling import UNKNOWN_REASON, NodeIndex, UnknownPolicy
from tests.api.conftest import serving


@pytest.fixture(scope="module")
def small():
    return SyntheticCluster(4, rails=2).current().congestion  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("mode", "passes", "score"), [("lowest", True, 0), ("neutral", True, 7), ("reject", False, None)]
)
def test_unknown_node_policies(small, mode, passes, score):
    index = NodeIndex(small, UnknownPolicy(mode, neutral_score=7))
    passed, failed, unknown = index.filter(["node-000", "ghost"])
    assert unknown == 1 and ("ghost" in passed) is passes
    if not passes:
        assert failed == {"ghost": UNKNOWN_REASON}
    else:
        scores, unknown = index.prioritize(["node-000", "ghost"])
        assert unknown == 1 and dict(scores)["ghost"] == score
    # the same with peers: the per-node path, not the lookup
    _, unknown = index.prioritize(["node-000", "ghost"], peers={"node-001": 1})
    assert unknown == 1


class _Aged:
    def __init__(self, view: SyntheticCluster, age_s: float) -> None:
        self.view, self.age_s = view, age_s

    def current(self):
        snap = self.view.current()
        assert snap is not None
        return type(snap)(snap.view, time.time() - self.age_s, snap.emulated, None, snap.congestion, None)

    def peers(self, label, group):
        return None


@pytest.mark.slow
def test_a_view_older_than_stale_after_vouches_for_no_node(free_port):
    view = SyntheticCluster(4, rails=2)
    cfg = SchedulerConfig(stale_after=60.0, unknown_nodes="reject")
    args = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["node-000", "node-001"]}
    for age, passed in ((0.0, 2), (120.0, 0)):
        app = create_app(lambda: None, lambda: None, 1.0, view=_Aged(view, age), scheduler=cfg)
        with serving(app, free_port) as base:
            r = httpx.post(base + "/scheduler/filter", json=args)
        assert len(r.json()["NodeNames"]) == passed
        assert r.headers["x-netd-unknown-nodes"] == str(2 - passed)


@pytest.mark.slow
def test_a_big_report_is_rolled_out_to_the_workers_by_a_thread():
    view = SyntheticCluster(300, rails=8)  # 2400 ports: over the inline limit
    first = view.current().congestion  # type: ignore[union-attr]
    assert first is not None and len(first.ports) > Tables.INLINE_PORTS
    names = [f"node-{n:03d}" for n in range(300)]
    body = json.dumps({"Pod": {"metadata": {"name": "p"}}, "NodeNames": names}).encode()
    pool = ExtenderPool()
    try:
        tables = Tables(pool, UnknownPolicy())

        def scores(min_gen: int) -> list[int]:
            _, said, payload = pool.call(tables, b"P", [tables.key, min_gen, "g", 0.3], body, lambda g: None)
            return [h["Score"] for h in json.loads(bytes(payload))]

        assert tables.wanted(first) == 1  # nothing older: the request needs this one
        assert scores(1) == [s for _, s in NodeIndex(first).prioritize(names)[0]]
        view.refresh()
        second = view.current().congestion  # type: ignore[union-attr]
        assert tables.wanted(second) == 1  # answered from the previous table while the new one rolls out
        deadline = time.monotonic() + 60
        while tables.wanted(second) != 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        expected = [s for _, s in NodeIndex(second).prioritize(names)[0]]
        assert expected != [s for _, s in NodeIndex(first).prioritize(names)[0]]  # the refresh moved some
        assert scores(2) == expected
        assert pool.held(tables.key) == [2] * pool.size  # every worker took it (and acknowledged)
    finally:
        pool.close()
