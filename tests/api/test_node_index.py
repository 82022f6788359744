"""The scheduler's per-report index: the unknown-node policies, the stale view, and a big report's
index swapped in by a thread while requests keep being answered from the previous one."""

from __future__ import annotations

import time

import httpx
import pytest

from netd.api.app import create_app
from netd.api.routes_scheduler import _IndexCache
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
def test_a_big_report_is_swapped_in_by_a_thread():
    view = SyntheticCluster(300, rails=8)  # 2400 ports: over the inline limit
    first = view.current().congestion  # type: ignore[union-attr]
    assert first is not None and len(first.ports) > _IndexCache.INLINE_PORTS
    cache = _IndexCache(UnknownPolicy())
    a = cache.get(first)
    assert a.report is first  # nothing older: built by the request
    view.refresh()
    second = view.current().congestion  # type: ignore[union-attr]
    assert cache.get(second) is a  # answered from the previous index while the new one is built
    deadline = time.monotonic() + 60
    while cache.get(second).report is not second:
        assert time.monotonic() < deadline
        time.sleep(0.01)
