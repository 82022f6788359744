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
from netd.vocabulary.dcqcn_knobs import KNOBS, OFED_ENABLE_DIRS

__all__ = ["cc_params_dir", "read_params", "render", "render_ofed"]

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


def render_ofed(sysfs_root: Path, netdev: str, params: DcqcnParams, enabled: tuple[int, ...] = (3,)) -> Path:
    """The MLNX_OFED/DOCA layout of the same parameters, ``class/net/<netdev>/ecn/roce_rp|roce_np/``,
    with DCQCN enabled on the ``enabled`` priorities (for trees that stand in for an OFED host)."""
    ecn = sysfs_root / "class" / "net" / netdev / "ecn"
    for knob in KNOBS:
        if knob.ofed is not None:
            path = ecn / knob.ofed[0] / knob.ofed[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{int(getattr(params, knob.name, knob.default) or 0)}\n")
    for side in OFED_ENABLE_DIRS:
        (ecn / side / "enable").mkdir(parents=True, exist_ok=True)
        for prio in range(8):
            (ecn / side / "enable" / str(prio)).write_text(f"{int(prio in enabled)}\n")
    return ecn


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
