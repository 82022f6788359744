"""The pin protocol's bytes (plugin <-> netd over the Unix socket), mirrored from netd_hints.h.

One request per connection: ``netd_pin_request`` (48 bytes) in; ``netd_pin_response`` (128 bytes)
and, on APPLY, the table out. tests/nccl/test_layout.py checks these against the compiler.
"""

from __future__ import annotations

from enum import IntEnum

from netd.nccl.layout import struct_of

__all__ = [
    "PIN_PROTO_VERSION",
    "PIN_REQUEST",
    "PIN_REQUEST_FIELDS",
    "PIN_REQUEST_MAGIC",
    "PIN_RESPONSE",
    "PIN_RESPONSE_FIELDS",
    "PIN_RESPONSE_MAGIC",
    "PinStatus",
]

PIN_REQUEST_FIELDS = (
    ("magic", "I"),
    ("version", "H"),
    ("size", "H"),
    ("comm_id", "Q"),
    ("n_ranks", "Q"),
    ("n_nodes", "Q"),
    ("member", "Q"),
    ("timeout_ms", "I"),
    ("pid", "I"),
)
PIN_RESPONSE_FIELDS = (
    ("magic", "I"),
    ("version", "H"),
    ("size", "H"),
    ("status", "I"),
    ("table_size", "I"),
    ("comm_id", "Q"),
    ("pinned_at_ns", "q"),
    ("reason", "96s"),
)
PIN_REQUEST = struct_of(PIN_REQUEST_FIELDS)
PIN_RESPONSE = struct_of(PIN_RESPONSE_FIELDS)
PIN_REQUEST_MAGIC = 0x51504E44  # "DNPQ"
PIN_RESPONSE_MAGIC = 0x52504E44  # "DNPR"
PIN_PROTO_VERSION = 1


class PinStatus(IntEnum):
    APPLY = 0  # every rank registered in time: use the table that follows
    NEUTRAL = 1  # the pin could not complete: leave NCCL untouched (every rank does)
    FAIL = 2  # this member cannot know the verdict: the plugin fails init
