"""The extender's fast path: read only what the scheduler routes need from kube-scheduler's JSON, and
write the answers as bytes.

A 5000-node ``v1.NodeList`` is ~25 MB; building Python objects for all of it (json + pydantic) took
0.8 s and held the interpreter lock throughout, so /healthz stalled behind it. msgspec decodes into
typed structs and skips every field it is not asked for at C speed: the node objects stay as
:class:`msgspec.Raw` byte slices of the request (their names are decoded from each slice), and the
filter echoes the passing ones back byte for byte, as the protocol requires ("unchanged").

Anything the fast path cannot read as the canonical shape (other key cases than the common ones, a
node without a name, a wrong type) is handed to the pydantic models of netd.api.extender_types,
which accept every case Go accepts and name the failing field in a 422.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import msgspec
import numpy as np
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from netd.api.extender_types import ExtenderArgs
from netd.api.problems import MAX_DEPTH

__all__ = [
    "Buffer",
    "Candidates",
    "Part",
    "encode_filter",
    "encode_priorities",
    "filter_parts",
    "pack_parts",
    "read_args",
    "unpack_parts",
]


class _Meta(msgspec.Struct):
    name: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class _Pod(msgspec.Struct):
    metadata: _Meta | None = None


class _NodeMeta(msgspec.Struct):
    name: str = ""


class _Node(msgspec.Struct):
    metadata: _NodeMeta | None = None


class _NodeList(msgspec.Struct):
    # kept as the request's own bytes (an empty Raw: absent)
    apiVersion: msgspec.Raw = msgspec.Raw(b"")
    kind: msgspec.Raw = msgspec.Raw(b"")
    metadata: msgspec.Raw = msgspec.Raw(b"")
    items: list[msgspec.Raw] | None = None


class _Args(msgspec.Struct):
    # Go matches keys case-insensitively; these are the spellings clients send (others: slow path)
    Pod: _Pod | None = None
    pod: _Pod | None = None
    Nodes: _NodeList | None = None
    nodes: _NodeList | None = None
    NodeNames: list[str] | None = None
    nodenames: list[str] | None = None
    nodeNames: list[str] | None = None


Buffer = bytes | bytearray | memoryview | mmap.mmap  # a request body, in memory or mapped
_ARGS = msgspec.json.Decoder(_Args)
_NODE = msgspec.json.Decoder(_Node)


@dataclass(frozen=True, slots=True)
class Candidates:
    pod_name: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    names: list[str]
    node_list: _NodeList | None  # set when asked with full Nodes (not nodeCacheCapable)

    def group(self, label: str) -> str | None:
        return self.labels.get(label) or self.annotations.get(label) or None


def _slow(body: Buffer) -> Candidates:
    """pydantic's reading: any key case, and a 422 naming the failing field."""
    try:
        args = ExtenderArgs.model_validate_json(body if isinstance(body, bytes | bytearray) else bytes(body))
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors(include_input=False)]
        ) from exc
    meta = args.Pod.metadata
    names = args.candidates()
    node_list = _node_list_any_case(body) if args.NodeNames is None else None
    return Candidates(meta.name, meta.labels or {}, meta.annotations or {}, names, node_list)


def _node_list_any_case(body: Buffer) -> _NodeList | None:
    """The request's full ``Nodes``, its keys spelt in any case (the slow path's: re-encoded, so the
    objects answered are JSON-equal to those sent rather than their bytes), so that a filter asked
    with Node objects answers Node objects however the client spells the keys."""
    doc = msgspec.json.decode(body if isinstance(body, bytes | bytearray) else bytes(body))
    nodes = next((v for k, v in doc.items() if k.lower() == "nodes"), None) if isinstance(doc, dict) else None
    if not isinstance(nodes, dict):
        return None
    fields = {k.lower(): v for k, v in nodes.items()}

    def raw(key: str) -> msgspec.Raw:
        return msgspec.Raw(_ENC.encode(fields[key])) if key in fields else msgspec.Raw(b"")

    items = fields.get("items")
    return _NodeList(
        apiVersion=raw("apiversion"),
        kind=raw("kind"),
        metadata=raw("metadata"),
        items=[msgspec.Raw(_ENC.encode(item)) for item in items] if isinstance(items, list) else None,
    )


def read_args(body: Buffer) -> Candidates:
    """The pod's metadata and the candidate names from an ``ExtenderArgs`` body (a mapped body is read
    where it lies: the Node objects stay views of it)."""
    try:
        args = _ARGS.decode(body)
    except RecursionError as exc:  # msgspec's stack ends at ~1000 levels of a decoded value
        raise HTTPException(400, f"request nested deeper than {MAX_DEPTH} levels") from exc
    except msgspec.DecodeError:
        return _slow(body)
    pod = args.Pod or args.pod
    nodes = args.Nodes or args.nodes
    node_names = args.NodeNames if args.NodeNames is not None else (args.nodenames or args.nodeNames)
    if pod is None or (nodes is None and node_names is None):
        return _slow(body)
    meta = pod.metadata or _Meta()
    if node_names is not None:
        return Candidates(meta.name, meta.labels or {}, meta.annotations or {}, node_names, None)
    assert nodes is not None
    names = []
    for raw in nodes.items or ():
        node = _NODE.decode(raw)
        if node.metadata is None or not node.metadata.name:
            return _slow(body)  # the models name the item that has no name
        names.append(node.metadata.name)
    return Candidates(meta.name, meta.labels or {}, meta.annotations or {}, names, nodes)


_ENC = msgspec.json.Encoder()

Part = bytes | tuple[int, int]  # bytes of the answer, or a (start, end) slice of the request body


def _offset(raw: msgspec.Raw, base: int, body: Buffer) -> int | None:
    """Where ``raw`` starts in ``body`` (msgspec's Raw is a view into the buffer it was decoded from);
    None if it is not there (then its bytes are written out)."""
    view = memoryview(raw)
    at = int(np.frombuffer(view, np.uint8).ctypes.data) - base
    end = at + len(view)
    if len(view) and 0 <= at and end <= len(body) and body[at] == view[0] and body[end - 1] == view[-1]:
        return at
    return None


def filter_parts(asked: Candidates, passed: list[str], failed: dict[str, str], body: Buffer) -> list[Part]:
    """``ExtenderFilterResult`` as parts: NodeNames when asked with names, else the passing Node objects
    as sent, each run of consecutive passing nodes one slice of ``body`` (the buffer ``asked`` was read
    from) from its first node's first byte to its last node's last (the commas between them are the
    request's). At 5000 nodes the answer is ~25 MB, almost all of it the request's own bytes: as
    slices, nobody copies them into an answer (the listener writes them to the client as they are)."""
    tail = b',"FailedNodes":{},"FailedAndUnresolvableNodes":%s,"Error":""}' % _ENC.encode(failed)
    if asked.node_list is None:
        return [b'{"Nodes":null,"NodeNames":%s%s' % (_ENC.encode(passed), tail)]
    nl = asked.node_list
    head = [b'{"Nodes":{']
    for key, value in (("apiVersion", nl.apiVersion), ("kind", nl.kind), ("metadata", nl.metadata)):
        if len(value):
            head += [b'"%s":' % key.encode(), bytes(value), b","]
    head.append(b'"items":[')
    parts: list[Part] = [b"".join(head)]
    base = int(np.frombuffer(body, np.uint8).ctypes.data) if len(body) else 0
    items = nl.items or []
    keep = set(passed)
    i, first = 0, True
    while i < len(items):
        if asked.names[i] not in keep:
            i += 1
            continue
        j = i
        while j + 1 < len(items) and asked.names[j + 1] in keep:
            j += 1
        if not first:
            parts.append(b",")
        first = False
        start, last = _offset(items[i], base, body), _offset(items[j], base, body)
        if start is None or last is None:  # not a view of body: the run's objects written out
            parts.append(b",".join(bytes(r) for r in items[i : j + 1]))
        else:
            parts.append((start, last + len(items[j])))
        i = j + 1
    parts.append(b']},"NodeNames":null' + tail)
    return parts


def pack_parts(parts: list[Part]) -> tuple[list[int], bytes]:
    """(plan, literals) to send ``parts`` as: the plan is [literal bytes before it, start, end] per
    slice, flattened; the literals are every bytes part in order."""
    plan: list[int] = []
    literal = 0
    for part in parts:
        if isinstance(part, tuple):
            plan += [literal, *part]
            literal = 0
        else:
            literal += len(part)
    return plan, b"".join(p for p in parts if isinstance(p, bytes))


def unpack_parts(plan: list[int], literals: Buffer, body: Buffer) -> list[memoryview]:
    """The answer's pieces (views of ``literals`` and of ``body``), in order."""
    lit, src = memoryview(literals), memoryview(body)
    out, at = [], 0
    for k in range(0, len(plan), 3):
        n, start, end = plan[k : k + 3]
        if not 0 <= start <= end <= len(src):
            raise ValueError(f"extender answer slice {start}:{end} outside a {len(src)}-byte body")
        if n:
            out.append(lit[at : at + n])
            at += n
        out.append(src[start:end])
    if at < len(lit):
        out.append(lit[at:])
    return out


def encode_filter(asked: Candidates, passed: list[str], failed: dict[str, str], body: Buffer) -> bytes:
    """:func:`filter_parts` joined into one answer."""
    plan, literals = pack_parts(filter_parts(asked, passed, failed, body))
    return b"".join(unpack_parts(plan, literals, body))


def encode_priorities(scores: list[tuple[str, int]]) -> bytes:
    """``HostPriorityList``."""
    return _ENC.encode([{"Host": name, "Score": score} for name, score in scores])
