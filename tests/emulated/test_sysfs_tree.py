"""The sysfs-shaped tree writer: layout, in-place updates, removal."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.model.snapshot import CounterGroup
from netd.sources.counter_specs import COUNTER_SETS


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[SysfsTree]:
    with SysfsTree(tmp_path) as t:
        yield t


def _text(path: Path) -> str:
    return path.read_text()


def test_mlx5_layout(tree: SysfsTree) -> None:
    tree.add_device(DeviceSpec("mlx5_0"))
    root = tree.root
    ib = root / "class" / "infiniband" / "mlx5_0"
    assert ib.is_symlink() and not os.path.isabs(os.readlink(ib))  # relative, as in sysfs
    assert (
        ib.resolve() == (root / "devices" / "pci0000:00" / "0000:41:00.0" / "infiniband" / "mlx5_0").resolve()
    )
    assert {p.name for p in ib.iterdir()} >= {
        "node_type",
        "node_guid",
        "fw_ver",
        "hca_type",
        "board_id",
        "device",
        "ports",
    }
    assert _text(ib / "node_type") == "1: CA\n"
    assert re.fullmatch(r"([0-9a-f]{4}:){3}[0-9a-f]{4}\n", _text(ib / "node_guid"))
    assert _text(ib / "hca_type") == "MT4129\n"
    assert os.path.basename(os.readlink(ib / "device" / "driver")) == "mlx5_core"
    assert (ib / "device" / "net" / "ens1f0np0" / "operstate").read_text() == "up\n"
    net = root / "class" / "net" / "ens1f0np0"
    assert {p.name for p in net.iterdir()} >= {"operstate", "carrier", "speed", "mtu", "ifindex"}
    port = ib / "ports" / "1"
    expected = {
        "state": "4: ACTIVE\n",
        "phys_state": "5: LinkUp\n",
        "rate": "200 Gb/sec (2X NDR)\n",
        "link_layer": "Ethernet\n",
        "lid": "0x0\n",
        "sm_lid": "0x0\n",
        "pkeys/0": "0xffff\n",
        "hw_counters/lifespan": "10\n",
        "gid_attrs/types/1": "RoCE v2\n",
        "gid_attrs/ndevs/3": "ens1f0np0\n",
    }
    assert {rel: _text(port / rel) for rel in expected} == expected
    assert sorted(os.listdir(port / "counters")) == sorted(COUNTER_SETS["mlx5"].pma)
    assert sorted(os.listdir(port / "hw_counters")) == sorted([*COUNTER_SETS["mlx5"].hw, "lifespan"])
    assert all(_text(port / "counters" / n) == "0\n" for n in COUNTER_SETS["mlx5"].pma)


def test_gid_table(tree: SysfsTree) -> None:
    port = tree.add_device(DeviceSpec("mlx5_0")) / "ports" / "1"
    gids = [_text(port / "gids" / str(i)).strip() for i in range(16)]
    assert all(re.fullmatch(r"([0-9a-f]{4}:){7}[0-9a-f]{4}", g) for g in gids)
    assert gids[0] == gids[1] and gids[0].startswith("fe80:0000:0000:0000:")
    assert gids[2] == gids[3] and gids[2].startswith("0000:0000:0000:0000:0000:ffff:0a")
    assert set(gids[4:]) == {"0000:0000:0000:0000:0000:0000:0000:0000"}
    # Empty slots would fail with EINVAL in sysfs; here they are simply absent.
    assert sorted(os.listdir(port / "gid_attrs" / "types")) == ["0", "1", "2", "3"]
    assert [_text(port / "gid_attrs" / "types" / str(i)) for i in range(4)] == [
        "IB/RoCE v1\n",
        "RoCE v2\n",
    ] * 2


@pytest.mark.parametrize(
    ("counter_set", "hw_level", "pma", "port_hw", "dev_hw"),
    [
        ("full", "port", 21, 32, None),
        ("pma_only", "port", 21, None, None),
        ("hw_only", "port", None, 32, None),
        ("none", "port", None, None, None),
        ("full", "device", 21, None, 32),
        ("mlx5_legacy_pma", "port", 17, 32, None),
    ],
)
def test_counter_set_variants(
    tree: SysfsTree, counter_set: str, hw_level: str, pma: int | None, port_hw: int | None, dev_hw: int | None
) -> None:
    dev = tree.add_device(DeviceSpec("mlx5_0", counter_set=counter_set, hw_level=hw_level))

    def count(p: Path) -> int | None:
        return len(os.listdir(p)) if p.is_dir() else None

    assert count(dev / "ports" / "1" / "counters") == pma
    assert count(dev / "ports" / "1" / "hw_counters") == port_hw
    assert count(dev / "hw_counters") == dev_hw


@pytest.mark.parametrize("driver", ["bnxt_re", "irdma"])
def test_vendor_layouts_have_no_pma(tree: SysfsTree, driver: str) -> None:
    dev = tree.add_device(DeviceSpec(f"{driver}0", driver=driver))
    assert not (dev / "ports" / "1" / "counters").exists()
    if driver == "irdma":
        assert (dev / "ports" / "1" / "hw_counters" / "RNR received").read_text() == "0\n"


def test_rxe_layout(tree: SysfsTree) -> None:
    dev = tree.add_device(DeviceSpec("rxe0", driver="rxe", netdev="eth0"))
    assert dev == tree.root / "devices" / "virtual" / "infiniband" / "rxe0"
    assert _text(dev / "parent") == "eth0\n"
    assert not (dev / "device").exists()
    assert (tree.root / "class" / "net" / "eth0" / "operstate").exists()


def test_set_counters_rewrites_in_place(tree: SysfsTree) -> None:
    tree.add_device(DeviceSpec("mlx5_0"))
    path = tree.port_dir("mlx5_0", 1) / "hw_counters" / "np_cnp_sent"
    inode = path.stat().st_ino
    fd = os.open(path, os.O_RDONLY)  # a reader that keeps its descriptor, like PreadCache
    try:
        tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 123456789, "port_rcv_data": 5})
        assert os.pread(fd, 4096, 0) == b"123456789\n"
        tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 7})  # shorter: truncated, no stale tail
        assert os.pread(fd, 4096, 0) == b"7\n"
    finally:
        os.close(fd)
    assert path.stat().st_ino == inode
    assert _text(tree.port_dir("mlx5_0", 1) / "counters" / "port_rcv_data") == "5\n"


def test_set_counters_rejects_unknown_names(tree: SysfsTree) -> None:
    tree.add_device(DeviceSpec("rxe0", driver="rxe", netdev="eth0"))
    with pytest.raises(KeyError, match="np_cnp_sent"):
        tree.set_counters("rxe0", 1, {"np_cnp_sent": 1})
    assert tree.counter_names("rxe0", 1) == list(COUNTER_SETS["rxe"].hw)
    assert tree.devices() == ["rxe0"]


def test_set_port_state_and_raw(tree: SysfsTree) -> None:
    tree.add_device(DeviceSpec("mlx5_0"))
    port = tree.port_dir("mlx5_0", 1)
    inode = (port / "state").stat().st_ino
    tree.set_port_state("mlx5_0", 1, "1: DOWN", "3: Disabled")
    assert (_text(port / "state"), _text(port / "phys_state")) == ("1: DOWN\n", "3: Disabled\n")
    assert (port / "state").stat().st_ino == inode
    tree.set_raw("mlx5_0", 1, CounterGroup.PMA, "symbol_error", "N/A (no PMA)\n")
    tree.set_raw("mlx5_0", 1, "hw_counters", "brand_new", "")
    assert _text(port / "counters" / "symbol_error") == "N/A (no PMA)\n"
    assert _text(port / "hw_counters" / "brand_new") == ""


def test_remove_and_add_again(tree: SysfsTree) -> None:
    tree.add_device(DeviceSpec("mlx5_0"))
    tree.add_device(DeviceSpec("mlx5_1", netdev="ens1f1np1", pci="0000:41:00.1"))
    tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 5})
    tree.remove_device("mlx5_0")
    root = tree.root
    assert not os.path.lexists(root / "class" / "infiniband" / "mlx5_0")
    assert not os.path.lexists(root / "class" / "net" / "ens1f0np0")
    assert not (root / "devices" / "pci0000:00" / "0000:41:00.0").exists()
    assert (root / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "state").exists()
    tree.add_device(DeviceSpec("mlx5_0"))
    tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 9})
    assert _text(tree.port_dir("mlx5_0", 1) / "hw_counters" / "np_cnp_sent") == "9\n"
    with pytest.raises(ValueError, match="already exists"):
        tree.add_device(DeviceSpec("mlx5_0"))


def test_multi_port_netdevs(tree: SysfsTree) -> None:
    dev = tree.add_device(DeviceSpec("mlx4_0", ports=2, netdev="eth1", counter_set="pma_only"))
    nets = dev / "device" / "net"
    assert sorted(os.listdir(nets)) == ["eth1", "eth1p2"]
    assert [_text(nets / n / "dev_port") for n in ("eth1", "eth1p2")] == ["0\n", "1\n"]
    assert _text(dev / "ports" / "2" / "gid_attrs" / "ndevs" / "0") == "eth1p2\n"


def test_close_releases_descriptors(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    tree = SysfsTree(tmp_path)
    tree.add_device(DeviceSpec("mlx5_0"))
    tree.set_counters("mlx5_0", 1, dict.fromkeys(tree.counter_names("mlx5_0", 1), 1))
    assert len(os.listdir("/proc/self/fd")) == before + 52
    tree.close()
    assert len(os.listdir("/proc/self/fd")) == before
