"""Fake hosts with DCQCN parameter trees: upstream debugfs cc_params, or MLNX_OFED ecn/ directories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.sources.cc_params import ParamTree, discover
from netd.tuning.torture import build_host

__all__ = ["build_host", "trees_of"]


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
