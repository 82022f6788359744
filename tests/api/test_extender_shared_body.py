"""Full-Node filters through the workers, small (bytes over the socket pair) and big (a memfd the worker
maps): the passing v1.Node objects come back byte for byte as sent, removed ones anywhere in the list
(first, adjacent, last), and no memfd or mapping of a body outlives its request — answered, refused by
dead workers, or abandoned by the client half-way through the body — except the few memfds kept, unmapped,
for the next bodies (BodyFiles: reused, sized to each body, released when idle)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from netd.api.extender_body import BODY_FILES, SHARED_MIN, BodyFiles
from netd.api.extender_pool import ExtenderPool
from netd.api.problems import install_problem_handlers
from netd.api.routes_scheduler import scheduler_router
from netd.congestion.score import Components
from netd.congestion.scorer import ScoreInput
from tests.api.conftest import serving
from tests.api.test_extender import StubView, extender, node, pod  # noqa: F401 (fixture)

MEMFD = "netd-extender-body"
BAD = ["bad-0", "bad-1", "bad-2", "bad-3"]


def _view() -> StubView:
    """bad-* have their one port down; every other name is unknown to netd and passes."""
    return StubView(
        [ScoreInput(h, "mlx5_0", 1, Components(), up=False, netdev="ens0np0", tor="leaf-9") for h in BAD]
    )


def _names(count: int) -> list[str]:
    names = [f"good-{i:04d}" for i in range(count)]
    names[0], names[count // 2], names[count // 2 + 1], names[-1] = BAD  # first, two adjacent, last
    return names


def _body(names: list[str], pad: int) -> tuple[bytes, list[bytes]]:
    """An ExtenderArgs with each Node written with unusual spacing (so an answer re-encoding them
    would differ): the body and each Node's own bytes."""
    items = []
    for name in names:
        obj = node(name, "leaf-x")
        obj["metadata"]["annotations"]["example.com/padding"] = "p" * pad
        items.append(json.dumps(obj, separators=(" ,", ":  ")).encode())
    head = json.dumps({"Pod": pod(), "NodeNames": None}).encode()[:-1]
    body = (
        head
        + b', "Nodes" : {"apiVersion":"v1", "kind":"NodeList", "items" : [ '
        + b" ,\n ".join(items)
        + b" ] } }"
    )
    return body, items


@pytest.mark.parametrize("pad", [0, 2000], ids=["socket-pair", "memfd"])
def test_full_node_filter_echoes_each_passing_node_byte_for_byte(extender, pad):  # noqa: F811
    names = _names(600)
    body, items = _body(names, pad)
    assert (len(body) >= SHARED_MIN) == (pad > 0)
    with extender(_view()) as base:
        r = httpx.post(base + "/scheduler/filter", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert int(r.headers["content-length"]) == len(r.content)
    doc = r.json()
    assert [n["metadata"]["name"] for n in doc["Nodes"]["items"]] == [n for n in names if n not in BAD]
    assert doc["Nodes"]["kind"] == "NodeList" and doc["NodeNames"] is None
    assert set(doc["FailedAndUnresolvableNodes"]) == set(BAD)
    for name, raw in zip(names, items, strict=True):
        assert (raw in r.content) == (name not in BAD), name
    assert r.headers["x-netd-unknown-nodes"] == str(len(names) - len(BAD))


def _held_memfds(pid: int | str = "self") -> tuple[int, int]:
    """(descriptors, mappings) of request-body memfds held by process ``pid``."""
    fds = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds += MEMFD in os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass  # closed meanwhile (the listing's own descriptor)
    maps = Path(f"/proc/{pid}/maps").read_text().count(MEMFD)
    return fds, maps


def _until_released(pids: list[int], within_s: float = 10.0) -> list[tuple[int, int]]:
    """What this process (less the memfds kept for the next bodies) and ``pids`` hold, once nothing
    (or ``within_s`` passed)."""
    deadline = time.monotonic() + within_s
    while True:
        gc.collect()
        fds, maps = _held_memfds("self")
        held = [(fds - BODY_FILES.idle(), maps), *(_held_memfds(p) for p in pids)]
        if all(h == (0, 0) for h in held) or time.monotonic() > deadline:
            return held
        time.sleep(0.05)


@pytest.mark.slow
def test_no_body_memfd_outlives_its_request(free_port):
    body, _ = _body(_names(600), 2000)
    pool = ExtenderPool()
    dead = ExtenderPool(command=(sys.executable, "-c", "import sys; sys.exit(3)"))
    try:
        app = FastAPI()
        install_problem_handlers(app)
        app.include_router(scheduler_router(_view(), pool=pool))
        app.include_router(scheduler_router(_view(), pool=dead), prefix="/dead")
        with serving(app, free_port) as base:
            headers = {"content-type": "application/json"}
            for _ in range(3):
                assert (
                    httpx.post(base + "/scheduler/filter", content=body, headers=headers).status_code == 200
                )
                r = httpx.post(base + "/dead/scheduler/filter", content=body, headers=headers, timeout=30)
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
            with socket.create_connection(("127.0.0.1", free_port)) as s:  # gone half-way through
                s.sendall(
                    b"POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body[: len(body) // 2]
                )
            assert httpx.post(base + "/scheduler/filter", content=body, headers=headers).status_code == 200
            assert _until_released(pool.pids()) == [(0, 0)] * (1 + pool.size)
            assert 1 <= BODY_FILES.idle() <= BODY_FILES.keep  # kept for the next body, not mapped
    finally:
        pool.close()
        dead.close()


def _contents(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size + 1, 0)


def test_body_files_are_reused_sized_to_each_body_and_released_when_idle():
    async def scenario() -> None:
        files = BodyFiles(keep=2, idle_s=0.2)
        first = files.take(1000)
        os.write(first, b"a" * 1000)
        files.give(first)
        again = files.take(10)  # the same file, cut to the new body: a worker maps all of it
        assert again == first and os.lseek(again, 0, os.SEEK_CUR) == 0
        os.write(again, b"b" * 10)
        assert _contents(again) == b"b" * 10
        others = [files.take(5) for _ in range(2)]
        for fd in (again, *others):
            files.give(fd)
        assert files.idle() == 2  # the third was closed
        closed = [fd for fd in (again, *others) if not _is_open(fd)]
        assert len(closed) == 1
        await asyncio.sleep(0.5)
        assert files.idle() == 0 and not any(_is_open(fd) for fd in (again, *others))

    asyncio.run(scenario())


def _is_open(fd: int) -> bool:
    try:
        return MEMFD in os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False


def test_a_reused_body_memfd_holds_exactly_the_next_body(extender):  # noqa: F811
    """A big body, then a smaller and a bigger one through the same listener: each is written over
    the memfd the one before left (BodyFiles), and each answer is that request's own Node objects —
    no byte of a longer earlier body is read after a shorter one."""
    headers = {"content-type": "application/json"}
    with extender(_view()) as base:
        for count, pad in ((600, 3000), (500, 2000), (700, 2500)):
            names = _names(count)
            body, items = _body(names, pad)
            assert len(body) >= SHARED_MIN
            r = httpx.post(base + "/scheduler/filter", content=body, headers=headers)
            assert r.status_code == 200, r.text
            doc = r.json()
            assert [n["metadata"]["name"] for n in doc["Nodes"]["items"]] == [
                n for n in names if n not in BAD
            ]
            assert all((raw in r.content) == (n not in BAD) for n, raw in zip(names, items, strict=True))
    assert BODY_FILES.idle() >= 1  # the bodies went through a kept memfd
