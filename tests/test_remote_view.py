"""netd fabric's view in a process of its own (netd.cluster.remote), with real child processes: what the
listener serves is what the same view builds in-process; a killed, hung or misbehaving view process is
replaced while the last view is served; the configuration never reaches a command line; and the view
process leaves with the listener."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from netd.api.app import create_app
from netd.bench.synthetic import SyntheticCluster
from netd.cluster.cli import REFRESHER
from netd.cluster.refresher import setup as refresher_setup
from netd.cluster.remote import RemoteFabricView
from netd.cluster.stats import summarize
from netd.config.service import ClusterConfig, CongestionConfig
from tests.api.conftest import serving
from tests.api.test_extender_pool import _gone

pytestmark = pytest.mark.slow  # starts view processes

SYNTHETIC = (sys.executable, "-m", "netd.bench.synthetic")
NODES, RAILS, SEED = 6, 2, 3


def _synthetic(refresh: float, hung_after_s: float | None = None) -> RemoteFabricView:
    setup = {"nodes": NODES, "rails": RAILS, "seed": SEED, "refresh": refresh}
    return RemoteFabricView(ClusterConfig(refresh_interval=1.0), SYNTHETIC, setup, hung_after_s=hung_after_s)


def _until(check: Callable[[], bool], within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.05)


@pytest.fixture
def started() -> Iterator[Callable[..., RemoteFabricView]]:
    views: list[RemoteFabricView] = []

    def start(view: RemoteFabricView) -> RemoteFabricView:
        views.append(view)
        view.start(wait_s=60)
        return view

    yield start
    for view in views:
        pid = view.pid()
        view.close()
        assert pid is None or _gone(pid), "the view process outlived close()"


def _comparable(items: list[dict]) -> list[dict]:
    return [{k: v for k, v in item.items() if k != "since"} for item in items]  # `since`: each view's clock


def test_the_listener_serves_what_the_same_view_builds_in_process(started, free_port):
    remote = started(_synthetic(refresh=0))  # one refresh, never again
    local = SyntheticCluster(NODES, RAILS, SEED)
    local.refresh()  # the view process's first message is its second refresh
    assert remote.summary() is not None
    assert remote.summary().hosts == NODES and remote.summary().tors == summarize(local.current()).tors  # type: ignore[union-attr]
    names = [f"node-{n:03d}" for n in range(NODES)] + ["elsewhere"]
    answers = []
    for view in (remote, local):
        with serving(create_app(lambda: None, lambda: None, 1.0, view=view), free_port) as base:
            ports = httpx.get(f"{base}/v1/congestion", params={"scope": "port", "limit": 1000}).json()
            tors = httpx.get(f"{base}/v1/congestion", params={"scope": "tor", "host": "node-001"}).json()
            topology = httpx.get(f"{base}/v1/topology", params={"rail": 1}).json()
            prioritized = httpx.post(
                f"{base}/scheduler/prioritize", json={"Pod": {"metadata": {}}, "NodeNames": names}
            )
            answers.append(
                (
                    _comparable(ports["items"]),
                    _comparable(tors["items"]),
                    topology["ports"],
                    prioritized.json(),
                    prioritized.headers["X-Netd-Unknown-Nodes"],
                )
            )
    assert answers[0] == answers[1]
    assert len(answers[0][0]) == NODES * RAILS and answers[0][4] == "1"


def test_a_killed_view_process_is_replaced_and_the_last_view_served_meanwhile(started):
    view = started(_synthetic(refresh=1.0))
    first, pid = view.current(), view.pid()
    assert first is not None and pid is not None
    refreshes = view.stats.refreshes
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    assert view.current() is first  # nothing newer can come from a dead process; the last view stays
    _until(lambda: view.stats.restarts == 1 and view.pid() not in (None, pid))
    _until(lambda: view.current() is not first)
    assert view.stats.refreshes > refreshes  # counted on across processes: a counter never goes back


def test_a_hung_view_process_is_killed_and_replaced(started):
    view = started(_synthetic(refresh=1.0, hung_after_s=2.0))
    pid = view.pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # alive, silent
    _until(lambda: view.stats.restarts == 1)
    assert _gone(pid)
    _until(lambda: view.view_age_s() is not None and view.view_age_s() < 1.5)  # type: ignore[operator]


BABBLER = """
import os, socket, sys, time
from netd.api.extender_worker import send_frame
from netd.cluster.remote import read_setup
sock = socket.socket(fileno=int(sys.argv[1]))
read_setup(sock)
meta = {{"stats": {{}}, "summary": None, "snapshot": None}}
{send}
time.sleep(60)
"""
NONSENSE = {
    "stats of the wrong type": 'send_frame(sock, b"V", {**meta, "stats": {"refreshes": "many"}})',
    "an empty memfd": 'send_frame(sock, b"V", meta, b"", os.memfd_create("x"))',
}


@pytest.mark.parametrize("send", NONSENSE.values(), ids=NONSENSE.keys())
def test_a_view_process_that_sends_nonsense_is_killed_and_replaced(started, caplog, send):
    view = started(RemoteFabricView(ClusterConfig(), (sys.executable, "-c", BABBLER.format(send=send))))
    pid = view.pid()
    _until(lambda: view.stats.restarts >= 1)
    assert pid is not None and _gone(pid)
    assert view.current() is None and "cannot take" in caplog.text


NO_MEMFD_TWICE = """
import errno, os, sys
real, failed = os.memfd_create, []
def memfd_create(*args, **kwargs):
    if len(failed) < 2:  # the first two snapshots find no memory for them
        failed.append(1)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real(*args, **kwargs)
os.memfd_create = memfd_create
from netd.bench.synthetic import main
sys.exit(main(int(sys.argv[1])))
"""


def test_a_snapshot_that_finds_no_memory_is_handed_over_after_the_next_refresh(started, caplog):
    setup = {"nodes": NODES, "rails": RAILS, "seed": SEED, "refresh": 1.0}
    command = (sys.executable, "-c", NO_MEMFD_TWICE)
    view = started(RemoteFabricView(ClusterConfig(refresh_interval=1.0), command, setup))
    assert view.current() is None and view.stats.refreshes >= 1  # its stats came; no snapshot could
    _until(lambda: view.current() is not None)
    assert view.stats.refreshes >= 3 and view.stats.restarts == 0  # the process went on refreshing
    assert view.current().congestion is not None and len(view.current().congestion.ports) == NODES * RAILS  # type: ignore[union-attr]


def test_the_configuration_reaches_the_view_process_over_its_socket_not_its_command_line(started):
    nothing_listens = "http://netd:s3cret@127.0.0.1:9"  # credentials in the URL, as some operators have
    cfg = ClusterConfig(prometheus_url=nothing_listens, query_timeout=0.5)
    view = started(RemoteFabricView(cfg, REFRESHER, refresher_setup(cfg, CongestionConfig())))
    pid = view.pid()
    assert pid is not None
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read()
    assert b"s3cret" not in cmdline and b"127.0.0.1:9" not in cmdline
    _until(lambda: view.stats.refreshes >= 1)  # the real FabricView, asking a Prometheus that is not there
    assert view.stats.prometheus == "unreachable" and view.stats.errors >= 1 and view.current() is None


def test_the_view_process_leaves_when_the_listener_dies():
    script = textwrap.dedent(
        f"""
        import sys
        from netd.cluster.remote import RemoteFabricView
        from netd.config.service import ClusterConfig
        view = RemoteFabricView(ClusterConfig(refresh_interval=1.0), {SYNTHETIC!r},
                                {{"nodes": 2, "rails": 1, "seed": 1, "refresh": 1.0}})
        view.start(wait_s=60)
        print(view.pid(), flush=True)
        sys.stdin.read()
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as listener:
        try:
            assert listener.stdout is not None
            child = int(listener.stdout.readline())
        finally:
            listener.kill()  # no close(), no atexit: only the socket's end tells the view process
    assert _gone(child, within_s=15)


def test_the_view_process_works_on_a_descriptor_over_1023(started):
    """A restarted view process gets the listener's next free descriptor number, which on a busy
    `netd fabric` (a thousand client connections) is past what select() can watch."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard descriptor limit ({hard}) is too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert max(held) > 1023
        view = started(_synthetic(refresh=1.0))
        _until(lambda: view.stats.refreshes >= 3)  # it waited between refreshes twice
        assert view.stats.restarts == 0
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
