"""The JSON of ``POST /v1/nccl/pins``: what a daemon sends the pin service for its ranks, and the verdict.

One request per host and communicator: the daemon batches the members of its local ranks (small:
ids, counts, a budget) and sends its table once, so the service's work grows with hosts, not ranks.
64-bit ids travel as hex strings (JSON numbers above 2^53 lose precision in many clients) and the
table as base64 of the netd_hints.h bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from netd.nccl.layout import TABLE_BYTES
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinKey, PinVerdict

__all__ = [
    "UNLESS_OFFERED",
    "PinRequestBody",
    "PinResponseBody",
    "request_json",
    "response_body",
    "verdict_from_body",
]

_HEX64 = r"^[0-9a-fA-F]{1,16}$"
_MAX_TABLE_B64 = 4 * ((TABLE_BYTES + 2) // 3) + 4
MAX_MEMBERS = 1 << 16  # one host's ranks of one communicator


class PinRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comm_id: str = Field(pattern=_HEX64, description="NCCL's commId (comm->commHash), hex")
    n_ranks: int = Field(ge=1, le=1 << 24, description="ranks in the communicator")
    n_nodes: int = Field(ge=1, le=1 << 24, description="nodes in the communicator")
    members: list[Annotated[str, StringConstraints(pattern=_HEX64)]] = Field(
        min_length=1, max_length=MAX_MEMBERS, description="this host's ranks' random registration ids, hex"
    )
    host: str = Field("", max_length=255, description="the asking host (informative)")
    table: str | None = Field(None, max_length=_MAX_TABLE_B64, description="the asker's hint table, base64")
    static_digest: str = Field("0", pattern=_HEX64, description="0, or the static table the ranks pinned")
    budget_ms: int = Field(
        60_000, ge=0, le=600_000, description="how long the asker waits: the pin is decided before"
    )

    def key(self) -> PinKey:
        return PinKey(int(self.comm_id, 16), self.n_ranks, self.n_nodes)

    def member_ids(self) -> list[int]:
        return [int(m, 16) for m in self.members]

    def table_bytes(self) -> bytes | None:
        if self.table is None:
            return None
        try:
            return base64.b64decode(self.table, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"table is not valid base64: {exc}") from exc


def request_json(
    key: PinKey,
    members: list[int],
    host: str,
    table_b64: str | None,
    static_digest: int,
    budget_ms: int,
) -> bytes:
    """The JSON of a :class:`PinRequestBody`, written directly: the daemon sends one per host and
    communicator, and the model's serialiser re-scans the ~21 KB table string every time.
    ``table_b64`` is base64 (no character needs escaping in JSON)."""
    return (
        b'{"comm_id":"%016x","n_ranks":%d,"n_nodes":%d,"members":[%s],"host":%s,"table":%s,'
        b'"static_digest":"%x","budget_ms":%d}'
        % (
            key.comm_id,
            key.n_ranks,
            key.n_nodes,
            b",".join(b'"%016x"' % m for m in members),
            json.dumps(host).encode(),
            b"null" if table_b64 is None else b'"%s"' % table_b64.encode("ascii"),
            static_digest,
            budget_ms,
        )
    )


class PinResponseBody(BaseModel):
    status: Literal["apply", "neutral", "fail"]
    reason: str
    comm_id: str
    pinned_at_ns: int = 0
    pinned_by: str = ""
    generation: int = 0
    static_digest: str = "0"
    table: str | None = None
    # asked for with ?table=unless-offered: the verdict's table is the one this request offered, so
    # it is not sent back (older services ignore the parameter and always send it)
    table_as_offered: bool = False


UNLESS_OFFERED = b"table=unless-offered"  # the query string that asks for table_as_offered answers


def response_body(key: PinKey, verdict: PinVerdict, as_offered: bool = False) -> PinResponseBody:
    """``as_offered``: the asker offered ``verdict.table`` and asked not to get it back."""
    return PinResponseBody(
        status=verdict.status.name.lower(),
        reason=verdict.reason,
        comm_id=f"{key.comm_id:016x}",
        pinned_at_ns=verdict.pinned_at_ns,
        pinned_by=verdict.pinned_by,
        generation=verdict.generation,
        static_digest=f"{verdict.digest:x}",
        table=None if verdict.table is None or as_offered else base64.b64encode(verdict.table).decode(),
        table_as_offered=as_offered,
    )


def verdict_from_body(body: PinResponseBody, offered: tuple[str, bytes] | None = None) -> PinVerdict:
    """``offered``: the (base64, bytes) table the asker sent, for answers that name it instead of
    repeating it (ValueError if the asker sent none)."""
    if body.table_as_offered:
        if offered is None or body.table is not None:
            raise ValueError("table_as_offered, but no table was offered")
        table: bytes | None = offered[1]
    elif body.table is None:
        table = None
    elif offered is not None and body.table == offered[0]:
        table = offered[1]  # an older service sent it back: no second decoding
    else:
        table = base64.b64decode(body.table, validate=True)
    status = PinStatus[body.status.upper()]
    if status is PinStatus.FAIL:  # an older pin service: no verdict this rank can share
        return PinVerdict.neutral(f"pin service: {body.reason}")
    return PinVerdict(
        status,
        body.reason,
        table,
        body.pinned_at_ns,
        body.pinned_by,
        body.generation,
        int(body.static_digest, 16),
    )
