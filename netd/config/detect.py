"""The ``[detect]`` configuration section: thresholds and windows of every detector, with units.

Flat on purpose, so each key has a ``NETD_DETECT_<KEY>`` environment override (netd.config.settings only
maps one level of sections). Defaults
and the reasoning behind them are in docs/detection.md; keys and units in docs/configuration.md.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["LEVELS", "RETIRED", "DetectConfig", "Level"]

log = logging.getLogger(__name__)

Level = Literal["ok", "busy", "congested", "severe"]
LEVELS: tuple[Level, ...] = ("ok", "busy", "congested", "severe")


# Keys of netd before congestion findings followed the scorer's levels: still accepted, so an old
# configuration loads, but they change nothing and say so.
RETIRED = {
    "congestion_ce_fraction": "[congestion] ce_fraction",
    "congestion_cnp_per_packet": "[congestion] cnp_per_packet",
    "congestion_min_rx_pps": "[congestion] min_packets_per_s",
    "congestion_exit_ratio": "[congestion] margin",
    "congestion_exit_ticks": "[congestion] hold_ticks",
}


class DetectConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and RETIRED.keys() & data.keys():
            data = dict(data)
            for key in RETIRED.keys() & data.keys():
                data.pop(key)
                log.warning(
                    "[detect] %s is no longer used: congestion levels come from %s", key, RETIRED[key]
                )
        return data

    enabled: bool = True
    # The PFC fast path: pause/priority counters (ethtool) read this often between ticks; 0 = only
    # at ticks. Each mlx5 statistics read costs firmware commands: see docs/detection.md.
    fast_interval: float = Field(0.05, ge=0, le=1.0, description="seconds")
    # Adaptive cadence: while no PFC netdev showed pause for fast_linger seconds, sample only every
    # fast_calm_interval (0 = always fast_interval, and no early confirming sample). The calm interval
    # bounds how late a storm's onset is seen (about half of it on average); the onset sample's pause
    # is charged, so the storm is confirmed soon after: docs/detection.md, The PFC fast path.
    fast_calm_interval: float = Field(0.1, ge=0, le=1.0, description="seconds")
    # What calm samples may cost, as a fraction of one core: when a calm sample's measured CPU time
    # (an average) would exceed it at fast_calm_interval, the calm interval stretches until it fits
    # (at most 1 s, and at most half the tick interval: a calm sample between two ticks keeps
    # measuring the cost). A netdev of ~600 statistics (a many-channel mlx5) costs ~0.14 ms of CPU a read,
    # before firmware time: docs/detection.md. 0 = no budget.
    fast_calm_cpu_budget: float = Field(0.01, ge=0, le=1.0, description="fraction of one core")
    fast_linger: float = Field(2.0, ge=0, le=60, description="seconds")
    max_gap: float = Field(5.0, gt=0, description="seconds; longer sample intervals are not judged")
    history: int = Field(500, ge=0, le=100_000, description="resolved findings kept for the API")
    # A finding that returns within this many seconds of resolving is reopened (same id, not counted
    # again) instead of opened anew; 0 = every return is a new finding (each episode has its own times).
    reopen_window: float = Field(0.0, ge=0, le=3600, description="seconds")
    netlink: bool = True  # carrier and speed events from the kernel (hardware fabric only)

    # PFC storm, SONiC PFC-watchdog semantics with a shorter countdown than its 200 ms default: netd
    # only alerts (SONiC drops), and should know before the switch acts (restoration stays 400 ms)
    pfc_detection_time: float = Field(0.05, gt=0, le=60)
    pfc_restoration_time: float = Field(0.4, gt=0, le=600)
    pfc_pause_fraction: float = Field(0.8, gt=0, le=1)
    pfc_tx_progress_packets: int = Field(0, ge=0, description="packets per sample still counted as none")
    pause_storm_event_hold: float = Field(10.0, gt=0, description="seconds a NIC storm event stays open")

    # congestion findings: the [congestion] scorer's level, held this long (levels and thresholds
    # live in [congestion]: one meaning of "congested" for findings, /v1/congestion and metrics)
    congestion_finding_level: Literal["busy", "congested", "severe"] = "congested"
    congestion_sustain: float = Field(2.0, ge=0, le=3600, description="seconds at the level before a finding")

    # congestion spreading: paused heavily while the port's own ECN/CNP signals stay low
    spreading_pause_fraction: float = Field(0.2, gt=0, le=1)
    spreading_max_ce_fraction: float = Field(0.0005, ge=0, le=1)
    spreading_max_cnp_per_packet: float = Field(0.001, ge=0, le=1)
    spreading_exit_ticks: int = Field(2, ge=1, le=100)

    # loss in a lossless fabric (events/s summed over the loss counters)
    loss_min_rate: float = Field(1.0, ge=0)
    loss_critical_rate: float = Field(1000.0, gt=0)
    loss_quiet_time: float = Field(5.0, ge=0, description="seconds without loss before resolving")

    # link health
    link_flap_window: float = Field(30.0, gt=0, description="seconds a carrier loss keeps a flap open")
    link_flap_critical: int = Field(3, ge=1, description="carrier losses in the window that are critical")
    link_down_ticks: int = Field(2, ge=1, le=100)

    # counters
    stall_min_link_fraction: float = Field(0.05, gt=0, le=1)
    stall_min_interval: float = Field(0.25, gt=0, description="seconds; shorter samples hit driver caches")
    read_error_quiet_ticks: int = Field(3, ge=1, le=100)

    # change point on each port's own CNP history (robust median / MAD)
    baseline_window: int = Field(300, ge=10, le=100_000, description="ticks")
    baseline_min_samples: int = Field(60, ge=5, description="ticks before judging")
    baseline_z: float = Field(6.0, gt=0)
    baseline_min_rate: float = Field(200.0, ge=0, description="CNPs/s a rise must exceed")
    baseline_persist_ticks: int = Field(2, ge=1, le=100)

    @model_validator(mode="after")
    def _check(self) -> DetectConfig:
        if self.baseline_min_samples > self.baseline_window:
            raise ValueError("baseline_min_samples must not exceed baseline_window")
        return self

    def level_index(self, level: Level) -> int:
        return LEVELS.index(level)
