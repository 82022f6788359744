"""Builders for detector inputs: a port with counter deltas, a PFC priority, a tick or PFC input."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

from netd.config.detect import DetectConfig
from netd.detect.inputs import (
    DetectInput,
    InputPath,
    LinkChange,
    PortCongestion,
    PortInput,
    PriorityCounters,
)
from netd.model.snapshot import frozen_map

HOST = "h1"
LINE_PPS = 200e9 / 8 / 4096  # packets/s of a 200G port at 4 KiB MTU


def cfg(**overrides: Any) -> DetectConfig:
    """The detector tests count samples against SONiC's own 200 ms countdown (netd's default is
    shorter: docs/detection.md); every other value is the default."""
    return DetectConfig(**({"pfc_detection_time": 0.2} | overrides))


def prio(priority: int = 3, **fields: Any) -> PriorityCounters:
    return PriorityCounters(priority, **fields)


def port(
    device: str = "mlx5_0",
    number: int = 1,
    *,
    counters: dict[str, float] | None = None,
    netdev_counters: dict[str, float] | None = None,
    priorities: tuple[PriorityCounters, ...] = (),
    state: str | None = "ACTIVE",
    rate_gbps: float | None = 200.0,
    **more: Any,
) -> PortInput:
    return PortInput(
        device=device,
        port=number,
        netdev=f"{device}_net",
        state=state,
        phys_state="LinkUp",
        rate_gbps=rate_gbps,
        counters=frozen_map(counters or {}),
        netdev_counters=frozen_map(netdev_counters or {}),
        priorities=priorities,
        **more,
    )


def tick(
    t: float,
    *ports: PortInput,
    dt: float | None = 1.0,
    changes: tuple[LinkChange, ...] = (),
    source_errors: dict[str, str] | None = None,
) -> DetectInput:
    return DetectInput(
        InputPath.TICK,
        HOST,
        t,
        1_800_000_000.0 + t,
        dt,
        tuple(ports),
        changes,
        frozen_map(source_errors or {}),
    )


def pfc(
    t: float, *ports: PortInput, dt: float | None = 0.1, changes: tuple[LinkChange, ...] = ()
) -> DetectInput:
    return DetectInput(InputPath.PFC, HOST, t, 1_800_000_000.0 + t, dt, tuple(ports), changes)


def stormed(
    dt: float = 0.1, fraction: float = 1.0, tx: float = 0.0, frames: float = 1190.0
) -> PriorityCounters:
    """A priority paused ``fraction`` of a ``dt`` sample with ``tx`` packets sent."""
    return prio(3, rx_pause_frames=frames * dt, rx_pause_us=fraction * dt * 1e6, tx_packets=tx)


def busy(
    dt: float = 1.0, ce: float = 0.0, cnp_per_packet: float = 0.0, pps: float = LINE_PPS
) -> dict[str, float]:
    """Tick counter deltas of a port receiving and sending at ``pps`` with a CE fraction."""
    rx = pps * dt
    return {
        "rx_packets": rx,
        "tx_packets": rx,
        "rx_bytes": rx * 4096,
        "tx_bytes": rx * 4096,
        "ecn_marked": ce * rx,
        "cnp_sent": cnp_per_packet * rx,
        "cnp_handled": 0.0,
    }


def judged(level: str, score: float = 0.6, ce: float = 0.03) -> PortCongestion:
    """The congestion scorer's verdict on a port, as the daemon hands it to the detectors."""
    return PortCongestion(
        level,
        score,
        MappingProxyType({"ce_fraction": 0.5, "pause_fraction": 0.1}),
        MappingProxyType({"ce_fraction": ce, "pause_fraction": 0.02, "cnp_per_packet": None}),
    )


def with_levels(inp: DetectInput, levels: dict[tuple[str, int], str]) -> DetectInput:
    """A tick input carrying the scorer's level for some ports."""
    verdicts = {key: judged(level) for key, level in levels.items()}
    return dataclasses.replace(inp, congestion=MappingProxyType(verdicts))
