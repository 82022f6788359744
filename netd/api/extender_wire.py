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

from dataclasses import dataclass

import msgspec
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from netd.api.extender_types import ExtenderArgs
from netd.api.problems import MAX_DEPTH

__all__ = ["Candidates", "encode_filter", "encode_priorities", "read_args"]


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


def _slow(body: bytes) -> Candidates:
    """pydantic's reading: any key case, and a 422 naming the failing field."""
    try:
        args = ExtenderArgs.model_validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors(include_input=False)]
        ) from exc
    meta = args.Pod.metadata
    names = args.candidates()
    return Candidates(meta.name, meta.labels or {}, meta.annotations or {}, names, None)


def read_args(body: bytes) -> Candidates:
    """The pod's metadata and the candidate names from an ``ExtenderArgs`` body."""
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


def encode_filter(asked: Candidates, passed: list[str], failed: dict[str, str]) -> bytes:
    """``ExtenderFilterResult``: NodeNames when asked with names, else the passing Node objects as sent.

    Built as one list of parts joined once: the Node objects are the request's own bytes (25 MB at
    5000 nodes), and every intermediate copy of them cost tens of milliseconds."""
    tail = b',"FailedNodes":{},"FailedAndUnresolvableNodes":%s,"Error":""}' % _ENC.encode(failed)
    if asked.node_list is None:
        return b'{"Nodes":null,"NodeNames":%s%s' % (_ENC.encode(passed), tail)
    nl = asked.node_list
    parts: list[bytes | msgspec.Raw] = [b'{"Nodes":{']
    for key, value in (("apiVersion", nl.apiVersion), ("kind", nl.kind), ("metadata", nl.metadata)):
        if len(value):
            parts += [b'"%s":' % key.encode(), value, b","]
    parts.append(b'"items":[')
    keep = set(passed)
    first = True
    for raw, name in zip(nl.items or (), asked.names, strict=True):
        if name in keep:
            if not first:
                parts.append(b",")
            parts.append(raw)
            first = False
    parts += [b']},"NodeNames":null', tail]
    return b"".join(parts)  # msgspec.Raw is a buffer: joined without a copy of its own


def encode_priorities(scores: list[tuple[str, int]]) -> bytes:
    """``HostPriorityList``."""
    return _ENC.encode([{"Host": name, "Score": score} for name, score in scores])
