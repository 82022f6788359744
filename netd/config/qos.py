"""``[qos]``: reading each port's QoS and auditing it across hosts (docs/qos.md, docs/configuration.md).

``expected`` declares the fabric's profile (setting name -> canonical text, the words of
:mod:`netd.vocabulary.qos_settings`); a setting it leaves out is expected to be what the majority of
hosts in the same ``scope`` (one ToR, or the whole fabric) have.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netd.config.types import OptionalPath
from netd.vocabulary.qos_settings import QOS_SETTINGS, is_setting

__all__ = ["QosConfig"]


class QosConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    # auto: run `dcb -j` when sysfs_root is /sys, else read captures under <sysfs_root>/dcb/<netdev>/
    backend: Literal["auto", "command", "files"] = "auto"
    dcb_path: str = "dcb"
    interval: float = Field(60.0, ge=1, le=86400, description="seconds between re-reads of the QoS state")
    scope: Literal["tor", "fabric"] = "tor"  # where the majority is taken when expected does not say
    expected: dict[str, str] = Field(default_factory=dict)  # e.g. {trust = "dscp", pfc = "3"}
    ignore: tuple[str, ...] = ()  # settings never compared (e.g. "dcqcn.rp_ai_rate" during a rollout)
    debugfs_root: OptionalPath = None  # default: <sysfs_root>/kernel/debug
    configfs_root: OptionalPath = None  # default: <sysfs_root>/kernel/config

    @field_validator("expected", "ignore")
    @classmethod
    def _known(cls, value: dict[str, str] | tuple[str, ...]) -> dict[str, str] | tuple[str, ...]:
        for name in value:
            if not is_setting(name):
                raise ValueError(
                    f"unknown QoS setting {name!r}; one of {', '.join(QOS_SETTINGS)} or dcqcn.<knob>"
                )
        return value
