"""Building the tuning service for `netd run` (the composition root calls :func:`start_tuning`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter
from prometheus_client.registry import Collector

from netd.api.auth import load_token
from netd.config.settings import Config
from netd.daemon.state import PublishedState
from netd.errors import NetdError
from netd.tuning.journal import recovery_message
from netd.tuning.metrics import TuningCollector
from netd.tuning.routes import tuning_router
from netd.tuning.service import TuningService

__all__ = ["TuningParts", "start_tuning"]

log = logging.getLogger(__name__)


@dataclass
class TuningParts:
    service: TuningService | None
    routers: tuple[APIRouter, ...]
    collectors: tuple[Collector, ...]
    banner: str | None

    def close(self) -> None:
        if self.service is not None:
            self.service.close()


def start_tuning(cfg: Config, sysfs_root: Path, state: Callable[[], PublishedState | None]) -> TuningParts:
    """The running service, its /v1/tuning router and its metrics; without them (and a banner line
    saying why) when tuning is off or cannot start — the daemon itself keeps running."""
    if cfg.tuning.mode == "off":
        return TuningParts(None, (), (), None)
    try:
        service = TuningService(cfg, sysfs_root, state)
    except NetdError as exc:
        log.error("DCQCN tuning disabled: %s", exc)
        return TuningParts(None, (), (), f"  DCQCN tuning disabled: {exc}")
    service.start()
    devices = ", ".join(t.device for t in service.applier.trees) or "no device with DCQCN parameters"
    line = f"  DCQCN tuning: {cfg.tuning.mode} every {cfg.tuning.interval:g} s ({devices}); GET /v1/tuning"
    last = service.last_outcome
    if last is not None and last.state == "recovered":
        line += f"\n  DCQCN tuning: interrupted change set {last.txid} rolled back at start"
    if service.recovery is not None:
        line += f"\n  DCQCN tuning: {recovery_message(service.recovery)}"
    return TuningParts(
        service, (tuning_router(service, load_token(cfg.api.token_file)),), (TuningCollector(service),), line
    )
