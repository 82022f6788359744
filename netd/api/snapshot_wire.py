"""A :class:`ClusterSnapshot` across a process boundary, from netd fabric's view process to its listener.

The listener must take a new 5000-node snapshot without holding the interpreter lock for long: every
request it serves meanwhile waits for the lock (issue 18). So the sender encodes everything once —
the topology, the congestion report and the extender's score table — and the receiver keeps the bytes:
the score table goes to the extender's workers as it is, and the topology and report are
:class:`Deferred`, decoded (~50-60 ms each at 40,000 ports) only when a route first asks for them.

Decoded values are the same dataclasses with plain ``dict`` maps where the sender had read-only
``MappingProxyType`` ones; nothing in netd writes to them.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import msgspec

from netd.api.extender_wire import Buffer
from netd.api.extender_worker import encode_scores
from netd.api.heap import SettledHeap
from netd.api.service_view import ClusterSnapshot, Deferred, EncodedScores
from netd.congestion.scorer import CongestionReport
from netd.model.topology import Topology

__all__ = ["decode_snapshot", "encode_snapshot"]


def _plain(obj: Any) -> Any:
    """msgspec's ``enc_hook``: the report's read-only maps as dicts; any other type is a bug in what
    a view put in its snapshot, found at once (TypeError, naming the type)."""
    if isinstance(obj, MappingProxyType):
        return dict(obj)
    raise TypeError(f"a snapshot cannot carry a {type(obj).__name__}")


_ENC = msgspec.msgpack.Encoder(enc_hook=_plain)
_REPORT = msgspec.msgpack.Decoder(CongestionReport | None)
_TOPOLOGY = msgspec.msgpack.Decoder(Topology | None)
_HEAP = SettledHeap()  # a decoded report is ~250,000 objects: kept out of the collector's way


def encode_snapshot(snap: ClusterSnapshot, same_data: bool = False) -> tuple[dict[str, Any], bytes]:
    """(meta, payload). ``same_data``: the receiver already has this snapshot's topology and report
    (a failed refresh serving the last good view with a new note): only the meta is sent."""
    meta: dict[str, Any] = {
        "view": snap.view,
        "timestamp": snap.timestamp,
        "emulated": snap.emulated,
        "note": snap.note,
        "same": same_data,
    }
    if same_data:
        return meta, b""
    report = snap.congestion
    parts = [
        b"" if report is None else encode_scores(report),
        _ENC.encode(report),
        _ENC.encode(snap.topology),
    ]
    meta["sizes"] = list(map(len, parts))
    meta["ports"] = 0 if report is None else len(report.ports)
    return meta, b"".join(parts)


def decode_snapshot(
    meta: dict[str, Any], payload: Buffer, previous: ClusterSnapshot | None
) -> ClusterSnapshot:
    """The snapshot ``meta`` and ``payload`` describe, its topology and report decoded on first use.
    ``previous``: the last one decoded (what a ``same`` snapshot shares)."""
    view, timestamp, emulated, note = meta["view"], meta["timestamp"], meta["emulated"], meta["note"]
    if meta["same"]:
        if previous is None:
            raise ValueError("a snapshot that repeats the previous one's data came first")
        return previous.with_note(note)
    whole = memoryview(payload)
    a, b, c = meta["sizes"]
    scores_part, report_part, topology_part = whole[:a], whole[a : a + b], whole[a + b : a + b + c]
    ports = meta["ports"]

    def report() -> CongestionReport | None:
        with _HEAP.refresh() as settle:
            settle.ports = ports
            decoded: CongestionReport | None = _REPORT.decode(report_part)
            return decoded

    def topology() -> Topology | None:
        with _HEAP.refresh() as settle:
            settle.ports = ports
            decoded: Topology | None = _TOPOLOGY.decode(topology_part)
            return decoded

    scores = EncodedScores(ports, scores_part) if a else None  # not copied: forwarded as it is
    return ClusterSnapshot(view, timestamp, emulated, Deferred(topology), Deferred(report), note, scores)
