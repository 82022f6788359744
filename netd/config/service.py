"""Configuration sections of the HTTP service: topology, congestion scoring, scheduler, cluster view.

Kept beside :mod:`netd.config.settings` (same layer: stdlib and pydantic only) and added to its ``Config`` as
``[topology]``, ``[congestion]``, ``[scheduler]`` and ``[cluster]``; documented in
docs/configuration.md and docs/service.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from netd.config.types import OptionalPath

__all__ = ["ClusterConfig", "CongestionConfig", "SchedulerConfig", "TopologyConfig"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopologyConfig(_Section):
    enabled: bool = True
    # auto: lldp_file if set; on a captured/emulated tree <sysfs_root>/lldp.json; on the live host a
    # running lldpd (lldpcli), else listening for LLDP frames on the RoCE netdevs (needs CAP_NET_RAW).
    lldp: Literal["auto", "lldpd", "frames", "file", "off"] = "auto"
    lldpcli: str = "lldpcli"
    lldpd_socket: OptionalPath = None  # lldpd's control socket (lldpd -u); default: lldpd's own
    lldp_file: OptionalPath = None  # `lldpcli -f json show neighbors details` output to read instead
    # YAML fabric description (ToR -> spine uplinks, rails, ports LLDP cannot see); default on a
    # captured or emulated tree: <sysfs_root>/topology.yaml when present.
    static_file: OptionalPath = None
    refresh_interval: float = Field(30.0, ge=1, le=3600, description="seconds between topology refreshes")
    netns: str | None = None  # read netlink and LLDP frames inside this network namespace (lab hosts)


def _ramp(v: tuple[float, float]) -> tuple[float, float]:
    lo, hi = v
    if not 0 <= lo < hi:
        raise ValueError(f"expected [lo, hi] with 0 <= lo < hi, got {list(v)}")
    return v


class CongestionConfig(_Section):
    # Each signal's ramp [lo, hi]: below lo it scores 0, at hi and above 1 (see docs/service.md).
    ce_fraction: tuple[float, float] = (0.001, 0.05)
    cnp_per_packet: tuple[float, float] = (0.0001, 0.01)
    pause_fraction: tuple[float, float] = (0.01, 0.30)
    loss_per_packet: tuple[float, float] = (1e-6, 1e-3)
    alpha: float = Field(0.5, gt=0, le=1, description="EWMA weight of the newest score")
    busy: float = Field(0.25, gt=0, lt=1)
    congested: float = Field(0.5, gt=0, lt=1)
    severe: float = Field(0.8, gt=0, le=1)
    margin: float = Field(0.1, ge=0, lt=0.5, description="hysteresis: a level is left this far below it")
    hold_ticks: int = Field(3, ge=1, le=1000)
    storm_pause_fraction: float = Field(0.9, gt=0, le=1)
    min_packets_per_s: float = Field(1000.0, ge=0, description="below, per-packet ratios are not judged")

    @field_validator("ce_fraction", "cnp_per_packet", "pause_fraction", "loss_per_packet")
    @classmethod
    def _check_ramp(cls, v: tuple[float, float]) -> tuple[float, float]:
        return _ramp(v)

    @model_validator(mode="after")
    def _ordered(self) -> CongestionConfig:
        if not self.busy < self.congested < self.severe:
            raise ValueError(
                f"levels must rise: busy ({self.busy}) < congested ({self.congested}) "
                f"< severe ({self.severe})"
            )
        return self


class SchedulerConfig(_Section):
    # Pods of one multi-node job carry this label with a shared value (scheduler-plugins coscheduling).
    pod_group_label: str = "scheduling.x-k8s.io/pod-group"
    peer_weight: float = Field(0.3, ge=0, le=1, description="share of the score from ToRs holding peers")
    # A node netd knows nothing about (no netd there, or its data aged out): lowest passes the filter
    # and scores 0; neutral passes and scores unknown_node_score; reject fails the filter.
    unknown_nodes: Literal["lowest", "neutral", "reject"] = "lowest"
    unknown_node_score: int = Field(5, ge=0, le=10, description="score of an unknown node when neutral")
    stale_after: float = Field(
        120.0, gt=0, description="seconds after which the whole view counts as unknown"
    )


class ClusterConfig(_Section):
    # `netd fabric` reads every host's metrics from this Prometheus (its HTTP API), e.g.
    # http://prometheus:9090; empty: serve this host's own view and say so.
    prometheus_url: str = ""
    refresh_interval: float = Field(10.0, ge=1, le=3600)
    window: str = Field("1m", pattern=r"^[0-9]+(ms|s|m|h)$", description="PromQL range for averaging signals")
    query_timeout: float = Field(5.0, gt=0, le=60)
    # ToRs per query page (0: one query per metric for the whole fleet); pages keep each answer small
    tors_per_query: int = Field(64, ge=0, le=100_000)
    # a host whose netd was last scraped longer ago is left out of the view (an unknown node)
    host_stale_after: float = Field(60.0, gt=0, le=3600)
    # kube-state-metrics series used to find a pod group's peers (empty: no peer affinity)
    pod_labels_metric: str = "kube_pod_labels"
    pod_info_metric: str = "kube_pod_info"

    @field_validator("prometheus_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, got {v!r}")
        return v.rstrip("/")
