"""The pin endpoint (netd.nccl.pin_route) at the HTTP and ASGI level, and its helpers.

What the lean endpoint must keep: a broken offer is refused however many good ones came first, a
body over the limit is refused, a request whose client goes away before the verdict withdraws its
ranks (a real socket closed against uvicorn), the daemon's hand-written request JSON is what the
schema accepts, and a table left out of an answer (``table_as_offered``) is only ever the one the
asker offered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import time

import httpx
import pytest

from netd.nccl.pin_client import RemotePins
from netd.nccl.pin_route import MAX_PIN_BODY
from netd.nccl.pin_schema import (
    UNLESS_OFFERED,
    PinRequestBody,
    PinResponseBody,
    request_json,
    verdict_from_body,
)
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinAuthority, PinKey, until_decided
from netd.nccl.table import HintTable, pack_table
from tests.nccl.conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _body(comm: int, members: list[int], table: bytes | None, n_ranks: int = 2, n_nodes: int = 2) -> bytes:
    b64 = None if table is None else base64.b64encode(table).decode()
    return request_json(PinKey(comm, n_ranks, n_nodes), members, "hostT", b64, 0, 5000)


@pytest.mark.parametrize(
    ("members", "host", "table", "digest"),
    [
        ([1], "h", None, 0),
        ([(1 << 64) - 1, 0x0ABC, 7], 'weird "host"\\ é', b"\x00\xff" * 9, 0),
        ([5] * 3, "", b"x", 0xDEADBEEF),
    ],
)
def test_hand_written_request_json_is_what_the_schema_reads(members, host, table, digest):
    key = PinKey(0xC0FFEE, 4096, 512)
    b64 = None if table is None else base64.b64encode(table).decode()
    raw = request_json(key, members, host, b64, digest, 950)
    json.loads(raw)  # well-formed JSON
    body = PinRequestBody.model_validate_json(raw)
    assert body.key() == key and body.member_ids() == members and body.host == host
    assert body.table_bytes() == table and int(body.static_digest, 16) == digest and body.budget_ms == 950


def test_a_broken_offer_is_refused_after_good_ones_and_every_time(pin_service):
    url, authority = pin_service
    good = pack_table(HintTable())
    broken = bytearray(good)
    broken[100] ^= 0xFF  # the CRC no longer matches
    with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
        # two hosts of one pin with the same (good) offer: the second is served from the checked ones
        a = client.post("/v1/nccl/pins", content=_body(0xA1, [1], good, n_ranks=1, n_nodes=1))
        assert a.status_code == 200 and a.json()["status"] == "apply"
        for _ in range(2):  # a refused offer is not remembered as checked
            r = client.post("/v1/nccl/pins", content=_body(0xA2, [2], bytes(broken), n_ranks=1, n_nodes=1))
            assert r.status_code == 422 and "table" in r.text
        again = client.post("/v1/nccl/pins", content=_body(0xA3, [3], good, n_ranks=1, n_nodes=1))
        assert again.status_code == 200 and base64.b64decode(again.json()["table"]) == good
    assert [p["comm_id"] for p in authority.pins()].count(f"{0xA2:016x}") == 0  # nobody registered


def test_a_body_over_the_limit_is_refused(pin_service):
    url, authority = pin_service
    with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
        r = client.post("/v1/nccl/pins", content=b" " * (MAX_PIN_BODY + 1))
    assert r.status_code == 413
    assert authority.pins() == []


@pytest.mark.slow  # waits for the pin's deadline (half the 5 s budget)
def test_a_client_that_goes_away_is_withdrawn_and_the_pin_cannot_complete_without_it(pin_service):
    url, authority = pin_service
    host, port = url.removeprefix("http://").split(":")
    body = _body(0xB1, [1, 2], pack_table(HintTable()), n_ranks=3, n_nodes=2)
    request = (
        b"POST /v1/nccl/pins HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (TOKEN.encode(), len(body), body)
    )
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        _until(lambda: [p["members"] for p in authority.pins()] == [2])  # registered, waiting
    _until(lambda: [p["members"] for p in authority.pins()] == [0])  # closed undecided: withdrawn
    with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
        last = client.post("/v1/nccl/pins", content=_body(0xB1, [3], None, n_ranks=3, n_nodes=2))
    # 1 and 2 left: the last rank alone cannot complete the pin; it is decided NEUTRAL at the deadline
    assert last.status_code == 200 and last.json()["status"] == "neutral"
    assert "only 1 of 3" in last.json()["reason"]


def test_until_decided_gives_the_verdict_or_none_and_never_cancels_the_shared_future():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        key = PinKey(0xD1, 3, 3)
        shared = auth.register(key, [1], b"t", "h1")
        assert isinstance(shared, asyncio.Future)
        gone = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(until_decided(shared, gone))
        await asyncio.sleep(0)
        gone.set_result(None)  # the first asker's connection closes
        assert await waiting is None and not shared.done()
        auth.withdraw(key, [1], shared)
        # a cancelled wait leaves the shared future alone too
        assert auth.register(key, [2], b"t", "h2") is shared
        waiting = asyncio.ensure_future(until_decided(shared, asyncio.get_running_loop().create_future()))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not shared.cancelled()
        others = asyncio.ensure_future(until_decided(shared, asyncio.get_running_loop().create_future()))
        await asyncio.sleep(0)
        done = auth.register(key, [3, 4], b"t", "h3")  # 2, 3, 4: complete
        return done, await others, auth.pins()

    done, others, pins = asyncio.run(scenario())
    assert done.status is PinStatus.APPLY and others == done
    assert pins[0]["members"] == 3


def _until(cond, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_hosts_that_offered_the_pinned_table_do_not_get_it_back(pin_service):
    url, _ = pin_service
    pinned = pack_table(HintTable(generated_at_ns=1))
    other = pack_table(HintTable(generated_at_ns=2))
    query = "?" + UNLESS_OFFERED.decode()

    async def scenario():
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=10) as client:

            def post(member: int, table: bytes, path: str = "/v1/nccl/pins" + query):
                return client.post(path, content=_body(0xE1, [member], table, n_ranks=4, n_nodes=4))

            first = asyncio.ensure_future(post(1, pinned))
            await asyncio.sleep(0.2)  # the first asker: its table is the pin's
            rest = [post(2, pinned), post(3, pinned, "/v1/nccl/pins"), post(4, other)]  # 3: an older client
            return await asyncio.gather(first, *rest)

    answers = [a.json() for a in asyncio.run(scenario())]
    assert {a["status"] for a in answers} == {"apply"}, answers
    first, same, old_client, different = answers
    assert first["table"] is same["table"] is None and first["table_as_offered"] and same["table_as_offered"]
    assert base64.b64decode(old_client["table"]) == pinned and not old_client["table_as_offered"]
    assert base64.b64decode(different["table"]) == pinned and not different["table_as_offered"]


def test_the_daemon_applies_the_table_it_offered_when_the_service_does_not_send_it_back(pin_service):
    url, _ = pin_service
    pinned = pack_table(HintTable(generated_at_ns=3))
    other = pack_table(HintTable(generated_at_ns=4))

    async def scenario():
        a, b = (RemotePins(url, TOKEN, 5.0, f"host{h}") for h in "ab")
        key = PinKey(0xE2, 2, 2)
        try:
            first = asyncio.ensure_future(a.join(key, 1, pinned, budget_s=4.0))
            await asyncio.sleep(0.2)  # a is the first asker: its table is the pin's
            return await asyncio.gather(first, b.join(key, 2, other, budget_s=4.0))
        finally:
            await a.aclose()
            await b.aclose()

    on_a, on_b = asyncio.run(scenario())
    assert on_a.status is on_b.status is PinStatus.APPLY
    assert on_a.table == on_b.table == pinned and on_a.generation == on_b.generation


def test_an_answer_naming_a_table_that_was_not_offered_is_malformed():
    answer = PinResponseBody(status="apply", reason="r", comm_id="1", table_as_offered=True)
    with pytest.raises(ValueError):
        verdict_from_body(answer, None)
    assert verdict_from_body(answer, ("dA==", b"t")).table == b"t"


def test_an_offer_to_a_pin_already_open_is_not_read(pin_service):
    """The pin keeps its first asker's table: a later host's offer, even a broken one, is not decoded;
    that host joins and gets the pinned table like every other."""
    url, _ = pin_service
    pinned = pack_table(HintTable(generated_at_ns=5))
    broken = bytearray(pack_table(HintTable(generated_at_ns=6)))
    broken[100] ^= 0xFF

    async def scenario():
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=10) as client:
            first = asyncio.ensure_future(
                client.post("/v1/nccl/pins", content=_body(0xF1, [1], pinned, n_ranks=2, n_nodes=2))
            )
            await asyncio.sleep(0.2)  # the pin is open with the first asker's table
            late = await client.post(
                "/v1/nccl/pins", content=_body(0xF1, [2], bytes(broken), n_ranks=2, n_nodes=2)
            )
            return await first, late

    first, late = asyncio.run(scenario())
    assert first.status_code == late.status_code == 200
    assert first.json()["status"] == late.json()["status"] == "apply"
    assert base64.b64decode(late.json()["table"]) == pinned
