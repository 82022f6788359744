"""The pin authority: all ranks get the first asker's table, or all get none; verdicts are final."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from netd.nccl.pin_client import RemotePins
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinAuthority, PinKey

KEY = PinKey(0xFEED, 3, 3)


def run(coro):
    return asyncio.run(coro)


def test_complete_pin_gives_every_rank_the_first_askers_table():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        return await asyncio.gather(
            auth.join(KEY, 1, b"table-from-A", "hostA"),
            auth.join(KEY, 2, b"table-from-B", "hostB"),
            auth.join(KEY, 3, None, "hostC"),
        ), auth

    verdicts, auth = run(scenario())
    assert {v.status for v in verdicts} == {PinStatus.APPLY}
    assert {v.table for v in verdicts} == {b"table-from-A"}
    assert len({v.pinned_at_ns for v in verdicts}) == 1 and verdicts[0].pinned_by == "hostA"
    assert auth.pins()[0]["state"] == "apply" and auth.pins()[0]["members"] == 3


def test_missing_rank_abandons_for_everyone_including_latecomers():
    async def scenario():
        auth = PinAuthority(window_s=0.2)
        early = await asyncio.gather(auth.join(KEY, 1, b"t", "a"), auth.join(KEY, 2, b"t", "b"))
        late = await auth.join(KEY, 3, b"t", "c")  # would have completed the pin, but too late
        return early, late

    early, late = run(scenario())
    assert [v.status for v in [*early, late]] == [PinStatus.NEUTRAL] * 3
    assert "only 2 of 3 ranks asked within 0.2 s" in early[0].reason
    assert late.table is None


def test_first_asker_without_a_table_pins_neutral():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        return await asyncio.gather(*(auth.join(KEY, m, None if m == 1 else b"t", "x") for m in (1, 2, 3)))

    assert {v.status for v in run(scenario())} == {PinStatus.NEUTRAL}


def test_member_retry_is_idempotent_and_an_extra_member_fails():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        one = PinKey(7, 1, 1)
        first = await auth.join(one, 10, b"t", "a")  # one rank: completes at once
        again = await auth.join(one, 10, b"other", "a")
        extra = await auth.join(one, 11, b"t", "b")  # a second communicator with the same id
        return first, again, extra

    first, again, extra = run(scenario())
    assert first.status is PinStatus.APPLY and again == first
    assert extra.status is PinStatus.FAIL and "already has all 1 ranks pinned" in extra.reason


def test_capacity_and_expiry():
    now = [0.0]

    async def scenario():
        auth = PinAuthority(window_s=5.0, keep_s=10.0, max_pins=2, clock=lambda: now[0])
        a = await auth.join(PinKey(1, 1, 1), 1, b"t")
        b = await auth.join(PinKey(2, 1, 1), 1, b"t")
        refused = await auth.join(PinKey(3, 1, 1), 1, b"t")
        now[0] = 11.0  # decided pins older than keep_s are forgotten
        accepted = await auth.join(PinKey(3, 1, 1), 1, b"t")
        return a, b, refused, accepted, auth

    a, b, refused, accepted, auth = run(scenario())
    assert a.status is b.status is accepted.status is PinStatus.APPLY
    assert refused.status is PinStatus.NEUTRAL and "was not registered" in refused.reason
    assert [p["comm_id"] for p in auth.pins()] == [f"{3:016x}"]


def _remote(handler) -> RemotePins:
    return RemotePins("http://pins.invalid", "tok", 2.0, "hostA", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("respond", "status", "words"),
    [
        (lambda r: httpx.Response(401, json={"detail": "no"}), PinStatus.NEUTRAL, "not registered"),
        (lambda r: httpx.Response(403, json={"detail": "no"}), PinStatus.NEUTRAL, "not registered"),
        (lambda r: httpx.Response(422, json={"detail": "bad"}), PinStatus.NEUTRAL, "not registered"),
        (lambda r: httpx.Response(500, text="boom"), PinStatus.FAIL, "HTTP 500"),
        (lambda r: httpx.Response(200, text="{not json"), PinStatus.FAIL, "malformed"),
        (
            lambda r: httpx.Response(200, json={"status": "apply", "reason": "x", "comm_id": "ffff"}),
            PinStatus.FAIL,
            "malformed",
        ),
        (
            lambda r: httpx.Response(
                200, json={"status": "neutral", "reason": "only 1 of 3", "comm_id": f"{KEY.comm_id:016x}"}
            ),
            PinStatus.NEUTRAL,
            "only 1 of 3",
        ),
    ],
)
def test_remote_pin_error_mapping(respond, status, words):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return respond(request)

    async def scenario():
        remote = _remote(handler)
        try:
            return await remote.join(KEY, 0xABC, b"table")
        finally:
            await remote.aclose()

    verdict = run(scenario())
    assert verdict.status is status and words in verdict.reason
    assert seen[0].headers["authorization"] == "Bearer tok"
    body = seen[0].read().decode()
    assert '"member":"0000000000000abc"' in body.replace(" ", "") and '"host":"hostA"' in body.replace(
        " ", ""
    )


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (httpx.ConnectError("refused"), PinStatus.NEUTRAL),  # never sent: not registered
        (httpx.ConnectTimeout("slow"), PinStatus.NEUTRAL),
        (httpx.PoolTimeout("no free connection"), PinStatus.NEUTRAL),
        (httpx.ReadTimeout("no answer"), PinStatus.FAIL),  # sent: maybe registered
        (httpx.RemoteProtocolError("dropped"), PinStatus.FAIL),
    ],
)
def test_remote_pin_transport_errors(error, status):
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    async def scenario():
        remote = _remote(handler)
        try:
            return await remote.join(KEY, 1, None)
        finally:
            await remote.aclose()

    assert run(scenario()).status is status
