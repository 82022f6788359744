"""The listener under hostile clients, over real sockets against a netd listener in its own process
(tests/api/hostile_server.py): silent, trickling and crowding clients, and 25 MB bodies with and
without a token. Each test counts what the server's process holds (/proc/<pid>/fd, VmRSS) and
whether /healthz keeps answering, never how long anything took."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from netd.api.connections import ConnectionLimits, accept_overshoot
from tests.processes import Child, stop

pytestmark = pytest.mark.slow  # real processes, hundreds of sockets, deadlines of a second

TOKEN = "s3cret"
MiB = 1 << 20


@contextlib.contextmanager
def listener(port: int, max_conn: int = 64, head_s: float = 1.0, body_s: float = 2.0) -> Iterator[Child]:
    cmd = [
        sys.executable,
        "-m",
        "tests.api.hostile_server",
        str(port),
        str(max_conn),
        str(head_s),
        str(body_s),
    ]
    proc = Child(cmd)
    try:
        deadline = time.monotonic() + 60
        while healthz(port) != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"listener did not start: {proc.stderr_text()}")
            time.sleep(0.05)
        yield proc
    finally:
        stop(proc)
    # hostile clients are the clients' problem: nothing they do is logged as a traceback
    assert "Traceback" not in proc.stderr_text(), proc.stderr_text()


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def exchange(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        return read_response(s)


def read_response(s: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(OSError):
        while chunk := s.recv(65536):
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep and b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
    return data


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/") else 0


def healthz(port: int) -> int:
    try:
        return status(exchange(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout=2.0))
    except OSError:
        return 0


def settles(condition: Callable[[], bool], within_s: float = 10.0) -> bool:
    """``condition`` holds before ``within_s`` (polled)."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_healthz(port: int, within_s: float = 10.0) -> bool:
    """/healthz answers 200 before ``within_s`` (a loaded machine may take a moment to close what
    the test's clients left)."""
    return settles(lambda: healthz(port) == 200, within_s)


def post_head(path: str, length: int, token: str | None = None, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def test_silent_clients_are_evicted_and_timed_out_so_healthz_answers(free_port):
    with listener(free_port, max_conn=64, head_s=1.0) as server:
        pid = server.pid
        base = fds(pid)
        silent = [socket.create_connection(("127.0.0.1", free_port)) for _ in range(600)]
        try:
            answers = [healthz(free_port) for _ in range(20)]
            held = fds(pid)
            assert answers == [200] * 20  # each probe evicts a silent connection
            assert held <= base + 64 + 2  # never more than max_connections client sockets
            # past the head deadline (1 s) every silent connection is closed (a loaded machine may
            # fire the timers a little late; without deadlines they would stay open for good)
            assert settles(lambda: fds(pid) <= base + 1)
            closed = 0
            for s in silent:
                s.settimeout(2.0)
                with contextlib.suppress(OSError):
                    closed += s.recv(1) == b""
            assert closed >= 600 - 64  # the rest were reset (evicted before they were read)
        finally:
            for s in silent:
                s.close()


def test_trickled_head_and_body_are_cut_at_their_deadlines(free_port):
    with listener(free_port, head_s=1.0, body_s=1.0) as server:
        pid = server.pid
        base = fds(pid)
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 100
        body_client = socket.create_connection(("127.0.0.1", free_port))
        body_client.sendall(post_head("/scheduler/filter", 10_000))
        sent = {"head": 0, "body": 0}
        with socket.create_connection(("127.0.0.1", free_port)) as head_client:
            for i in range(len(head)):  # one byte every 50 ms would take ~6 s
                try:
                    head_client.sendall(head[i : i + 1])
                    body_client.sendall(b" ")
                except OSError:
                    break
                sent["head"] += 1
                sent["body"] += 1
                time.sleep(0.05)
        body_client.close()
        assert sent["head"] < len(head)  # closed long before the head was complete
        assert sent["body"] < 10_000
        assert settles(lambda: fds(pid) <= base + 1) and healthz(free_port) == 200


def test_two_thousand_connections_are_answered_within_the_descriptor_bound(free_port):
    limits = ConnectionLimits(max_connections=200)
    with listener(free_port, max_conn=200, head_s=2.0) as server:
        pid = server.pid
        base = fds(pid)
        conns: list[socket.socket] = []
        peak, statuses = 0, {}
        try:
            for i in range(2000):
                s = socket.create_connection(("127.0.0.1", free_port), timeout=10)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                conns.append(s)
                if i % 10 == 0:
                    peak = max(peak, fds(pid))
            for s in conns:
                code = status(read_response(s))
                statuses[code] = statuses.get(code, 0) + 1
        finally:
            for s in conns:  # not left to a failure's traceback, which would hold 2000 sockets
                s.close()
        # max_connections, plus the accepted batches the protocol has not looked at yet or is closing
        assert peak <= base + 200 + accept_overshoot(limits) + 2
        assert set(statuses) <= {200, 0} and statuses.get(200, 0) >= 1000  # 0: evicted while waiting
        assert wait_healthz(free_port)


def test_the_kernel_queue_is_the_backlog_while_asyncio_accepts_in_small_batches(free_port):
    limits = ConnectionLimits()
    assert limits.accept_batch < limits.backlog
    with listener(free_port):
        ss = subprocess.run(
            ["ss", "-Hltn", f"sport = :{free_port}"], capture_output=True, text=True, check=True
        ).stdout.split()
    assert int(ss[2]) == limits.backlog  # a listening socket's Send-Q column is its queue length


def test_busy_connections_past_the_limit_get_503_with_retry_after(free_port):
    with listener(free_port, max_conn=16, body_s=10.0) as server:
        pid = server.pid
        base = fds(pid)
        busy = []  # each has sent a head and is sending its body: a request in progress, not idle
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", free_port), timeout=5)
            s.sendall(post_head("/scheduler/filter", 1000) + b"{")
            busy.append(s)
        time.sleep(1.0)  # let the server read the heads (they are busy, not idle, from then on)
        try:
            refused = [
                exchange(free_port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") for _ in range(5)
            ]
            assert [status(r) for r in refused] == [503] * 5
            assert all(
                b"retry-after: 1" in r.lower() and b"urn:netd:problem:unavailable" in r for r in refused
            )
            assert fds(pid) <= base + 16 + 1
        finally:
            for s in busy:
                s.close()
        assert wait_healthz(free_port)  # the limit frees as the busy ones go


def test_25mb_bodies_are_refused_before_they_are_read(free_port):
    with listener(free_port) as server:
        pid = server.pid
        rss0 = rss_mb(pid)
        chunk = b"x" * 65536
        for token, expected in ((None, 401), ("wrong", 401), (TOKEN, 413)):
            with socket.create_connection(("127.0.0.1", free_port), timeout=5) as s:
                s.sendall(post_head("/v1/nccl/pins", 25 * MiB, token))
                s.sendall(chunk)  # only the first 64 KB of the promised 25 MB
                response = read_response(s)
            assert status(response) == expected, response[:300]
            assert b"connection: close" in response.lower() and TOKEN.encode() not in response
            assert json.loads(response.partition(b"\r\n\r\n")[2])["status"] == expected
        # the same 25 MB sent chunked (no Content-Length) is cut once it passes the route's limit
        with socket.create_connection(("127.0.0.1", free_port), timeout=5) as s:
            s.sendall(
                post_head("/v1/nccl/pins", 0, TOKEN).replace(
                    b"Content-Length: 0", b"Transfer-Encoding: chunked"
                )
            )
            sent = 0
            with contextlib.suppress(OSError):
                while sent < 25 * MiB:
                    s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
            response = read_response(s)
        assert status(response) == 413 and sent < 25 * MiB
        assert rss_mb(pid) - rss0 < 20  # nothing near 25 MB was buffered
        assert healthz(free_port) == 200


def test_big_extender_request_leaves_healthz_answering(free_port):
    node = {
        "metadata": {"name": "", "labels": {f"label-{i}": "v" * 40 for i in range(40)}},
        "status": {
            "images": [
                {"names": ["registry.example/image@sha256:" + "0" * 64] * 2, "sizeBytes": 1}
                for _ in range(30)
            ]
        },
    }
    items = []
    for n in range(5000):
        node["metadata"]["name"] = f"node-{n:03d}"
        items.append(json.dumps(node))
    body = b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[' + ",".join(items).encode() + b"]}}"
    assert len(body) > 25 * 1000 * 1000
    with listener(free_port, body_s=30.0):
        with socket.create_connection(("127.0.0.1", free_port), timeout=30) as s:
            s.sendall(post_head("/scheduler/filter", len(body)) + body)
            s.setblocking(False)
            probes, response = 0, b""
            while not response.endswith(b"}") or status(response) == 0:
                probes += healthz(free_port) == 200
                with contextlib.suppress(BlockingIOError):
                    response += s.recv(1 << 20)
            s.setblocking(True)
            s.settimeout(30)
            response += read_response(s)
        assert status(response) == 200 and probes >= 1
        doc = json.loads(response.partition(b"\r\n\r\n")[2])
        assert len(doc["Nodes"]["items"]) + len(doc["FailedAndUnresolvableNodes"]) == 5000


def test_invalid_and_deep_bodies_answer_small_problems(free_port):
    with listener(free_port) as _:
        invalid = json.dumps({"Pod": {"metadata": {}}, "NodeNames": [{"x": "y" * 100}] * 5000}).encode()
        response = exchange(free_port, post_head("/scheduler/prioritize", len(invalid)) + invalid)
        assert status(response) == 422 and len(response) < 10_000 and b"yyyy" not in response
        deep = b'{"a":' * 300 + b"1" + b"}" * 300
        for path, token in (("/v1/nccl/pins", TOKEN), ("/scheduler/filter", None)):
            response = exchange(free_port, post_head(path, len(deep), token) + deep)
            assert status(response) in (400, 422), response[:300]
        response = exchange(free_port, post_head("/v1/nccl/pins", len(deep), TOKEN) + deep)
        assert status(response) == 400 and b"urn:netd:problem:malformed-request" in response


@pytest.mark.parametrize(
    ("host", "expected"),
    [("127.0.0.1", 200), ("localhost:9469", 200), ("[::1]:9469", 200), ("rebind.attacker.example", 421)],
)
def test_host_header_allow_list(free_port, host, expected):
    with listener(free_port):
        response = exchange(free_port, f"GET /v1/nccl/pins HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert status(response) == expected
