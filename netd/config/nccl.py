"""``[nccl]``: the NCCL tuner plugin's side of the daemon (docs/nccl.md, docs/configuration.md).

Kept beside :mod:`netd.config.settings` (stdlib and pydantic only) and added to its ``Config`` as ``nccl``.
The plugin's ``NETD_TUNER_TIMEOUT_MS`` (default 1 s) bounds every pin: each rank sends its deadline
and pins are decided before the earliest; ``pin_window`` and ``pin_timeout`` are upper bounds on top.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netd.config.files import per_user_dir
from netd.config.types import OptionalPath

__all__ = ["NcclConfig", "default_socket_path"]

ROOT_SOCKET = Path("/run/netd/nccl.sock")  # the plugin's default NETD_TUNER_SOCKET


def default_socket_path() -> Path:
    if os.geteuid() == 0:
        return ROOT_SOCKET
    return per_user_dir("XDG_RUNTIME_DIR") / "nccl.sock"


class NcclConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True  # serve the plugin's socket and /v1/nccl
    socket: OptionalPath = (
        None  # default: /run/netd/nccl.sock as root, else $XDG_RUNTIME_DIR/netd-<uid>/nccl.sock
    )
    socket_mode: int = Field(0o666, ge=0, le=0o777, description="permissions of the socket file")
    # netd that pins multi-node communicators (one per cluster, reachable from every host), e.g.
    # "http://fabric-01:9469"; empty: multi-node communicators keep NCCL's own tuning.
    pin_service: str = ""
    pin_token_file: OptionalPath = (
        None  # bearer token for the pin service; default: api.token_file / NETD_API_TOKEN
    )
    pin_window: float = Field(
        3.0, gt=0, le=60, description="seconds a pin waits for all ranks (as pin service)"
    )
    pin_timeout: float = Field(8.0, gt=0, le=120, description="seconds this daemon waits for the pin service")
    keep_pins: float = Field(600.0, ge=1, le=86400, description="seconds decided pins are remembered")
    table_valid: float = Field(
        30.0, gt=0, le=86400, description="seconds a table stays fresh after its snapshot"
    )
    min_gain: float = Field(
        0.15, ge=0, le=10, description="modelled advantage required for a hint (0.15 = 15 %)"
    )

    @field_validator("socket_mode", mode="before")
    @classmethod
    def _octal(cls, v: Any) -> Any:
        # strings (NETD_NCCL_SOCKET_MODE) are octal, as chmod takes them: "660", "0660" or "0o660"
        return int(v.strip().lower().removeprefix("0o"), 8) if isinstance(v, str) else v

    @field_validator("pin_service")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, e.g. http://fabric-01:9469, got {v!r}")
        return v.rstrip("/")

    def socket_path(self) -> Path:
        return self.socket or default_socket_path()
