"""The hard requirement: every rank of a communicator makes the same choice, whatever each host sees.

Two "hosts" — two netd pin sockets whose local congestion differs (host A: 20 % paused, 2000 CNP/s,
2 % CE; host B: clean), so their own tables differ — and a pin service (the real /v1/nccl router on
uvicorn). Each rank is its own process that dlopens the plugin and reports NCCL's pick for every
collective and size. Whatever happens (who asks first, a rank without a daemon, a rank that never
comes, the pin service down or dropping connections), the ranks of one communicator agree, or a
rank fails init loudly.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.nccl.conftest import TOKEN
from tests.nccl.hosts import HostDaemon
from tests.nccl.plugin_harness import (
    NCCL_SUCCESS,
    ROOT,
    Plugin,
    decisions,
    default_decisions,
)

pytestmark = pytest.mark.slow  # runs daemons and a pin service


NODES, RANKS = 4, 4  # one GPU per node: Tree, Ring and PAT are all in play


def _rank(
    socket_path: Path,
    comm: int,
    ranks: int = RANKS,
    nodes: int = NODES,
    env: dict[str, str] | None = None,
    so: Path | None = None,
) -> subprocess.Popen[str]:
    """One rank in its own process; ``env`` adds or overrides NETD_* variables, ``so`` another build."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    environ.update(NETD_TUNER_SOCKET=str(socket_path), NETD_TUNER_TIMEOUT_MS="20000")
    environ.update(env or {})
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.nccl.plugin_harness",
            *(["--so", str(so)] if so else []),
            "--comm",
            f"{comm:x}",
            "--ranks",
            str(ranks),
            "--nodes",
            str(nodes),
        ],
        cwd=ROOT,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _results(procs: list[subprocess.Popen[str]]) -> list[dict]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0, stderr
        result = json.loads(stdout)
        if "decisions" in result:
            result["decisions"] = [
                (c, n, None if pick is None else tuple(pick), ch) for c, n, pick, ch in result["decisions"]
            ]
        out.append(result)
    return out


def _wait_for_pin(url: str, comm: int, members: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pins = httpx.get(f"{url}/v1/nccl/pins").json()["pins"]
        if any(p["comm_id"] == f"{comm:016x}" and p["members"] >= members for p in pins):
            return
        time.sleep(0.05)
    raise AssertionError(f"comm {comm:x} never reached {members} members at the pin service")


def _static_decisions(plugin_so: Path, table: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """What a rank decides with exactly this table (pinned statically): the reference."""
    import hashlib

    path = tmp_path / "reference.ndht"
    path.write_bytes(table)
    with monkeypatch.context() as m:
        m.setenv("NETD_TUNER_TABLE", str(path))
        m.setenv("NETD_TUNER_TABLE_SHA256", hashlib.sha256(table).hexdigest())
        m.setenv("NETD_TUNER_SOCKET", str(tmp_path / "no-netd.sock"))  # the file alone decides
        plugin = Plugin(plugin_so)
        rc, ctx = plugin.init(1, RANKS, NODES)
        assert rc == NCCL_SUCCESS
        got = decisions(plugin, ctx, NODES, RANKS // NODES)
        plugin.finalize(ctx)
    return got


def _daemons(tmp_path: Path, states, url: str, window_s: float = 10.0) -> tuple[HostDaemon, HostDaemon]:
    a = HostDaemon(tmp_path / "a.sock", states[0], "hostA", pin_service=url, token=TOKEN, window_s=window_s)
    b = HostDaemon(tmp_path / "b.sock", states[1], "hostB", pin_service=url, token=TOKEN, window_s=window_s)
    return a, b


def _agree(results: list[dict]) -> list:
    assert all(r["init"] == NCCL_SUCCESS for r in results), [r["logs"][-1] for r in results]
    first = results[0]["decisions"]
    for r in results[1:]:
        assert r["decisions"] == first, "ranks of one communicator disagree: NCCL would hang"
    return first


@pytest.mark.parametrize("first", ["hostA", "hostB"])
def test_first_asker_pins_for_every_rank(pin_service, states, plugin_so, tmp_path, monkeypatch, first):
    url, _ = pin_service
    comm = 0xC0FFEE00 + (first == "hostB")
    a, b = _daemons(tmp_path, states, url)
    with a, b:
        own = {
            "hostA": _static_decisions(plugin_so, a.table(), tmp_path, monkeypatch),
            "hostB": _static_decisions(plugin_so, b.table(), tmp_path, monkeypatch),
        }
        assert own["hostA"] != own["hostB"], "the hosts' own tables must differ, or this test proves nothing"
        leader, follower = (a, b) if first == "hostA" else (b, a)
        procs = [_rank(leader.server.path, comm)]
        _wait_for_pin(url, comm, 1)
        procs += [
            _rank(leader.server.path, comm),
            _rank(follower.server.path, comm),
            _rank(follower.server.path, comm),
        ]
        agreed = _agree(_results(procs))
    assert agreed == own[first]  # everyone uses the first asker's table
    if first == "hostA":
        assert agreed != default_decisions(NODES, RANKS // NODES)  # and it does change NCCL's choices


def test_rank_without_a_daemon_makes_every_rank_untouched(pin_service, states, tmp_path):
    url, authority = pin_service
    authority.window_s = 2.0  # the pin is abandoned: do not wait long
    a, b = _daemons(tmp_path, states, url)
    with a, b:
        comm = 0xC0FFEE10
        procs = [
            _rank(a.server.path, comm),
            _rank(a.server.path, comm),
            _rank(b.server.path, comm),
            _rank(tmp_path / "no-daemon-here.sock", comm),
        ]
        results = _results(procs)
    assert _agree(results) == default_decisions(NODES, RANKS // NODES)
    assert "never registered" in results[3]["logs"][-1][2]
    assert all(re.search(r"only [0-3] of 4 ranks asked", r["logs"][-1][2]) for r in results[:3])


def test_missing_rank_abandons_the_pin(pin_service, states, tmp_path):
    url, authority = pin_service
    authority.window_s = 2.0
    a, b = _daemons(tmp_path, states, url)
    with a, b:
        comm = 0xC0FFEE20
        results = _results(
            [_rank(a.server.path, comm), _rank(b.server.path, comm), _rank(b.server.path, comm)]
        )
        late = _results([_rank(a.server.path, comm)])  # after the window: the verdict is final
    assert _agree(results + late) == default_decisions(NODES, RANKS // NODES)
    assert [p["state"] for p in authority.pins() if p["comm_id"] == f"{comm:016x}"] == ["neutral"]


def test_pin_service_down_leaves_every_rank_untouched(states, tmp_path, free_port):
    a, b = _daemons(tmp_path, states, f"http://127.0.0.1:{free_port}")  # nothing listens there
    with a, b:
        comm = 0xC0FFEE30
        results = _results([_rank(d.server.path, comm) for d in (a, a, b, b)])
    assert _agree(results) == default_decisions(NODES, RANKS // NODES)
    assert all("unreachable" in r["logs"][-1][2] for r in results)


def test_pin_service_dropping_the_connection_leaves_nccl_alone(states, tmp_path):
    """The request reached the service but no verdict came back: the service withdraws a dropped
    request's ranks (its pin cannot complete), so every rank leaves NCCL alone — init never fails."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def drop() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.close()

    dropper = threading.Thread(target=drop, daemon=True)
    dropper.start()
    a = HostDaemon(
        tmp_path / "a.sock", states[0], "hostA", pin_service=f"http://127.0.0.1:{listener.getsockname()[1]}"
    )
    with a:
        results = _results([_rank(a.server.path, 0xC0FFEE40), _rank(a.server.path, 0xC0FFEE40)])
    listener.close()
    assert _agree(results) == default_decisions(NODES, RANKS // NODES)
    assert all("gave no verdict" in r["logs"][-1][2] for r in results)


def test_single_node_communicators_pin_at_the_local_daemon(pin_service, states, tmp_path):
    url, authority = pin_service
    a, _ = _daemons(tmp_path, states, url)
    with a:
        comm = 0xC0FFEE50
        results = _results([_rank(a.server.path, comm, ranks=2, nodes=1) for _ in range(2)])
    _agree(results)
    assert all("latched" in r["logs"][-1][2] for r in results)
    assert not [p for p in authority.pins() if p["comm_id"] == f"{comm:016x}"]  # never left the host
