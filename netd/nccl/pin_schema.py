"""The JSON of ``POST /v1/nccl/pins``: what a daemon sends the pin service for one rank, and the verdict.

64-bit ids travel as hex strings (JSON numbers above 2^53 lose precision in many clients) and the
table as base64 of the netd_hints.h bytes.
"""

from __future__ import annotations

import base64
import binascii
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from netd.nccl.layout import TABLE_BYTES
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinKey, PinVerdict

__all__ = ["PinRequestBody", "PinResponseBody", "response_body", "verdict_from_body"]

_HEX64 = r"^[0-9a-fA-F]{1,16}$"
_MAX_TABLE_B64 = 4 * ((TABLE_BYTES + 2) // 3) + 4


class PinRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    comm_id: str = Field(pattern=_HEX64, description="NCCL's commId (comm->commHash), hex")
    n_ranks: int = Field(ge=1, le=1 << 24, description="ranks in the communicator")
    n_nodes: int = Field(ge=1, le=1 << 24, description="nodes in the communicator")
    member: str = Field(pattern=_HEX64, description="this rank's random registration id, hex")
    host: str = Field("", max_length=255, description="the asking host (informative)")
    table: str | None = Field(None, max_length=_MAX_TABLE_B64, description="the asker's hint table, base64")

    def key(self) -> PinKey:
        return PinKey(int(self.comm_id, 16), self.n_ranks, self.n_nodes)

    def table_bytes(self) -> bytes | None:
        if self.table is None:
            return None
        try:
            return base64.b64decode(self.table, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"table is not valid base64: {exc}") from exc


class PinResponseBody(BaseModel):
    status: Literal["apply", "neutral", "fail"]
    reason: str
    comm_id: str
    pinned_at_ns: int = 0
    pinned_by: str = ""
    table: str | None = None


def response_body(key: PinKey, verdict: PinVerdict) -> PinResponseBody:
    return PinResponseBody(
        status=verdict.status.name.lower(),
        reason=verdict.reason,
        comm_id=f"{key.comm_id:016x}",
        pinned_at_ns=verdict.pinned_at_ns,
        pinned_by=verdict.pinned_by,
        table=None if verdict.table is None else base64.b64encode(verdict.table).decode(),
    )


def verdict_from_body(body: PinResponseBody) -> PinVerdict:
    table = None if body.table is None else base64.b64decode(body.table, validate=True)
    return PinVerdict(PinStatus[body.status.upper()], body.reason, table, body.pinned_at_ns, body.pinned_by)
