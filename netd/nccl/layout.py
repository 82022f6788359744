"""The hint table's bytes, mirrored from ``nccl_plugin/include/netd_hints.h`` (the pin protocol's
are in :mod:`netd.nccl.pin_wire`).

The C header is the one definition; this module restates it with :mod:`struct` formats, and
``tests/nccl/test_layout.py`` compiles a probe against the header and compares every size and
offset. Little-endian, naturally aligned, no implicit padding (``<`` formats, no ``x`` bytes).

A table is ``header`` (64 bytes) + ``entries[node bucket][collective][size bucket]`` (8 bytes
each), with the size and node buckets the plugin computes. The values (:class:`~netd.nccl.table.HintEntry`,
:class:`~netd.nccl.table.HintTable`) and their packing live in :mod:`netd.nccl.table`.
"""

from __future__ import annotations

import struct

__all__ = [
    "ALGORITHMS",
    "COLLECTIVES",
    "CRC_SPAN",
    "ENTRIES",
    "ENTRY",
    "ENTRY_FIELDS",
    "FORBID_BITS",
    "F_PIN",
    "HEADER",
    "HEADER_FIELDS",
    "LAYOUT_VERSION",
    "MAGIC",
    "MAX_CHANNELS",
    "NODE_BUCKETS",
    "PROTOCOLS",
    "SIZE_BUCKETS",
    "SIZE_LOG2_MIN",
    "TABLE_BYTES",
    "node_bucket",
    "node_bucket_nodes",
    "size_bucket",
    "size_bucket_range",
    "struct_of",
]

MAGIC = 0x5448444E  # "NDHT"
LAYOUT_VERSION = 1
COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")  # ncclFunc_t 0..4
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
SIZE_BUCKETS = 32
NODE_BUCKETS = 12
SIZE_LOG2_MIN = 10
MAX_CHANNELS = 64
FORBID_BITS = len(ALGORITHMS) * len(PROTOCOLS)
F_PIN = 0x01

# (name, struct code) in declaration order; test_layout.py checks them against the compiler.
ENTRY_FIELDS = (("algo", "b"), ("proto", "b"), ("n_channels", "B"), ("flags", "B"), ("forbid", "I"))
HEADER_FIELDS = (
    ("magic", "I"),
    ("layout_version", "H"),
    ("header_size", "H"),
    ("total_size", "I"),
    ("n_colls", "H"),
    ("n_size_buckets", "H"),
    ("n_node_buckets", "H"),
    ("entry_size", "H"),
    ("size_log2_min", "H"),
    ("flags", "H"),
    ("table_version", "Q"),
    ("generated_at_ns", "q"),
    ("valid_for_ms", "I"),
    ("reserved0", "I"),
    ("producer", "Q"),
    ("reserved1", "I"),
    ("crc32", "I"),
)


def struct_of(fields: tuple[tuple[str, str], ...]) -> struct.Struct:
    """A little-endian struct for (name, code) fields in declaration order."""
    return struct.Struct("<" + "".join(code for _, code in fields))


ENTRY = struct_of(ENTRY_FIELDS)
HEADER = struct_of(HEADER_FIELDS)
ENTRIES = NODE_BUCKETS * len(COLLECTIVES) * SIZE_BUCKETS
TABLE_BYTES = HEADER.size + ENTRIES * ENTRY.size
CRC_SPAN = HEADER.size - 4  # the header's bytes before its crc32 field


def size_bucket(n_bytes: int) -> int:
    """The plugin's size bucket: floor(log2(n)) - 9, clamped to 0..31 (bucket 0: below 1 KiB)."""
    return min(max((max(n_bytes, 1)).bit_length() - 1 - (SIZE_LOG2_MIN - 1), 0), SIZE_BUCKETS - 1)


def size_bucket_range(bucket: int) -> tuple[int, int | None]:
    """[low, high) bytes of a size bucket; high is None for the last one."""
    low = 0 if bucket == 0 else 1 << (SIZE_LOG2_MIN - 1 + bucket)
    high = None if bucket == SIZE_BUCKETS - 1 else 1 << (SIZE_LOG2_MIN + bucket)
    return low, high


def node_bucket(n_nodes: int) -> int:
    """ceil(log2(nNodes)), clamped to 0..11: 1 -> 0, 2 -> 1, 3..4 -> 2, ..., 1025+ -> 11."""
    return 0 if n_nodes <= 1 else min((n_nodes - 1).bit_length(), NODE_BUCKETS - 1)


def node_bucket_nodes(bucket: int) -> int:
    """The largest node count of a bucket (the one the policy models for it)."""
    return 1 << bucket
