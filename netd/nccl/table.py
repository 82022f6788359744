"""Hint tables as values: :class:`HintEntry`, :class:`HintTable`, and their bytes (netd_hints.h).

:func:`pack_table` writes what the plugin reads; :func:`unpack_table` reads a table back with the
same checks the plugin makes (structure, dimensions, CRC-32, every entry), so a table netd accepts
is one the plugin accepts.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass, field

from netd.errors import HintTableError
from netd.nccl.layout import (
    ALGORITHMS,
    COLLECTIVES,
    CRC_SPAN,
    ENTRY,
    F_PIN,
    FORBID_BITS,
    HEADER,
    HEADER_FIELDS,
    LAYOUT_VERSION,
    MAGIC,
    MAX_CHANNELS,
    NODE_BUCKETS,
    PROTOCOLS,
    SIZE_BUCKETS,
    SIZE_LOG2_MIN,
    TABLE_BYTES,
    node_bucket,
    size_bucket,
)

__all__ = ["NO_HINT", "HintEntry", "HintTable", "pack_table", "unpack_table"]


@dataclass(frozen=True, slots=True)
class HintEntry:
    """One hint; see netd_hints.h for how the plugin applies it."""

    algo: int = -1  # index into ALGORITHMS, or -1: no preference
    proto: int = -1  # index into PROTOCOLS, or -1: any protocol of algo
    n_channels: int = 0  # 0: NCCL decides
    flags: int = 0  # F_PIN: force the preferred pair (cost 0.0)
    forbid: int = 0  # bit a*3+p forbids (a, p)

    def __post_init__(self) -> None:
        problem = _entry_problem(self)
        if problem:
            raise HintTableError(f"invalid hint entry {self}: {problem}")

    @property
    def empty(self) -> bool:
        return self.algo < 0 and self.forbid == 0

    @staticmethod
    def prefer(algo: int, losers: tuple[int, ...]) -> HintEntry:
        """Soft preference: forbid every protocol of each loser, applied only where algo is available."""
        return HintEntry(algo=algo, forbid=sum(0b111 << (3 * a) for a in set(losers)))

    def describe(self) -> str:
        if self.empty:
            return "-"
        parts = []
        if self.algo >= 0:
            pair = ALGORITHMS[self.algo] + (f"/{PROTOCOLS[self.proto]}" if self.proto >= 0 else "")
            parts.append(("pin " if self.flags & F_PIN else "prefer ") + pair)
        gone = [
            f"{ALGORITHMS[b // 3]}/{PROTOCOLS[b % 3]}" for b in range(FORBID_BITS) if self.forbid >> b & 1
        ]
        whole = [a for a in range(len(ALGORITHMS)) if self.forbid >> (3 * a) & 0b111 == 0b111]
        if gone:
            named = [ALGORITHMS[a] for a in whole]
            named += [g for g in gone if ALGORITHMS.index(g.split("/")[0]) not in whole]
            parts.append("forbid " + ",".join(named))
        if self.n_channels:
            parts.append(f"{self.n_channels} channels")
        return "; ".join(parts)


def _entry_problem(e: HintEntry) -> str | None:
    if not -1 <= e.algo < len(ALGORITHMS):
        return "algo out of range"
    if not -1 <= e.proto < len(PROTOCOLS):
        return "proto out of range"
    if not 0 <= e.n_channels <= MAX_CHANNELS:
        return f"n_channels must be 0..{MAX_CHANNELS}"
    if e.flags & ~F_PIN:
        return "unknown flags"
    if not 0 <= e.forbid < 1 << FORBID_BITS:
        return f"forbid uses bits beyond {FORBID_BITS}"
    if e.flags & F_PIN and e.algo < 0:
        return "a pin needs an algorithm"
    if e.proto >= 0 and e.algo < 0:
        return "a protocol needs its algorithm"
    if e.n_channels and e.algo < 0 and e.forbid == 0:
        return "channels without a hint"
    return None


NO_HINT = HintEntry()


def _empty_entries() -> tuple[tuple[tuple[HintEntry, ...], ...], ...]:
    row = (NO_HINT,) * SIZE_BUCKETS
    return tuple(tuple(row for _ in COLLECTIVES) for _ in range(NODE_BUCKETS))


@dataclass(frozen=True, slots=True)
class HintTable:
    """A whole table: ``entries[node_bucket][collective][size_bucket]``."""

    entries: tuple[tuple[tuple[HintEntry, ...], ...], ...] = field(default_factory=_empty_entries)
    generated_at_ns: int = 0
    valid_for_ms: int = 0  # 0: never stale (static tables)
    producer: int = 0

    def __post_init__(self) -> None:
        shape = (len(self.entries), {len(c) for c in self.entries}, {len(s) for c in self.entries for s in c})
        if shape != (NODE_BUCKETS, {len(COLLECTIVES)}, {SIZE_BUCKETS}):
            raise HintTableError(f"table shape must be {NODE_BUCKETS}x{len(COLLECTIVES)}x{SIZE_BUCKETS}")

    def entry(self, n_nodes: int, collective: str, n_bytes: int) -> HintEntry:
        return self.entries[node_bucket(n_nodes)][COLLECTIVES.index(collective)][size_bucket(n_bytes)]

    def hint_count(self) -> int:
        return sum(not e.empty for node in self.entries for coll in node for e in coll)

    def body(self) -> bytes:
        return b"".join(
            ENTRY.pack(e.algo, e.proto, e.n_channels, e.flags, e.forbid)
            for node in self.entries
            for coll in node
            for e in coll
        )

    @property
    def version(self) -> int:
        """First 8 bytes (little-endian) of SHA-256 over the entries: equal tables, equal versions."""
        return int.from_bytes(hashlib.sha256(self.body()).digest()[:8], "little")


def pack_table(table: HintTable) -> bytes:
    body = table.body()
    header = HEADER.pack(
        MAGIC,
        LAYOUT_VERSION,
        HEADER.size,
        TABLE_BYTES,
        len(COLLECTIVES),
        SIZE_BUCKETS,
        NODE_BUCKETS,
        ENTRY.size,
        SIZE_LOG2_MIN,
        0,
        table.version,
        table.generated_at_ns,
        table.valid_for_ms,
        0,
        table.producer,
        0,
        0,
    )
    crc = zlib.crc32(body, zlib.crc32(header[:CRC_SPAN]))
    return header[:CRC_SPAN] + struct.pack("<I", crc) + body


def unpack_table(data: bytes) -> HintTable:
    """Parse and check a table exactly as the plugin does; HintTableError says what is wrong."""
    if len(data) < HEADER.size:
        raise HintTableError(f"truncated: {len(data)} bytes, a header alone is {HEADER.size}")
    h = dict(zip((n for n, _ in HEADER_FIELDS), HEADER.unpack_from(data), strict=True))
    if h["magic"] != MAGIC:
        raise HintTableError(f"bad magic 0x{h['magic']:08x} (expected 0x{MAGIC:08x})")
    if h["layout_version"] != LAYOUT_VERSION:
        raise HintTableError(f"layout version {h['layout_version']}, netd reads {LAYOUT_VERSION}")
    expected = (HEADER.size, ENTRY.size, len(COLLECTIVES), SIZE_BUCKETS, NODE_BUCKETS, SIZE_LOG2_MIN)
    found = tuple(
        h[k]
        for k in ("header_size", "entry_size", "n_colls", "n_size_buckets", "n_node_buckets", "size_log2_min")
    )
    if found != expected:
        raise HintTableError(f"dimensions {found} differ from netd's {expected}")
    if h["flags"] or h["reserved0"] or h["reserved1"]:
        raise HintTableError("reserved fields are set")
    if h["total_size"] != TABLE_BYTES or len(data) != TABLE_BYTES:
        raise HintTableError(f"{len(data)} bytes (header says {h['total_size']}), expected {TABLE_BYTES}")
    crc = zlib.crc32(data[HEADER.size :], zlib.crc32(data[:CRC_SPAN]))
    if crc != h["crc32"]:
        raise HintTableError(f"CRC-32 0x{crc:08x} does not match the header's 0x{h['crc32']:08x}")
    flat = [HintEntry(*fields) for fields in ENTRY.iter_unpack(data[HEADER.size :])]
    per_node = len(COLLECTIVES) * SIZE_BUCKETS
    entries = tuple(
        tuple(
            tuple(flat[n * per_node + c * SIZE_BUCKETS : n * per_node + (c + 1) * SIZE_BUCKETS])
            for c in range(len(COLLECTIVES))
        )
        for n in range(NODE_BUCKETS)
    )
    table = HintTable(entries, h["generated_at_ns"], h["valid_for_ms"], h["producer"])
    if table.version != h["table_version"]:
        raise HintTableError("table_version does not match the entries")
    return table
