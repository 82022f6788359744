"""The extender's worker processes: the score table reproduces the listener's NodeIndex, a killed
worker is replaced without failing a request, and workers never outlive the process that started
them (closed or killed)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from netd.api.app import create_app
from netd.api.child import BACKGROUND_NICE
from netd.api.extender_pool import ExtenderPool, Tables, shared_pool
from netd.api.extender_worker import node_index, score_table
from netd.api.problems import install_problem_handlers
from netd.api.routes_scheduler import scheduler_router
from netd.congestion.scheduling import NodeIndex, UnknownPolicy
from netd.errors import NetdError
from netd.sources.procfs import proc_stat
from tests.api.conftest import serving
from tests.api.test_extender import NAMES, cluster, pod


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        st = proc_stat(pid)
        if st is None or st.state == "Z":  # a zombie is gone too (its parent reaps it)
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _ignores(pid: int, *sigs: signal.Signals, within_s: float = 20.0) -> bool:
    wanted = sum(1 << (sig - 1) for sig in sigs)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
        if ignored & wanted == wanted:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("mode", ["lowest", "neutral", "reject"])
def test_the_score_table_rebuilds_the_same_index(mode):
    report = cluster().report  # down port, PFC storm, hot ToR, calm ToR
    policy = UnknownPolicy(mode, neutral_score=6)
    here, there = NodeIndex(report, policy), node_index(*score_table(report, policy))
    assert there.filter(NAMES) == here.filter(NAMES)
    assert there.filter(NAMES)[1]  # something failed, with the listener's reasons
    assert there.prioritize(NAMES) == here.prioritize(NAMES)
    peers = {"gpu-03": 2}
    assert there.prioritize(NAMES, peers, 0.3) == here.prioritize(NAMES, peers, 0.3)
    nothing = node_index(*score_table(None, policy))
    assert nothing.filter(NAMES) == NodeIndex(None, policy).filter(NAMES)


@pytest.mark.slow
def test_killed_workers_are_replaced_and_every_request_answered(free_port):
    view = cluster()
    expected = NodeIndex(view.report).prioritize(NAMES)[0]
    args = {"Pod": pod(), "Nodes": None, "NodeNames": NAMES}
    with serving(create_app(lambda: None, lambda: None, 1.0, view=view), free_port) as base:
        assert httpx.post(base + "/scheduler/prioritize", json=args).status_code == 200
        before = shared_pool().pids()
        for pid in before:
            os.kill(pid, signal.SIGKILL)
        for _ in range(4):
            r = httpx.post(base + "/scheduler/prioritize", json=args, timeout=30)
            assert r.status_code == 200
            assert [(h["Host"], h["Score"]) for h in r.json()] == expected
        after = shared_pool().pids()
        assert not set(before) & set(after)
        assert all(_gone(pid) for pid in before)


@pytest.mark.slow
def test_workers_outlive_a_ctrl_c_or_a_reload_sent_to_the_group():
    # A terminal's Ctrl-C and a SIGHUP for the daemon's reload (systemctl kill -s HUP, pkill -HUP) reach
    # every process of the group: the listener decides when its workers stop.
    pool = ExtenderPool()
    pool.start()
    try:
        pids = pool.pids()
        # a worker ignores them once it serves (the kernel's own record: SigIgn in /proc/<pid>/status)
        assert all(_ignores(pid, signal.SIGINT, signal.SIGHUP) for pid in pids)
        for sig in (signal.SIGINT, signal.SIGHUP):
            for pid in pids:
                os.kill(pid, sig)
        assert not any(_gone(pid, 1.0) for pid in pids)
        assert pool.pids() == pids
    finally:
        pool.close()


@pytest.mark.slow
def test_closing_the_pool_stops_its_workers():
    pool = ExtenderPool()
    pool.start()
    pids = pool.pids()
    assert len(pids) == pool.size and all(not _gone(pid, 0.0) for pid in pids)
    pool.close()
    assert all(_gone(pid) for pid in pids)


@pytest.mark.slow
def test_a_table_rolled_out_after_close_starts_no_worker_and_logs_nothing(caplog, monkeypatch):
    """At shutdown a big report's table may still be on its way to the workers when the pool closes:
    the roll-out gives up quietly (it logged "Bad file descriptor") and never starts new workers."""
    pool = ExtenderPool()
    pool.start()
    tables = Tables(pool, UnknownPolicy("lowest", neutral_score=5))
    tables.wanted(None)  # a first view, so the big report below is rolled out by a thread
    pool.close()
    monkeypatch.setattr(Tables, "INLINE_PORTS", 0)  # every report is big: rolled out by a thread
    big = cluster().report
    with caplog.at_level(logging.WARNING, logger="netd.api.extender_pool"):
        tables.wanted(big)
        for t in [t for t in threading.enumerate() if t.name == "netd-extender-table"]:
            t.join(10)
    assert pool.pids() == [] and caplog.records == []
    with pytest.raises(NetdError, match="stopped"):
        pool.start()


@pytest.mark.slow
def test_workers_leave_when_their_listener_process_is_killed():
    script = textwrap.dedent(
        """
        import sys, time
        from netd.api.extender_pool import ExtenderPool
        pool = ExtenderPool()
        pool.start()
        print(*pool.pids(), flush=True)
        time.sleep(60)
        """
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            pids = [int(p) for p in proc.stdout.readline().split()]
            assert len(pids) == 2
            proc.kill()  # no atexit, no close: the workers see their socket close
            proc.wait()
            assert all(_gone(pid) for pid in pids)
        finally:
            proc.kill()


def _app_with(pool: ExtenderPool) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(scheduler_router(cluster(), pool=pool))
    return app


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ("/nonexistent/netd-extender-worker",),  # cannot be started at all
        (sys.executable, "-c", "import sys; sys.exit(3)"),  # starts, and exits before answering
    ],
)
def test_workers_that_cannot_answer_give_503_problems_not_hangs(free_port, command):
    pool = ExtenderPool(command=command)
    args = {"Pod": pod(), "Nodes": None, "NodeNames": NAMES}
    try:
        with serving(_app_with(pool), free_port) as base:
            for _ in range(3):  # again and again: each request tries afresh, none waits forever
                r = httpx.post(base + "/scheduler/prioritize", json=args, timeout=30)
                assert r.status_code == 503
                assert r.headers["content-type"] == "application/problem+json"
                assert r.headers["retry-after"] == "1"
    finally:
        pool.close()


@pytest.mark.slow
def test_a_rolled_out_table_is_built_at_a_lower_priority_and_its_heap_settled():
    """A ``B`` frame (a roll-out) is built on a thread at nice BACKGROUND_NICE while the worker's main
    thread waits, and a big table's objects are frozen afterwards: its full collections (55-65 ms at
    40,000 ports) were paid by the first requests after each roll-out."""
    code = textwrap.dedent(
        """
        import gc, os, socket
        import msgspec
        from netd.api.extender_worker import _Worker, score_table
        from netd.api.heap import BIG_VIEW_PORTS
        from netd.bench.synthetic import SyntheticCluster
        from netd.congestion.scheduling import UnknownPolicy

        report = SyntheticCluster(BIG_VIEW_PORTS // 8 + 1).current().congestion
        ours, theirs = socket.socketpair()
        worker = _Worker(theirs)
        before = gc.get_freeze_count()
        policy, scores = score_table(report, UnknownPolicy("lowest", 5))
        meta = msgspec.msgpack.encode({"key": 1, "gen": 1, "policy": policy})
        worker.take_table(bytearray(meta), bytearray(scores), background=True)
        assert ours.recv(64)[:1] == b"K"
        nice = [os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")]
        print(before, gc.get_freeze_count(), os.getpriority(os.PRIO_PROCESS, 0), max(nice))
        print(len(worker.tables))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after, main_nice, builder_nice, tables = map(int, out.stdout.split())
    assert main_nice == 0 and builder_nice == BACKGROUND_NICE and tables == 1
    assert after > before  # the index (and everything alive then) is out of the collector's walks
