"""RdmaSysfs.moved: the calm cadence's look between ticks at a few counters (netd.daemon.cadence)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.daemon.cadence import MOVERS
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.sources.rdma import RdmaSysfs

DEVICES = (
    DeviceSpec("mlx5_0", netdev="ens1f0np0", pci="0000:41:00.0"),
    DeviceSpec("mlx5_1", netdev="ens1f1np1", pci="0000:41:00.1"),
)


# MOVERS by their mlx5 names (shared/reference/rdma-counters-dcqcn.md)
_RAW_MOVERS = {"np_ecn_marked_roce_packets", "rp_cnp_handled", "out_of_sequence", "roce_adp_retrans"}


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[SysfsTree]:
    with SysfsTree(tmp_path) as t:
        for spec in DEVICES:
            t.add_device(spec)
        yield t


@pytest.fixture(params=[0, 1000], ids=["directories", "kept-files"])
def source(tree: SysfsTree, request: pytest.FixtureRequest) -> Iterator[RdmaSysfs]:
    src = RdmaSysfs(tree.root, max_open=request.param, slow_interval_s=10.0)
    yield src
    src.close()


@pytest.mark.parametrize(
    ("raw", "moved"),
    [
        ("np_ecn_marked_roce_packets", True),  # ecn_marked
        ("rp_cnp_handled", True),  # cnp_handled
        ("out_of_sequence", True),
        ("port_rcv_packets", False),  # traffic: not looked at
        ("np_cnp_sent", False),  # not one of MOVERS
        ("rx_write_requests", False),  # a slow-cadence counter
    ],
)
def test_only_the_named_counters_are_looked_at(
    tree: SysfsTree, source: RdmaSysfs, raw: str, moved: bool
) -> None:
    source.read()
    assert not source.moved(MOVERS)  # nothing changed since the read
    tree.set_counters("mlx5_1", 1, {raw: 7})
    assert source.moved(MOVERS) is moved
    source.read()
    assert not source.moved(MOVERS)  # the read took the new value as the last


def test_it_reads_those_files_only(tree: SysfsTree) -> None:
    source = RdmaSysfs(tree.root)  # the default budget: kept directories, files opened by name
    try:
        source.read()
        opens = source.opens
        assert not source.moved(MOVERS)
        per_port = sum(1 for f in tree.counter_names("mlx5_0", 1) if f in _RAW_MOVERS)
        assert per_port == len(MOVERS)
        assert source.opens - opens == per_port * len(DEVICES)  # one open a file, none for the rest
    finally:
        source.close()


def test_a_file_that_fails_counts_as_moved_and_a_port_not_read_yet_is_not_looked_at(
    tree: SysfsTree, source: RdmaSysfs
) -> None:
    assert not source.moved(MOVERS)  # nothing read yet: nothing to compare with
    source.read()
    tree.set_raw("mlx5_0", 1, "hw_counters", "rp_cnp_handled", "garbage\n")
    assert source.moved(MOVERS)  # the tick explains it
    source.read()
    assert not source.moved(MOVERS)  # the same garbage again: unchanged text
    tree.add_device(DeviceSpec("mlx5_2", netdev="ens2f0np0", pci="0000:42:00.0"))
    tree.set_counters("mlx5_2", 1, {"np_ecn_marked_roce_packets": 5})
    assert not source.moved(MOVERS)  # a new device is the next read's
