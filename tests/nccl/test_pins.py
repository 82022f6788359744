"""The pin authority: all ranks get the first asker's table, or all get none; verdicts are final."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from netd.nccl.pin_client import RemotePins
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinAuthority, PinKey, PinVerdict

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
    assert "only 2 of 3 ranks asked in time" in early[0].reason
    assert late.table is None


def test_first_asker_without_a_table_pins_neutral():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        return await asyncio.gather(*(auth.join(KEY, m, None if m == 1 else b"t", "x") for m in (1, 2, 3)))

    assert {v.status for v in run(scenario())} == {PinStatus.NEUTRAL}


def test_member_retry_is_idempotent_and_a_new_member_opens_the_next_generation():
    """A rerun with the same NCCL_COMM_ID: the first communicator's pin completed with all its ranks,
    so a new member can only be the next communicator's — it gets a fresh pin, never FAIL."""

    async def scenario():
        auth = PinAuthority(window_s=5.0)
        one = PinKey(7, 1, 1)
        first = await auth.join(one, 10, b"t", "a")  # one rank: completes at once
        again = await auth.join(one, 10, b"other", "a")
        rerun = await auth.join(one, 11, b"t2", "b")  # the same id, the next communicator
        return first, again, rerun

    first, again, rerun = run(scenario())
    assert first.status is PinStatus.APPLY and again == first and first.generation == 1
    assert rerun.status is PinStatus.APPLY and rerun.generation == 2 and rerun.table == b"t2"


def test_rerun_of_a_multi_rank_communicator_twice_in_a_row():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        runs = []
        for run_no, table in enumerate((b"first", b"second", b"third")):
            members = [10 * run_no + m for m in (1, 2, 3)]  # every init draws fresh member ids
            runs.append(await asyncio.gather(*(auth.join(KEY, m, table, "h") for m in members)))
        return runs

    runs = run(scenario())
    for generation, (verdicts, table) in enumerate(
        zip(runs, (b"first", b"second", b"third"), strict=True), 1
    ):
        assert {(v.status, v.table, v.generation) for v in verdicts} == {(PinStatus.APPLY, table, generation)}


def test_late_rank_after_abandonment_stays_neutral_and_cannot_complete_a_new_pin():
    """A straggler of an abandoned pin must not join a later communicator's pin (its peers were NEUTRAL)."""

    async def scenario():
        auth = PinAuthority(window_s=0.1)
        early = await asyncio.gather(auth.join(KEY, 1, b"t"), auth.join(KEY, 2, b"t"))
        late = await auth.join(KEY, 3, b"t")
        return early, late, auth

    early, late, auth = run(scenario())
    assert {v.status for v in [*early, late]} == {PinStatus.NEUTRAL}
    assert late.generation == early[0].generation == 1 and len(auth.pins()) == 1


def test_budget_tightens_the_deadline():
    """A member that can wait 0.2 s gets its verdict before then, whatever the window."""

    async def scenario():
        auth = PinAuthority(window_s=30.0, margin_s=0.05)
        t0 = asyncio.get_running_loop().time()
        v = await auth.join(KEY, 1, b"t", budget_s=0.2)
        return v, asyncio.get_running_loop().time() - t0

    verdict, took = run(scenario())
    assert verdict.status is PinStatus.NEUTRAL and "only 1 of 3" in verdict.reason
    assert took < 5.0  # decided at the member's budget, not the 30 s window (a bound, not a timing)


def test_batch_of_members_and_withdrawal_on_cancel():
    """One host's ranks join together; a caller that goes away undecided withdraws its ranks, so the
    pin cannot complete on their behalf."""

    async def scenario():
        auth = PinAuthority(window_s=0.3)
        gone = asyncio.ensure_future(auth.join(KEY, [1, 2], b"t", "h1"))
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.sleep(0.01)
        last = await auth.join(KEY, 3, b"t", "h2")  # would complete with 1 and 2: they left
        return last, auth

    last, auth = run(scenario())
    assert last.status is PinStatus.NEUTRAL and "only 1 of 3" in last.reason


def test_mixed_static_and_daemon_tables_are_neutral_for_all():
    async def scenario():
        auth = PinAuthority(window_s=5.0)
        same = await asyncio.gather(*(auth.join(PinKey(1, 2, 2), m, None, digest=0xAB) for m in (1, 2)))
        mixed = await asyncio.gather(
            auth.join(PinKey(2, 2, 2), 1, None, digest=0xAB), auth.join(PinKey(2, 2, 2), 2, b"t", digest=0)
        )
        return same, mixed

    same, mixed = run(scenario())
    assert {(v.status, v.digest, v.table) for v in same} == {(PinStatus.APPLY, 0xAB, None)}
    assert {v.status for v in mixed} == {PinStatus.NEUTRAL} and "different tables" in mixed[0].reason


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


def _http(status: int, body: bytes | str) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    return b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        len(data),
        data,
    )


async def _ask_scripted(answer: bytes | None, budget_s: float = 2.0) -> tuple[object, list[bytes]]:
    """RemotePins against a real TCP server that reads one request and answers ``answer`` (None:
    close without answering; b"": never answer)."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            seen.append(head + await reader.readexactly(int(length.split(b":")[1])))
            if answer == b"":
                await asyncio.sleep(budget_s + 1)
            elif answer is not None:
                writer.write(answer)
                await writer.drain()
        finally:
            writer.close()  # also when the test ends first and cancels this handler

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    remote = RemotePins(f"http://127.0.0.1:{port}", "tok", 5.0, "hostA")
    try:
        verdict = await remote.join(KEY, 0xABC, b"table", budget_s=budget_s)
    finally:
        await remote.aclose()
        server.close()
    return verdict, seen


@pytest.mark.parametrize(
    ("answer", "status", "words"),
    [
        (_http(401, '{"detail": "no"}'), PinStatus.NEUTRAL, "not registered"),
        (_http(403, '{"detail": "no"}'), PinStatus.NEUTRAL, "not registered"),
        (_http(422, '{"detail": "bad"}'), PinStatus.NEUTRAL, "not registered"),
        (_http(500, "boom"), PinStatus.FAIL, "HTTP 500"),  # FAIL: no verdict, the plugin warns
        (_http(200, "{not json"), PinStatus.FAIL, "malformed"),
        (_http(200, '{"status": "apply", "reason": "x", "comm_id": "ffff"}'), PinStatus.FAIL, "malformed"),
        (
            _http(200, '{"status": "fail", "reason": "old service", "comm_id": "feed"}'),
            PinStatus.NEUTRAL,
            "old",
        ),
        (
            _http(200, '{"status": "neutral", "reason": "only 1 of 3", "comm_id": "000000000000feed"}'),
            PinStatus.NEUTRAL,
            "only 1 of 3",
        ),
        (None, PinStatus.FAIL, "gave no verdict"),  # sent, then the connection dropped
        (b"", PinStatus.FAIL, "gave no verdict"),  # sent, never answered within the budget
        (b"garbage\r\n\r\n", PinStatus.FAIL, "gave no verdict"),
    ],
)
def test_remote_pin_error_mapping(answer, status, words):
    verdict, seen = run(_ask_scripted(answer, budget_s=0.5))
    assert verdict.status is status and words in verdict.reason
    assert b"authorization: bearer tok" in seen[0].lower()
    body = seen[0].split(b"\r\n\r\n", 1)[1].decode()
    assert '"members":["0000000000000abc"]' in body and '"host":"hostA"' in body


def test_remote_pin_unreachable_is_not_registered(free_port):
    async def scenario():
        remote = RemotePins(f"http://127.0.0.1:{free_port}", "tok", 2.0, "hostA")
        try:
            return await remote.join(KEY, 1, None, budget_s=1.0)
        finally:
            await remote.aclose()

    verdict = run(scenario())
    assert verdict.status is PinStatus.NEUTRAL and "unreachable" in verdict.reason


async def _batch_of_three(
    comm: int, while_out: Callable[[list[asyncio.Future[PinVerdict]]], None] | None = None
) -> tuple[list[bytes], list[PinVerdict | BaseException]]:
    """Three ranks of a 6-rank, 2-node communicator on this host, against a server that answers
    NEUTRAL "r" once ``while_out(ranks)`` ran with the request out: (request heads seen, results)."""
    seen: list[bytes] = []
    received, answer = asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        received.set()
        await answer.wait()
        answer_json = json.dumps({"status": "neutral", "reason": "r", "comm_id": f"{comm:016x}"})
        writer.write(_http(200, answer_json))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    remote = RemotePins(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", None, 2.0, "h")
    key = PinKey(comm, 6, 2)
    try:
        ranks = [asyncio.ensure_future(remote.join(key, m, None, budget_s=1.0)) for m in (1, 2, 3)]
        await received.wait()
        if while_out is not None:
            while_out(ranks)
        answer.set()
        return seen, await asyncio.gather(*ranks, return_exceptions=True)
    finally:
        await remote.aclose()
        server.close()


def test_remote_pins_batch_one_hosts_ranks_into_one_request():
    """Three ranks of a 6-rank, 2-node communicator on this host: one request with three members."""
    seen, verdicts = run(_batch_of_three(7))
    assert len(seen) == 1 and {v.reason for v in verdicts if isinstance(v, PinVerdict)} == {"r"}
    assert len(verdicts) == 3


def test_a_rank_that_goes_away_does_not_take_its_hosts_other_ranks_with_it():
    """Three ranks of one batch; the first one's wait is cancelled (its plugin went away) while the
    request is out: the other two still get the service's verdict."""
    _, (first, *others) = run(_batch_of_three(9, lambda ranks: ranks[0].cancel()))
    assert isinstance(first, asyncio.CancelledError)
    assert [v.reason for v in others if isinstance(v, PinVerdict)] == ["r", "r"]
