"""Wiring the NCCL side into ``netd run``: publisher, pin socket, pin authority and /v1/nccl.

A composition-root helper (like netd.daemon.loop): it is the one place here that reads sources (the GID
tables, for the environment recommendations) and hands plain values to the publishers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter

from cc.model.params import DcqcnParams
from netd.api.auth import load_token
from netd.config.settings import Config
from netd.daemon.state import PublishedState
from netd.errors import NetdError
from netd.nccl.nccl_env import recommend
from netd.nccl.pin_client import RemotePins
from netd.nccl.pins import PinAuthority
from netd.nccl.policy import ModelParams
from netd.nccl.publisher import HintPublisher
from netd.nccl.routes import nccl_router
from netd.nccl.socket_server import LOCAL_WINDOW_S, PinResolver, PinSocketServer
from netd.sources.gids import read_gids

__all__ = ["NcclService", "env_document", "switch_profile"]

log = logging.getLogger(__name__)


def env_document(state: PublishedState | None, cfg: Config, sysfs_root: Path) -> dict[str, Any] | None:
    if state is None:
        return None
    obs = state.observation
    gids = {
        (p.sample.device, p.sample.port): read_gids(sysfs_root, p.sample.device, p.sample.port)
        for p in obs.ports
    }
    return recommend(obs, gids, str(cfg.nccl.socket_path()))


def switch_profile(cfg: Config) -> DcqcnParams:
    """The DCQCN model with the switch ECN profile of ``[tuning]`` (the queue the CE fraction implies)."""
    t = cfg.tuning
    try:
        return DcqcnParams(kmin_bytes=t.switch_kmin_bytes, kmax_bytes=t.switch_kmax_bytes, pmax=t.switch_pmax)
    except ValueError as exc:  # outside the model's ranges (e.g. Kmax above its PFC XOFF default)
        log.warning(
            "[tuning] switch profile not usable for NCCL hints (%s): using cc.model.params' defaults", exc
        )
        return DcqcnParams()


class NcclService:
    """Everything ``[nccl]`` turns on; ``router`` goes into the app, ``start``/``close`` bracket the run."""

    def __init__(
        self, cfg: Config, state: Callable[[], PublishedState | None], sysfs_root: Path, host: str
    ) -> None:
        n = cfg.nccl
        self.cfg = cfg
        self.publisher = HintPublisher(
            state, n.table_valid, ModelParams(min_gain=n.min_gain), switch_profile(cfg)
        )
        token = load_token(cfg.api.token_file)
        self.service_authority = PinAuthority(window_s=n.pin_window, keep_s=n.keep_pins)
        self.router: APIRouter = nccl_router(
            token=token,
            authority=self.service_authority,
            current=self.publisher.current,
            env=lambda: env_document(state(), cfg, sysfs_root),
        )
        self.server: PinSocketServer | None = None
        self.problem: str | None = None
        if n.enabled:
            pin_token = load_token(n.pin_token_file) if n.pin_token_file else token
            remote = RemotePins(n.pin_service, pin_token, n.pin_timeout, host) if n.pin_service else None
            resolver = PinResolver(
                PinAuthority(window_s=min(n.pin_window, LOCAL_WINDOW_S), keep_s=n.keep_pins),
                remote,
                self.publisher.table_bytes,
                host,
            )
            self.server = PinSocketServer(n.socket_path(), resolver, mode=n.socket_mode)

    def start(self) -> None:
        """Serve the plugin's socket. A socket netd cannot serve (another daemon has it, no permission)
        is reported, not fatal: the telemetry daemon runs on, and the plugin leaves NCCL untouched."""
        if self.server is None:
            return
        try:
            self.server.start()
        except NetdError as exc:
            self.problem = str(exc)
            log.warning("NCCL tuner socket not served: %s", exc)
            self.server = None
            return
        log.info("NCCL tuner pins on %s", self.server.path)

    def banner_line(self) -> str | None:
        if self.problem:
            return f"  NCCL tuner socket NOT served: {self.problem}"
        if self.server is None:
            return None
        multi = (
            f"multi-node pins via {self.cfg.nccl.pin_service}"
            if self.cfg.nccl.pin_service
            else ("no pin_service: multi-node communicators keep NCCL's tuning")
        )
        return f"  NCCL tuner: NCCL_TUNER_PLUGIN=netd NETD_TUNER_SOCKET={self.server.path} ({multi})"

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
