"""``[tuning]``: the DCQCN tuner and the parameter applier (docs/tuning.md, docs/configuration.md).

Kept beside :mod:`netd.config.settings` (stdlib and pydantic only) and added to its ``Config`` as ``tuning``.
Knob names in ``bounds`` and ``freeze`` are checked when the tuner is built (netd.tuning.service),
where the knob table lives.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from netd.config.files import per_user_dir
from netd.config.types import OptionalPath

__all__ = ["TuningConfig", "default_journal_dir"]


def default_journal_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/netd/tuning")
    return per_user_dir("XDG_STATE_HOME") / "tuning"


class TuningConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # off: no tuner; recommend: decide and explain, change nothing (the default); apply: also write
    # the NIC parameters (journaled, verified, rolled back on regression).
    mode: Literal["off", "recommend", "apply"] = "recommend"
    interval: float = Field(30.0, ge=1, le=3600, description="seconds of signals per tuner decision")
    min_apply_interval: float = Field(300.0, ge=0, description="seconds between two applied changes")
    state_dir: OptionalPath = None  # journal; default /var/lib/netd/tuning as root, else a per-user dir
    debugfs_root: OptionalPath = None  # default: <sysfs_root>/kernel/debug
    # Operator limits per tuner knob, [lo, hi] in device units, e.g. rp_ai_rate = [5, 80].
    bounds: dict[str, tuple[float, float]] = Field(default_factory=dict)
    # Knobs the tuner must not move. The switch's ECN settings are frozen by default: netd cannot
    # apply them; unfreeze them to get recommendations for the switch operator.
    freeze: tuple[str, ...] = ("ecn_thresholds", "pmax")
    # The switch ECN profile of the lossless class in force (what the tuner assumes; a host cannot
    # read it): Kmin/Kmax in bytes for a 200 Gb/s port, Pmax a probability.
    switch_kmin_bytes: int = Field(800_000, ge=0)
    switch_kmax_bytes: int = Field(3_200_000, ge=0)
    switch_pmax: float = Field(0.2, ge=0, le=1)

    @model_validator(mode="after")
    def _check(self) -> TuningConfig:
        if self.switch_kmin_bytes > self.switch_kmax_bytes:
            raise ValueError("switch_kmin_bytes must be <= switch_kmax_bytes")
        for name, (lo, hi) in self.bounds.items():
            if lo > hi:
                raise ValueError(f"bounds.{name}: lo {lo} > hi {hi}")
        return self

    def journal_dir(self) -> Path:
        return self.state_dir or default_journal_dir()

    def debugfs(self, sysfs_root: Path) -> Path:
        return self.debugfs_root or sysfs_root / "kernel" / "debug"
