"""The pin socket as a raw client sees it: the ACK fence, version skew, refusals, the socket's life."""

from __future__ import annotations

import socket
import stat
import time
from pathlib import Path

import pytest

from netd.errors import NetdError
from netd.nccl.pin_wire import (
    PIN_ACK,
    PIN_ACK_MAGIC,
    PIN_PREFIX,
    PIN_PROTO_VERSION,
    PIN_REQUEST,
    PIN_REQUEST_MAGIC,
    PIN_RESPONSE,
    PIN_RESPONSE_FIELDS,
    PIN_RESPONSE_V1,
    PinStatus,
)
from netd.nccl.pins import PinAuthority
from netd.nccl.socket_server import PinResolver, PinSocketServer


@pytest.fixture
def server(tmp_path: Path):
    resolver = PinResolver(PinAuthority(window_s=2.0), None, lambda: b"not-a-real-table", "hostT")
    srv = PinSocketServer(tmp_path / "run" / "nccl.sock", resolver, mode=0o660)
    srv.start()
    yield srv
    srv.close()


def _recv_all(path: Path, payload: bytes, half_close: bool = False) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(payload)
        if half_close:  # a short request ends here, as when the plugin dies mid-send
            s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def _ask(path: Path, payload: bytes, half_close: bool = False) -> dict | None:
    data = _recv_all(path, payload, half_close)
    if not data:
        return None
    acked = PIN_PREFIX.unpack_from(data) == (PIN_ACK_MAGIC, PIN_PROTO_VERSION, PIN_ACK.size)
    data = data[PIN_ACK.size :] if acked else data
    fields = dict(zip((n for n, _ in PIN_RESPONSE_FIELDS), PIN_RESPONSE.unpack_from(data), strict=True))
    fields["reason"] = fields["reason"].rstrip(b"\0").decode()
    fields["table"] = data[PIN_RESPONSE.size :]
    fields["acked"] = acked
    return fields


def _request(
    comm=0x42,
    ranks=1,
    nodes=1,
    member=7,
    version=PIN_PROTO_VERSION,
    magic=PIN_REQUEST_MAGIC,
    register_in_s=5.0,
    digest=0,
) -> bytes:
    now = time.monotonic_ns()  # the plugin's CLOCK_MONOTONIC
    register_by, deadline = now + int(register_in_s * 1e9), now + int(10e9)
    return PIN_REQUEST.pack(
        magic,
        version,
        PIN_REQUEST.size,
        comm,
        ranks,
        nodes,
        member,
        1000,
        1234,
        register_by,
        deadline,
        digest,
    )


def test_single_rank_single_node_is_pinned_locally(server):
    answer = _ask(server.path, _request())
    assert answer["status"] == PinStatus.APPLY and answer["comm_id"] == 0x42
    assert answer["table"] == b"not-a-real-table" and answer["table_size"] == len(answer["table"])
    assert answer["reason"] == "pinned by hostT for all ranks"
    assert answer["acked"] and answer["generation"] == 1 and answer["table_digest"] == 0


def test_request_taken_after_its_register_by_is_not_registered(server):
    answer = _ask(server.path, _request(comm=0x43, register_in_s=-0.001))
    assert answer["acked"] and answer["status"] == PinStatus.NEUTRAL
    assert "after its register-by time" in answer["reason"]
    again = _ask(server.path, _request(comm=0x43, member=8))  # nothing was registered for 0x43
    assert again["status"] == PinStatus.APPLY and again["generation"] == 1


def test_a_protocol_1_plugin_gets_protocol_1_neutral(server):
    """What a plugin built before the upgrade sends (48 bytes) and reads (128 bytes, version 1)."""
    old = PIN_PREFIX.pack(PIN_REQUEST_MAGIC, 1, 48) + (0x44).to_bytes(8, "little") + bytes(32)
    data = _recv_all(server.path, old)
    magic, version, size, status, table_size, comm_id, _, reason = PIN_RESPONSE_V1.unpack(data)
    assert (version, size, status, table_size, comm_id) == (1, 128, PinStatus.NEUTRAL, 0, 0x44)
    assert b"not registered" in reason


def test_a_newer_plugin_gets_neutral_without_ack(server):
    newer = PIN_PREFIX.pack(PIN_REQUEST_MAGIC, PIN_PROTO_VERSION + 1, 96) + bytes(88)
    answer = _ask(server.path, newer)
    assert not answer["acked"] and answer["status"] == PinStatus.NEUTRAL
    assert "pin protocol 2, not 3" in answer["reason"]


def test_socket_file_mode_and_cleanup(tmp_path):
    resolver = PinResolver(PinAuthority(), None, lambda: None, "h")
    srv = PinSocketServer(tmp_path / "nccl.sock", resolver, mode=0o600)
    srv.start()
    st = srv.path.stat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    srv.close()
    assert not srv.path.exists()


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"ranks": 2, "nodes": 3}, "invalid communicator size"),
        ({"ranks": 0, "nodes": 0}, "invalid communicator size"),
        ({"ranks": 4, "nodes": 2}, "no [nccl] pin_service configured"),
    ],
)
def test_refusals_are_neutral(server, payload, words):
    answer = _ask(server.path, _request(**payload))
    assert not answer["acked"]  # refused before the fence: provably not registered
    assert answer["status"] == PinStatus.NEUTRAL and words in answer["reason"]
    assert answer["table"] == b"" and answer["generation"] == 0


def test_not_the_plugin_gets_no_answer(server):
    assert _ask(server.path, _request(magic=0x12345678)) is None
    assert _ask(server.path, b"short", half_close=True) is None  # an incomplete request registers nothing


def test_long_reasons_are_cut_to_a_terminated_field(tmp_path):
    class Verbose(PinResolver):
        async def resolve(self, key, member, digest=0, budget_s=None):
            from netd.nccl.pins import PinVerdict

            return PinVerdict.neutral("é" * 200)

    srv = PinSocketServer(tmp_path / "v.sock", Verbose(PinAuthority(), None, lambda: None, "h"))
    srv.start()
    try:
        answer = _ask(srv.path, _request())
    finally:
        srv.close()
    assert answer["reason"] == "é" * 39  # 79 bytes at most, cut on a character boundary


def test_stale_socket_is_replaced_and_live_ones_or_files_are_not(tmp_path):
    path = tmp_path / "nccl.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: a crashed daemon's leftover
    resolver = PinResolver(PinAuthority(), None, lambda: None, "h")
    first = PinSocketServer(path, resolver)
    first.start()
    try:
        with pytest.raises(NetdError, match="another process serves NCCL pins"):
            PinSocketServer(path, resolver).start()
    finally:
        first.close()
    path.write_text("not a socket")
    with pytest.raises(NetdError, match="is not a socket"):
        PinSocketServer(path, resolver).start()
    assert path.read_text() == "not a socket"


def _until(condition) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)


def test_a_plugin_that_goes_away_is_withdrawn_from_its_pin(tmp_path):
    """A rank that dies while waiting must not complete its communicator's pin for the others."""
    resolver = PinResolver(PinAuthority(window_s=0.6), None, lambda: b"t", "h")
    srv = PinSocketServer(tmp_path / "w.sock", resolver)
    srv.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as first:
            first.connect(str(srv.path))
            first.sendall(_request(comm=0x77, ranks=2, member=1))
            assert PIN_PREFIX.unpack(first.recv(PIN_ACK.size))[0] == PIN_ACK_MAGIC
            _until(lambda: [p["members"] for p in resolver.local.pins()] == [1])  # registered
        _until(lambda: [p["members"] for p in resolver.local.pins()] == [0])  # closed undecided: withdrawn
        second = _ask(srv.path, _request(comm=0x77, ranks=2, member=2))
    finally:
        srv.close()
    assert second["status"] == PinStatus.NEUTRAL and "only 1 of 2" in second["reason"]
