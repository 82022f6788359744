"""The tuner's simulation child (netd/tuning/worker.py): same results as in-process, the compiled
simulator never loaded in the daemon, and every way the child can fail ends as a TuningError."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cc.model.params import DcqcnParams
from netd.errors import TuningError
from netd.tuning.worker import SimulationWorker

pytestmark = pytest.mark.slow  # each child imports numpy and loads the compiled kernels (~1 s of CPU)

CANDIDATES = [DcqcnParams(), DcqcnParams(rp_time_reset=150)]

_IN_A_FRESH_DAEMON = """
import json, sys
from cc.model.params import DcqcnParams
from cc.tune.twins import evaluate_replicated
from netd.tuning.worker import SimulationWorker
cands = [DcqcnParams(), DcqcnParams(rp_time_reset=150)]
w = SimulationWorker()
remote = w(200.0, 0.2, cands, [1, 2])
loaded = "numba" in sys.modules
w.close()
local = evaluate_replicated(200.0, 0.2, cands, [1, 2])
print(json.dumps({"equal": remote == local, "numba_after_worker": loaded, "twins": sorted(remote)}))
"""


def _wait_for_pid(worker: SimulationWorker, limit: float = 30.0) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        pid = worker.pid
        if pid is not None:
            return pid
        time.sleep(0.001)
    raise AssertionError("the child never started")


def test_child_gives_the_in_process_result_and_the_parent_never_loads_the_compiler():
    out = subprocess.run(
        [sys.executable, "-c", _IN_A_FRESH_DAEMON], capture_output=True, text=True, timeout=300, check=True
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc == {"equal": True, "numba_after_worker": False, "twins": ["collective", "incast"]}


def test_an_idle_child_exits_and_the_next_search_starts_another():
    worker = SimulationWorker(idle_exit=0.2)
    try:
        worker(200.0, 0.2, CANDIDATES[:1], [1])
        deadline = time.monotonic() + 30
        while worker.pid is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.pid is None
        assert worker(200.0, 0.2, CANDIDATES[:1], [1])
        assert worker.started == 2
    finally:
        worker.close()


def test_a_child_killed_mid_search_is_a_tuning_error_and_the_next_search_works():
    worker = SimulationWorker()
    try:
        killer = threading.Thread(target=lambda: os.kill(_wait_for_pid(worker), signal.SIGKILL))
        killer.start()
        with pytest.raises(TuningError, match="died"):
            worker(200.0, 0.2, CANDIDATES, [1, 2])
        killer.join()
        assert worker.pid is None
        assert set(worker(200.0, 0.2, CANDIDATES[:1], [1])) == {"incast", "collective"}
        assert worker.started == 2
    finally:
        worker.close()


def test_a_search_past_its_timeout_kills_the_child():
    worker = SimulationWorker(timeout=0.001)
    try:
        with pytest.raises(TuningError, match="longer than 0.001 s"):
            worker(200.0, 0.2, CANDIDATES, [1, 2])
        assert worker.pid is None
    finally:
        worker.close()


def test_close_during_a_search_ends_it_at_once_and_refuses_more():
    worker = SimulationWorker()
    errors: list[BaseException] = []

    def search() -> None:
        try:
            worker(200.0, 0.2, CANDIDATES, [1, 2, 3])
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=search)
    t.start()
    _wait_for_pid(worker)
    worker.close()
    t.join(timeout=60)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], TuningError)
    with pytest.raises(TuningError, match="closed"):
        worker(200.0, 0.2, CANDIDATES[:1], [1])


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"idle_exit": -1}])
def test_bounds_must_be_positive(kwargs):
    with pytest.raises(ValueError):
        SimulationWorker(**kwargs)
