"""Fake hosts with DCQCN parameter trees: upstream debugfs cc_params, or MLNX_OFED ecn/ directories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cc.model.params import DcqcnParams
from netd.emulated.cc_params import render
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.sources.cc_params import ParamTree, discover
from netd.vocabulary.dcqcn_knobs import KNOBS


def add_ofed_tree(root: Path, netdev: str, params: DcqcnParams, enabled: tuple[int, ...] = (3,)) -> Path:
    ecn = root / "class" / "net" / netdev / "ecn"
    for knob in KNOBS:
        if knob.ofed is None:
            continue
        path = ecn / knob.ofed[0] / knob.ofed[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{int(getattr(params, knob.name, knob.default) or 0)}\n")
    for side in ("roce_rp", "roce_np"):
        (ecn / side / "enable").mkdir(parents=True, exist_ok=True)
        for prio in range(8):
            (ecn / side / "enable" / str(prio)).write_text(f"{int(prio in enabled)}\n")
    return ecn


def build_host(root: Path, kind: str = "debugfs", devices: int = 2) -> SysfsTree:
    tree = SysfsTree(root)
    for p in range(devices):
        pci, netdev = f"0000:41:00.{p}", f"ens1f{p}np{p}"
        tree.add_device(DeviceSpec(name=f"mlx5_{p}", driver="mlx5", netdev=netdev, pci=pci))
        if kind in ("debugfs", "both"):
            render(root, pci, DcqcnParams())
        if kind in ("ofed", "both"):
            add_ofed_tree(root, netdev, DcqcnParams())
    return tree


@pytest.fixture
def debugfs_host(tmp_path: Path) -> Iterator[Path]:
    tree = build_host(tmp_path / "host", "debugfs")
    yield tmp_path / "host"
    tree.close()


@pytest.fixture
def ofed_host(tmp_path: Path) -> Iterator[Path]:
    tree = build_host(tmp_path / "host", "ofed")
    yield tmp_path / "host"
    tree.close()


def trees_of(root: Path) -> list[ParamTree]:
    trees, _ = discover(root, root / "kernel" / "debug")
    return trees
