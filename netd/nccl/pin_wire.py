"""The pin protocol's bytes (plugin <-> netd over the Unix socket), mirrored from netd_hints.h.

One request per connection: ``netd_pin_request`` (72 bytes) in; ``netd_pin_ack`` (8 bytes) when
netd may register the rank, then ``netd_pin_response`` (128 bytes) and, on APPLY, the table out.
Every message of every version starts with (magic, version, size): a peer of another version is
answered NEUTRAL in a layout it reads (protocol 1's response for protocol-1 plugins), never
registered. tests/nccl/test_layout.py checks these against the compiler.
"""

from __future__ import annotations

from enum import IntEnum

from netd.nccl.layout import struct_of

__all__ = [
    "PIN_ACK",
    "PIN_ACK_FIELDS",
    "PIN_ACK_MAGIC",
    "PIN_MAX_MESSAGE",
    "PIN_PREFIX",
    "PIN_PROTO_VERSION",
    "PIN_REQUEST",
    "PIN_REQUEST_FIELDS",
    "PIN_REQUEST_MAGIC",
    "PIN_RESPONSE",
    "PIN_RESPONSE_FIELDS",
    "PIN_RESPONSE_MAGIC",
    "PIN_RESPONSE_V1",
    "PinStatus",
]

PIN_PREFIX = struct_of((("magic", "I"), ("version", "H"), ("size", "H")))
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
    ("register_by_ns", "q"),
    ("deadline_ns", "q"),
    ("static_digest", "Q"),
)
PIN_ACK_FIELDS = (("magic", "I"), ("version", "H"), ("size", "H"))
# protocols 1 and 2 share the response's head; 2 adds the generation and digest before the reason
_RESPONSE_HEAD = (
    ("magic", "I"),
    ("version", "H"),
    ("size", "H"),
    ("status", "I"),
    ("table_size", "I"),
    ("comm_id", "Q"),
    ("pinned_at_ns", "q"),
)
PIN_RESPONSE_FIELDS = (*_RESPONSE_HEAD, ("generation", "Q"), ("table_digest", "Q"), ("reason", "80s"))
PIN_REQUEST = struct_of(PIN_REQUEST_FIELDS)
PIN_ACK = struct_of(PIN_ACK_FIELDS)
PIN_RESPONSE = struct_of(PIN_RESPONSE_FIELDS)
# Protocol 1's response (netd 0.x plugins): magic, version, size, status, table_size, comm_id,
# pinned_at_ns, reason[96]. Only ever sent as NEUTRAL, to tell an old plugin "not registered".
PIN_RESPONSE_V1 = struct_of((*_RESPONSE_HEAD, ("reason", "96s")))
PIN_REQUEST_MAGIC = 0x51504E44  # "DNPQ"
PIN_ACK_MAGIC = 0x41504E44  # "DNPA"
PIN_RESPONSE_MAGIC = 0x52504E44  # "DNPR"
PIN_PROTO_VERSION = 2
PIN_MAX_MESSAGE = 4096  # netd reads at most this many request bytes of any version


class PinStatus(IntEnum):
    APPLY = 0  # every rank registered in time: use the table that follows
    NEUTRAL = 1  # the pin could not complete: leave NCCL untouched (every rank does)
    FAIL = 2  # maybe registered, no verdict: the plugin leaves NCCL alone and warns (never fails init)
