"""The pin socket as a raw client sees it: protocol checks, refusals, and the socket file's life."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from netd.errors import NetdError
from netd.nccl.pin_wire import (
    PIN_PROTO_VERSION,
    PIN_REQUEST,
    PIN_REQUEST_MAGIC,
    PIN_RESPONSE,
    PIN_RESPONSE_FIELDS,
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


def _ask(path: Path, payload: bytes) -> dict | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)  # a short request ends here, as when the plugin dies mid-send
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    if not data:
        return None
    fields = dict(zip((n for n, _ in PIN_RESPONSE_FIELDS), PIN_RESPONSE.unpack_from(data), strict=True))
    fields["reason"] = fields["reason"].rstrip(b"\0").decode()
    fields["table"] = data[PIN_RESPONSE.size :]
    return fields


def _request(
    comm=0x42, ranks=1, nodes=1, member=7, version=PIN_PROTO_VERSION, magic=PIN_REQUEST_MAGIC
) -> bytes:
    return PIN_REQUEST.pack(magic, version, PIN_REQUEST.size, comm, ranks, nodes, member, 1000, 1234)


def test_single_rank_single_node_is_pinned_locally(server):
    answer = _ask(server.path, _request())
    assert answer["status"] == PinStatus.APPLY and answer["comm_id"] == 0x42
    assert answer["table"] == b"not-a-real-table" and answer["table_size"] == len(answer["table"])
    assert answer["reason"] == "pinned by hostT for all ranks"


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
        (_request(version=2), "pin protocol 1, not 2"),
        (_request(ranks=2, nodes=3), "invalid communicator size"),
        (_request(ranks=0, nodes=0), "invalid communicator size"),
        (_request(ranks=4, nodes=2), "no [nccl] pin_service configured"),
    ],
)
def test_refusals_are_neutral(server, payload, words):
    answer = _ask(server.path, payload)
    assert answer["status"] == PinStatus.NEUTRAL and words in answer["reason"]
    assert answer["table"] == b""


def test_not_the_plugin_gets_no_answer(server):
    assert _ask(server.path, _request(magic=0x12345678)) is None
    assert _ask(server.path, b"short") is None  # an incomplete request registers nothing


def test_long_reasons_are_cut_to_a_terminated_field(tmp_path):
    class Verbose(PinResolver):
        async def resolve(self, key, member):
            from netd.nccl.pins import PinVerdict

            return PinVerdict.neutral("é" * 200)

    srv = PinSocketServer(tmp_path / "v.sock", Verbose(PinAuthority(), None, lambda: None, "h"))
    srv.start()
    try:
        answer = _ask(srv.path, _request())
    finally:
        srv.close()
    assert answer["reason"] == "é" * 47  # 95 bytes at most, cut on a character boundary


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
