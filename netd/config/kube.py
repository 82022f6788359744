"""The ``[kube]`` configuration section: how netd describes the fabric to Kubernetes schedulers
(node labels, Volcano HyperNodes, Kueue's Topology, health taints) and how `netd fabric publish`
writes them (docs/deploy.md#scheduler-integrations)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["KubeConfig"]

# A qualified label key: an optional DNS-subdomain prefix and '/', then a name of at most 63
# characters (the rule kube-apiserver applies, k8s.io/apimachinery validation.IsQualifiedName).
_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$"
)


class KubeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Node label keys, one per fabric level (Topograph/Kueue style: top level first in Topology).
    spine_label: str = "netd.io/spine"
    tor_label: str = "netd.io/tor"
    rail_label: str = "netd.io/rail"  # only on hosts whose RDMA ports are all on one rail
    kueue_topology: str = "netd-roce"  # the name of the Kueue Topology object
    tor_tier_name: str = "tor"  # HyperNode spec.tierName of tier 1
    spine_tier_name: str = "spine"  # and of tier 2
    # Health: a node condition, and (optionally) a NoSchedule taint, for hosts whose RoCE ports are
    # down or PFC-stormed. Set after `degrade_after` seconds bad, cleared after `recover_after` good.
    condition_type: str = "RoCEDegraded"
    taint: bool = False
    taint_key: str = "netd.io/roce-degraded"
    degrade_after: float = Field(60.0, ge=0, description="seconds a host must be bad before it is marked")
    recover_after: float = Field(300.0, ge=0, description="seconds a host must be good before unmarking")
    # The publisher: server-side apply under this field manager, at most this many writes a second.
    field_manager: str = "netd"
    max_writes_per_s: float = Field(5.0, gt=0, le=1000)
    publish_interval: float = Field(30.0, ge=1, le=3600, description="seconds between publishing rounds")

    @field_validator("spine_label", "tor_label", "rail_label", "taint_key")
    @classmethod
    def _check_key(cls, v: str) -> str:
        name = v.rsplit("/", 1)[-1]
        if not _KEY.match(v) or len(name) > 63 or len(v) > 316:
            raise ValueError(f"{v!r} is not a Kubernetes label key (prefix/name, name <= 63 characters)")
        return v

    @model_validator(mode="after")
    def _distinct(self) -> KubeConfig:
        keys = (self.spine_label, self.tor_label, self.rail_label)
        if len(set(keys)) != len(keys):
            raise ValueError("spine_label, tor_label and rail_label must differ")
        return self
