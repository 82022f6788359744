"""The BTF reader on a hand-built blob (anonymous members, bitfields, tracepoint prototypes) and on the
running kernel's BTF where there is one."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from netd.errors import SourceError
from netd.sources.bpf_btf import VMLINUX_BTF, Btf, load_btf

INT, PTR, STRUCT, UNION, TYPEDEF, FUNC, FUNC_PROTO = 1, 2, 4, 5, 8, 12, 13


class Blob:
    """Writes BTF: strings, then types (ids from 1), then the header."""

    def __init__(self) -> None:
        self.strings = b"\0"
        self.types = b""

    def s(self, text: str) -> int:
        if not text:
            return 0
        off = len(self.strings)
        self.strings += text.encode() + b"\0"
        return off

    def t(
        self, name: str, kind: int, vlen: int, size_or_type: int, extra: bytes = b"", kflag: bool = False
    ) -> None:
        info = (kind << 24) | vlen | (1 << 31 if kflag else 0)
        self.types += struct.pack("<III", self.s(name), info, size_or_type) + extra

    def members(self, *items: tuple[str, int, int]) -> bytes:
        return b"".join(struct.pack("<III", self.s(n), t, off) for n, t, off in items)

    def build(self) -> bytes:
        header = struct.pack(
            "<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(self.types), len(self.types), len(self.strings)
        )
        return header + self.types + self.strings


def sample_btf() -> bytes:
    b = Blob()
    b.t("int", INT, 0, 4, struct.pack("<I", 32))  # 1
    b.t("", STRUCT, 2, 8, b.members(("a", 1, 0), ("b", 1, 32)))  # 2: anonymous struct
    b.t("", UNION, 2, 8, b.members(("x", 1, 0), ("", 2, 0)))  # 3: anonymous union holding it
    b.t("outer", STRUCT, 2, 16, b.members(("head", 1, 0), ("", 3, 64)))  # 4
    b.t("", FUNC_PROTO, 3, 1, struct.pack("<II", 0, 6) * 3)  # 5: (void *data, x, y)
    b.t("", PTR, 0, 5)  # 6
    b.t("btf_trace_my_event", TYPEDEF, 0, 6)  # 7
    b.t("my_func", FUNC, 0, 5)  # 8
    b.t(
        "bits", STRUCT, 2, 4, b.members(("low", 1, (3 << 24) | 0), ("flags", 1, (5 << 24) | 8)), kflag=True
    )  # 9
    return b.build()


def test_offsets_through_anonymous_members_and_bitfields() -> None:
    btf = Btf(sample_btf())
    assert btf.member_offset("outer", "head") == 0
    assert btf.member_offset("outer", "x") == 8
    assert btf.member_offset("outer", "a") == 8
    assert btf.member_offset("outer", "b") == 12
    assert btf.member_offset("bits", "flags") == 1
    assert btf.member_offset("outer", "missing") is None
    assert btf.member_offset("nope", "head") is None


def test_functions_and_tracepoints() -> None:
    btf = Btf(sample_btf())
    assert btf.has_func("my_func") and not btf.has_func("outer")
    assert btf.has_tracepoint("my_event") and not btf.has_tracepoint("other")
    assert btf.tracepoint_args("my_event") == 2 and btf.tracepoint_args("other") is None


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\0" * 10, "too short"),
        (struct.pack("<HBBI", 0x1234, 1, 0, 24) + bytes(16), "not BTF"),
        (sample_btf()[:-8], "past the end"),
    ],
)
def test_corrupt_blobs_are_refused(blob: bytes, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        Btf(blob)


def test_missing_btf_is_absent(tmp_path: Path) -> None:
    assert load_btf(tmp_path / "vmlinux") is None


@pytest.mark.skipif(not VMLINUX_BTF.exists(), reason="kernel without BTF")
def test_running_kernel_struct_sock() -> None:
    btf = load_btf()
    assert btf is not None
    # skc_daddr opens struct sock_common on every kernel since 2.6 (with skc_rcv_saddr after it)
    assert btf.member_offset("sock_common", "skc_daddr") == 0
    assert btf.member_offset("sock_common", "skc_rcv_saddr") == 4
    assert btf.has_tracepoint("tcp_retransmit_skb")
