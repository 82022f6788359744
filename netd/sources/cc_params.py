"""Where a host's DCQCN parameters live, and reading them.

Two layouts, mapped to the one vocabulary of :mod:`netd.vocabulary.dcqcn_knobs`:

* upstream debugfs: ``<debugfs>/mlx5/<pci>/cc_params/<rp_*|np_*>``, one directory per PCI function
  (global to that function, not per priority); found through ``class/infiniband/<dev>/device``.
* MLNX_OFED/DOCA sysfs: ``<sysfs>/class/net/<netdev>/ecn/roce_rp/<rpg_*...>`` and ``.../roce_np/``,
  with ``enable/<priority>`` files saying on which priorities DCQCN runs.

A device with both is driven through debugfs (the upstream interface); with neither it is reported
and left alone. Values are ``"%u\\n"`` text. Reads here follow netd's errno policy (absent is None);
writing, and the strict reads that verify a write, are the applier's (:mod:`netd.tuning.params`).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from netd.errors import TuningError
from netd.sources.sysfs_io import list_dir, read_text
from netd.vocabulary.dcqcn_knobs import KNOBS, OFED_ENABLE_DIRS, Knob, by_name

__all__ = ["ParamTree", "discover", "read_value"]

TreeKind = Literal["debugfs", "ofed"]


@dataclass(frozen=True, slots=True)
class ParamTree:
    """The parameter files of one RDMA device."""

    device: str
    kind: TreeKind
    path: Path  # cc_params/ (debugfs) or class/net/<netdev>/ecn/ (OFED)
    pci: str | None
    netdev: str | None

    def file(self, knob: Knob) -> Path | None:
        if self.kind == "debugfs":
            return self.path / knob.name
        return None if knob.ofed is None else self.path / knob.ofed[0] / knob.ofed[1]

    def read(self) -> dict[str, int]:
        """Every knob this tree has, in the vocabulary; absent or unreadable files are left out."""
        values: dict[str, int] = {}
        for knob in KNOBS:
            path = self.file(knob)
            value = read_value(path) if path is not None else None
            if value is not None:
                values[knob.name] = value
        return values

    def enabled_priorities(self) -> dict[str, tuple[int, ...]] | None:
        """OFED only: priorities with the reaction point and notification point enabled."""
        if self.kind != "ofed":
            return None
        out: dict[str, tuple[int, ...]] = {}
        for side in OFED_ENABLE_DIRS:
            base = self.path / side / "enable"
            out[side] = tuple(int(p) for p in list_dir(base) if p.isdigit() and read_value(base / p) == 1)
        return out

    def describe(self) -> str:
        where = f"PCI {self.pci}" if self.kind == "debugfs" else f"netdev {self.netdev}"
        return f"{self.device} ({where}): {self.path}"


def read_value(path: Path) -> int | None:
    text = read_text(path, source="tuning")
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise TuningError(f"{path}: expected an unsigned integer, read {text[:40]!r}") from None


def _pci_of(sysfs_root: Path, device: str) -> str | None:
    link = sysfs_root / "class" / "infiniband" / device / "device"
    try:
        return Path(os.path.realpath(link)).name if link.exists() else None
    except OSError:
        return None


def _netdev_of(sysfs_root: Path, device: str) -> str | None:
    nets = list_dir(sysfs_root / "class" / "infiniband" / device / "device" / "net")
    return nets[0] if nets else None


def discover(
    sysfs_root: Path, debugfs_root: Path, include: tuple[str, ...] = ("*",), exclude: tuple[str, ...] = ()
) -> tuple[list[ParamTree], list[str]]:
    """Parameter trees of the RDMA devices under ``sysfs_root``; and a note per device without one."""
    trees: list[ParamTree] = []
    notes: list[str] = []
    for device in list_dir(sysfs_root / "class" / "infiniband"):
        if not any(fnmatch.fnmatch(device, p) for p in include) or any(
            fnmatch.fnmatch(device, p) for p in exclude
        ):
            continue
        pci, netdev = _pci_of(sysfs_root, device), _netdev_of(sysfs_root, device)
        cc_params = debugfs_root / "mlx5" / pci / "cc_params" if pci else None
        ecn = sysfs_root / "class" / "net" / netdev / "ecn" if netdev else None
        if cc_params is not None and (cc_params / by_name("rp_ai_rate").name).exists():
            trees.append(ParamTree(device, "debugfs", cc_params, pci, netdev))
        elif ecn is not None and (ecn / "roce_rp").is_dir():
            trees.append(ParamTree(device, "ofed", ecn, pci, netdev))
        else:
            notes.append(
                f"{device}: no DCQCN parameters found (looked for {cc_params or '<no PCI device>'}"
                f" and {ecn or '<no netdev>'}); debugfs needs root and a mounted "
                "/sys/kernel/debug"
            )
    return trees, notes
