"""The emulated hosts' DCQCN parameters, as an upstream debugfs ``cc_params`` tree.

The emulator has no firmware to ask, so it renders what mlx5 would show under
``<host>/kernel/debug/mlx5/<pci>/cc_params/`` (the emulated host root stands for ``/sys``, so this is
``/sys/kernel/debug`` of that host), one file per knob of :mod:`netd.vocabulary.dcqcn_knobs`, starting at the
firmware defaults. ``netd tune`` reads and writes it like a real one; the emulator reads the first
device of its parameter host back before every slice, so an applied change (by ``netd tune --apply``
or the daemon's tuner) changes the emulated fabric's dynamics: the emulated cluster runs every NIC
with the parameters in force on that device, as a fleet-wide rollout would.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from cc.model.params import DcqcnParams
from netd.sources.cc_params import read_value
from netd.vocabulary.dcqcn_knobs import KNOBS

__all__ = ["cc_params_dir", "read_params", "render"]

log = logging.getLogger(__name__)
_NIC_FIELDS = tuple(f.name for f in dataclasses.fields(DcqcnParams) if f.name.startswith(("rp_", "np_")))


def cc_params_dir(host_root: Path, pci: str) -> Path:
    return host_root / "kernel" / "debug" / "mlx5" / pci / "cc_params"


def render(host_root: Path, pci: str, params: DcqcnParams) -> Path:
    """Write every cc_params file for one PCI function (mode 0600, like debugfs)."""
    directory = cc_params_dir(host_root, pci)
    directory.mkdir(parents=True, exist_ok=True)
    for knob in KNOBS:
        value = getattr(params, knob.name, knob.default)
        path = directory / knob.name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{int(value or 0)}\n".encode())
        finally:
            os.close(fd)
    return directory


def read_params(directory: Path, base: DcqcnParams) -> DcqcnParams:
    """``base`` with the NIC knobs read from ``directory``; unreadable or invalid values keep ``base``."""
    values = {}
    for name in _NIC_FIELDS:
        try:
            value = read_value(directory / name)
        except Exception as exc:  # a half-written or garbage file must not stop the emulator
            log.warning("emulated cc_params %s: %s", name, exc)
            continue
        if value is not None:
            values[name] = value
    try:
        return dataclasses.replace(base, **values)
    except ValueError as exc:
        log.warning("emulated cc_params rejected (%s); keeping the previous parameters", exc)
        return base
