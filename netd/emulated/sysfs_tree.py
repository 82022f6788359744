"""Writes sysfs-shaped RDMA trees that the real sources read.

Used by tests, by ``netd bench collect`` and by the emulated fabric, which
rewrites every counter each second, so updates are cheap: each file the
writer updates is opened once and rewritten in place with ``pwrite`` (plus
``ftruncate`` only when the text got shorter). Files are never replaced,
because readers keep descriptors open and would go on reading the old inode.

The layout follows the kernel (drivers/infiniband/core/sysfs.c) and the
fixture spec in reference/rdma-counters-dcqcn.md §8::

    class/infiniband/<dev> -> ../../devices/pci0000:00/<pci>/infiniband/<dev>
    devices/pci0000:00/<pci>/{driver -> bus/pci/drivers/<module>, net/<netdev>/, infiniband/<dev>/}
    class/net/<netdev>     -> ../../devices/pci0000:00/<pci>/net/<netdev>

rxe has no PCI parent: it lives under ``devices/virtual`` and names its
netdev in a ``parent`` file.
"""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from netd.model.snapshot import CounterGroup
from netd.sources.counter_specs import COUNTER_SETS, CounterSet, default_counter_set

__all__ = ["DeviceSpec", "SysfsTree"]

# Per driver: kernel module bound to the parent device, fw_ver, hca_type (None: not written).
_DRIVER_FILES: Mapping[str, tuple[str | None, str, str | None]] = {
    "mlx5": ("mlx5_core", "28.39.1002", "MT4129"),
    "bnxt_re": ("bnxt_en", "230.0.157.0", None),
    "irdma": ("ice", "1.71", None),
    "rxe": (None, "0.0.0", None),
}
_GID_SLOTS = 16
_GID_TYPES = ("IB/RoCE v1", "RoCE v2")  # slots 0/1 link-local, 2/3 IPv4-mapped: v1 then v2


@dataclass(frozen=True)
class DeviceSpec:
    """One RDMA device to create.

    ``counter_set``: ``"full"`` (the driver's newest set), a key of
    :data:`~netd.sources.counter_specs.COUNTER_SETS`, ``"pma_only"`` /
    ``"hw_only"`` (the full set without ``hw_counters/`` or ``counters/``),
    or ``"none"``. ``gids``: populated GID slots (0..4; 0 leaves
    ``gid_attrs`` empty so the netdev must come from ``device/net`` or
    ``parent``). ``hw_level="device"`` puts ``hw_counters/`` on the device
    (mlx5 switchdev). Port p > 1 gets netdev ``f"{netdev}p{p}"``.
    """

    name: str
    driver: str = "mlx5"
    netdev: str | None = "ens1f0np0"
    pci: str = "0000:41:00.0"
    ports: int = 1
    rate: str = "200 Gb/sec (2X NDR)"
    link_layer: str = "Ethernet"
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    counter_set: str = "full"
    gids: int = 4
    hw_level: str = "port"

    def counters(self) -> CounterSet:
        full = default_counter_set(self.driver)
        if self.counter_set == "full":
            return full
        if self.counter_set == "pma_only":
            return CounterSet(full.driver, full.pma, ())
        if self.counter_set == "hw_only":
            return CounterSet(full.driver, (), full.hw)
        if self.counter_set == "none":
            return CounterSet(full.driver, (), ())
        return COUNTER_SETS[self.counter_set]

    def netdev_of(self, port: int) -> str | None:
        if self.netdev is None or port == 1:
            return self.netdev
        return f"{self.netdev}p{port}"


def _group_dir(group: CounterGroup | str) -> str:
    return group.value if isinstance(group, CounterGroup) else group


class SysfsTree:
    """A writable fake of ``/sys`` rooted at ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._specs: dict[str, DeviceSpec] = {}
        self._counter_paths: dict[tuple[str, int], dict[str, str]] = {}
        self._fds: dict[str, int] = {}
        self._lengths: dict[str, int] = {}

    def __enter__(self) -> SysfsTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths ------------------------------------------------------------------------------

    def devices(self) -> list[str]:
        return sorted(self._specs)

    def counter_names(self, device: str, port: int) -> list[str]:
        """Raw names ``set_counters`` accepts for a port: ``counters/`` first, then ``hw_counters/``."""
        return list(self._counter_paths[(device, port)])

    def device_dir(self, name: str) -> Path:
        """The real directory of an RDMA device (``class/infiniband/<name>`` links to it)."""
        return self._parent_dir(self._specs[name]) / "infiniband" / name

    def port_dir(self, name: str, port: int) -> Path:
        return self.device_dir(name) / "ports" / str(port)

    def _parent_dir(self, spec: DeviceSpec) -> Path:
        if spec.driver == "rxe":
            return self.root / "devices" / "virtual"
        return self.root / "devices" / "pci0000:00" / spec.pci

    # -- building ---------------------------------------------------------------------------

    def add_device(self, spec: DeviceSpec) -> Path:
        """Create the device, its ports, netdevs and links; every counter reads 0."""
        if spec.name in self._specs:
            raise ValueError(f"device {spec.name} already exists")
        self._specs[spec.name] = spec
        parent = self._parent_dir(spec)
        dev = self.device_dir(spec.name)
        module, fw_ver, hca_type = _DRIVER_FILES[spec.driver]
        guid = _guid(spec.name)
        _write_files(
            dev,
            {
                "node_type": "1: CA",
                "node_guid": guid,
                "sys_image_guid": guid,
                "fw_ver": fw_ver,
                "node_desc": f"{spec.name} netd-emulated",
            },
        )
        if hca_type is not None:
            _write_files(dev, {"hca_type": hca_type, "board_id": "MT_0000000838", "hw_rev": "0x0"})
        if module is None:  # rxe: no parent device; the netdev is named in `parent`
            _write_files(dev, {"parent": spec.netdev or ""})
        else:
            drivers = self.root / "bus" / "pci" / "drivers" / module
            drivers.mkdir(parents=True, exist_ok=True)
            if not (parent / "driver").is_symlink():  # a second device on the same PCI function
                _symlink(parent / "driver", drivers)
            _symlink(dev / "device", parent)
        _symlink(self.root / "class" / "infiniband" / spec.name, dev)
        counters = spec.counters()
        if spec.hw_level == "device" and counters.hw:
            _write_counter_files(dev / "hw_counters", counters.hw)
        for port in range(1, spec.ports + 1):
            self._add_port(spec, port, counters, parent)
        return dev

    def _add_port(self, spec: DeviceSpec, port: int, counters: CounterSet, parent: Path) -> None:
        pdir = self.port_dir(spec.name, port)
        _write_files(
            pdir,
            {
                "state": spec.state,
                "phys_state": spec.phys_state,
                "rate": spec.rate,
                "link_layer": spec.link_layer,
                "lid": "0x0",
                "sm_lid": "0x0",
                "lid_mask_count": "0",
                "sm_sl": "0",
                "cap_mask": "0x04010000",
                "pkeys/0": "0xffff",
            },
        )
        netdev = spec.netdev_of(port)
        populated = min(spec.gids, 4) if netdev else 0
        gids = _gids(spec.name, port)
        _write_files(
            pdir / "gids", {str(i): gids[i] if i < populated else _ZERO_GID for i in range(_GID_SLOTS)}
        )
        # Empty slots fail with EINVAL in real sysfs; a regular file cannot, so they are absent.
        _write_files(pdir / "gid_attrs" / "types", {str(i): _GID_TYPES[i % 2] for i in range(populated)})
        _write_files(pdir / "gid_attrs" / "ndevs", {str(i): netdev or "" for i in range(populated)})
        paths = _write_counter_files(pdir / "counters", counters.pma) if counters.pma else {}
        hw_dir = (
            pdir / "hw_counters" if spec.hw_level == "port" else self.device_dir(spec.name) / "hw_counters"
        )
        if spec.hw_level == "port" and counters.hw:
            _write_counter_files(hw_dir, counters.hw)
        for name in counters.hw:  # a name in both groups is written to the PMA file
            paths.setdefault(name, str(hw_dir / name))
        self._counter_paths[(spec.name, port)] = paths
        if netdev is not None:
            self._add_netdev(parent, netdev, port, spec.rate)

    def _add_netdev(self, parent: Path, netdev: str, port: int, rate: str) -> None:
        net = parent / "net" / netdev
        speed = int(float(rate.split()[0]) * 1000) if rate[:1].isdigit() else -1  # Mb/s; -1: unknown
        _write_files(
            net,
            {
                "operstate": "up",
                "carrier": "1",
                "speed": str(speed),
                "mtu": "4200",
                "ifindex": str(zlib.crc32(netdev.encode()) % 10000 + 2),
                "dev_port": str(port - 1),
                "address": _mac(netdev),
            },
        )
        _symlink(self.root / "class" / "net" / netdev, net)

    # -- updating (in place) ----------------------------------------------------------------

    def set_counters(self, device: str, port: int, values: Mapping[str, int]) -> None:
        """Write raw values as the driver prints them (PMA data in 4-byte words)."""
        paths = self._counter_paths[(device, port)]
        for name, value in values.items():
            try:
                path = paths[name]
            except KeyError:
                raise KeyError(f"{device}/{port} has no counter {name!r}") from None
            self._rewrite(path, b"%d\n" % value)

    def set_port_state(self, device: str, port: int, state: str, phys_state: str) -> None:
        pdir = self.port_dir(device, port)
        self._rewrite(str(pdir / "state"), f"{state}\n".encode())
        self._rewrite(str(pdir / "phys_state"), f"{phys_state}\n".encode())

    def set_raw(self, device: str, port: int, group: CounterGroup | str, name: str, text: str) -> None:
        """Write ``text`` verbatim into a counter file (created if missing): for hostile values."""
        directory = self.port_dir(device, port) / _group_dir(group)
        directory.mkdir(parents=True, exist_ok=True)
        self._rewrite(str(directory / name), text.encode())

    def _rewrite(self, path: str, data: bytes) -> None:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._lengths[path] = os.fstat(fd).st_size
        os.pwrite(fd, data, 0)
        # Growing text needs no truncate; readers parse the first line only (see rdma.parse_counter).
        if len(data) < self._lengths[path]:
            os.ftruncate(fd, len(data))
        self._lengths[path] = len(data)

    # -- removal ----------------------------------------------------------------------------

    def remove_device(self, name: str) -> None:
        """Hot-unplug: the device, its links and netdevs disappear; the name can be added again."""
        spec = self._specs.pop(name)
        parent = self._parent_dir(spec)
        dev = parent / "infiniband" / name
        self._close_under(f"{dev}/")
        for port in range(1, spec.ports + 1):
            self._counter_paths.pop((name, port), None)
            netdev = spec.netdev_of(port)
            if netdev is not None:
                (self.root / "class" / "net" / netdev).unlink(missing_ok=True)
                shutil.rmtree(parent / "net" / netdev, ignore_errors=True)
        (self.root / "class" / "infiniband" / name).unlink(missing_ok=True)
        shutil.rmtree(dev, ignore_errors=True)
        if spec.driver != "rxe" and not any(s.pci == spec.pci for s in self._specs.values()):
            shutil.rmtree(parent, ignore_errors=True)

    def close(self) -> None:
        self._close_under("")

    def _close_under(self, prefix: str) -> None:
        for path in [p for p in self._fds if p.startswith(prefix)]:
            os.close(self._fds.pop(path))
            self._lengths.pop(path, None)


_ZERO_GID = ":".join(["0000"] * 8)


def _write_files(directory: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def _write_counter_files(directory: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Create counter files reading 0; returns name -> path."""
    _write_files(directory, dict.fromkeys(names, "0"))
    if directory.name == "hw_counters":
        _write_files(directory, {"lifespan": "10"})  # ms the kernel caches a hw_counters read
    return {n: str(directory / n) for n in names}


def _symlink(link: Path, target: Path) -> None:
    """A relative link, like sysfs's, so the tree can be moved."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _mac_bytes(seed: str) -> bytes:
    h = zlib.crc32(seed.encode()).to_bytes(4, "big")
    return bytes((0x0C, 0x42, 0xA1)) + h[:3]  # NVIDIA OUI, stable per name


def _mac(seed: str) -> str:
    return ":".join(f"{b:02x}" for b in _mac_bytes(seed))


def _guid(seed: str) -> str:
    m = _mac_bytes(seed)
    return f"{m[0]:02x}{m[1]:02x}:{m[2]:02x}03:00{m[3]:02x}:{m[4]:02x}{m[5]:02x}"


def _gids(device: str, port: int) -> list[str]:
    """Link-local (modified EUI-64 of the MAC) and IPv4-mapped GIDs, each as v1 then v2."""
    m = _mac_bytes(f"{device}/{port}")
    eui = bytes((m[0] ^ 0x02, m[1], m[2], 0xFF, 0xFE, m[3], m[4], m[5]))
    link_local = bytes((0xFE, 0x80)) + bytes(6) + eui
    v4_mapped = bytes(10) + b"\xff\xff" + bytes((10, m[3], m[4], m[5] or 1))
    as_text = [":".join(g[i : i + 2].hex() for i in range(0, 16, 2)) for g in (link_local, v4_mapped)]
    return [as_text[0], as_text[0], as_text[1], as_text[1]]
