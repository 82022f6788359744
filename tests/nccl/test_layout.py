"""The C header and the Python mirror agree: compile a probe against netd_hints.h and compare."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from netd.errors import HintTableError
from netd.nccl import layout, pin_wire
from netd.nccl.table import HintEntry, HintTable, pack_table, unpack_table

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "nccl_plugin"


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict:
    exe = tmp_path_factory.mktemp("probe") / "layout_probe"
    subprocess.run(
        [
            "gcc",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
            str(PLUGIN / "include"),
            str(PLUGIN / "tests" / "layout_probe.c"),
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
    )
    return json.loads(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)


def _offsets(fields: tuple[tuple[str, str], ...]) -> dict[str, list[int]]:
    out, offset = {}, 0
    for name, code in fields:
        size = layout.struct.calcsize("<" + code)
        out[name] = [offset, size]
        offset += size
    return out


@pytest.mark.parametrize(
    ("c_name", "fields", "packer"),
    [
        ("netd_hint_entry", layout.ENTRY_FIELDS, layout.ENTRY),
        ("netd_hints_header", layout.HEADER_FIELDS, layout.HEADER),
        ("netd_pin_request", pin_wire.PIN_REQUEST_FIELDS, pin_wire.PIN_REQUEST),
        ("netd_pin_response", pin_wire.PIN_RESPONSE_FIELDS, pin_wire.PIN_RESPONSE),
        ("netd_pin_ack", pin_wire.PIN_ACK_FIELDS, pin_wire.PIN_ACK),
    ],
)
def test_struct_layout_matches_the_compiler(probe, c_name, fields, packer):
    c = probe[c_name]
    assert c["size"] == packer.size, f"{c_name}: C {c['size']} bytes, Python {packer.size}"
    assert c["fields"] == _offsets(fields), f"{c_name}: field order, offsets or sizes differ"
    assert sum(size for _, size in c["fields"].values()) == c["size"], "implicit padding in C"


def test_constants_match(probe):
    k = probe["constants"]
    assert k["NETD_HINTS_MAGIC"] == layout.MAGIC
    assert k["NETD_HINTS_LAYOUT_VERSION"] == layout.LAYOUT_VERSION
    assert k["NETD_HINTS_NUM_COLLS"] == len(layout.COLLECTIVES)
    assert k["NETD_HINTS_NUM_SIZE_BUCKETS"] == layout.SIZE_BUCKETS
    assert k["NETD_HINTS_NUM_NODE_BUCKETS"] == layout.NODE_BUCKETS
    assert k["NETD_HINTS_SIZE_LOG2_MIN"] == layout.SIZE_LOG2_MIN
    assert k["NETD_HINTS_NUM_ALGOS"] == len(layout.ALGORITHMS)
    assert k["NETD_HINTS_NUM_PROTOS"] == len(layout.PROTOCOLS)
    assert k["NETD_HINTS_FORBID_BITS"] == layout.FORBID_BITS
    assert k["NETD_HINTS_MAX_CHANNELS"] == layout.MAX_CHANNELS
    assert k["NETD_HINTS_ENTRIES"] == layout.ENTRIES
    assert k["NETD_HINTS_TABLE_BYTES"] == layout.TABLE_BYTES == len(pack_table(HintTable()))
    assert k["NETD_HINT_F_PIN"] == layout.F_PIN
    assert k["NETD_PIN_REQUEST_MAGIC"] == pin_wire.PIN_REQUEST_MAGIC
    assert k["NETD_PIN_RESPONSE_MAGIC"] == pin_wire.PIN_RESPONSE_MAGIC
    assert k["NETD_PIN_PROTO_VERSION"] == pin_wire.PIN_PROTO_VERSION
    assert k["NETD_PIN_ACK_MAGIC"] == pin_wire.PIN_ACK_MAGIC
    assert k["NETD_PIN_MAX_MESSAGE"] == pin_wire.PIN_MAX_MESSAGE
    assert k["NETD_PIN_REASON_LEN"] == pin_wire.PIN_RESPONSE.size - 48
    assert [k["NETD_PIN_APPLY"], k["NETD_PIN_NEUTRAL"], k["NETD_PIN_FAIL"]] == [
        s.value for s in pin_wire.PinStatus
    ]


def test_buckets_match_the_plugin_definition():
    assert [
        layout.size_bucket(n)
        for n in (0, 1, 1023, 1024, 2047, 2048, 1 << 20, (1 << 40) - 1, 1 << 40, 1 << 62)
    ] == [0, 0, 0, 1, 1, 2, 11, 30, 31, 31]
    assert [layout.node_bucket(n) for n in (0, 1, 2, 3, 4, 5, 1024, 1025, 10**6)] == [
        0,
        0,
        1,
        2,
        2,
        3,
        10,
        11,
        11,
    ]
    for b in range(layout.SIZE_BUCKETS):
        low, high = layout.size_bucket_range(b)
        assert layout.size_bucket(low) == b
        if high is not None:
            assert layout.size_bucket(high - 1) == b and layout.size_bucket(high) == b + 1


def test_roundtrip_and_every_corruption():
    entries = [[list(c) for c in n] for n in HintTable().entries]
    entries[1][4][11] = HintEntry.prefer(0, (1,))
    entries[3][2][5] = HintEntry(algo=6, proto=2, flags=layout.F_PIN, n_channels=8)
    table = HintTable(tuple(tuple(tuple(c) for c in n) for n in entries), 1_700_000_000 * 10**9, 30_000, 7)
    data = pack_table(table)
    assert unpack_table(data) == table
    assert table.hint_count() == 2
    assert table.entry(2, "allreduce", 1 << 20).describe() == "prefer tree; forbid ring"
    for cut in (0, 10, 63, len(data) - 1):
        with pytest.raises(HintTableError):
            unpack_table(data[:cut])
    for offset in (0, 4, 12, 22, 44, 56, 61, 64 + 8 * 100, len(data) - 1):
        bad = bytearray(data)
        bad[offset] ^= 0x40
        with pytest.raises(HintTableError):
            unpack_table(bytes(bad))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(algo=7),
        dict(proto=3, algo=1),
        dict(n_channels=65, algo=1),
        dict(flags=2, algo=1),
        dict(forbid=1 << 21),
        dict(flags=layout.F_PIN),
        dict(proto=1),
        dict(n_channels=4),
    ],
)
def test_invalid_entries_are_refused(kwargs):
    with pytest.raises(HintTableError):
        HintEntry(**kwargs)
