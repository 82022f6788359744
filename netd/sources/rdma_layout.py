"""What an RDMA port's directory says once per layout scan (netd.sources.rdma rescans it every
``rescan_interval_s`` or when the device changes identity, never per tick): its counter listings, its
netdev and its GID types, and how its files group into one batched read a directory. Absent files are
absent under :mod:`netd.sources.sysfs_io`'s errno policy. Also the values a scan produces
(:class:`DeviceLayout` of :class:`PortFiles` of :class:`CounterFile`) and what a port's files read
last (:class:`Readings`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from netd.errors import SourceError
from netd.model.snapshot import Counter, CounterGroup, Overflow
from netd.sources.counter_specs import CounterSpec
from netd.sources.sysfs_io import list_dir, read_text

__all__ = [
    "CounterFile",
    "DeviceLayout",
    "PortFiles",
    "Readings",
    "directory_runs",
    "gid_types",
    "list_counters",
    "port_netdev",
]

_SOURCE = "rdma"


def list_counters(dev_dir: Path, port: str, single_port: bool) -> tuple[tuple[Path, list[str]], ...]:
    """(directory, names) of ``counters/`` and ``hw_counters/`` for one port.

    Some drivers (mlx5 in switchdev mode) register hw_counters on the device
    rather than the port; for a single-port device those are the port's.
    """
    port_dir = dev_dir / "ports" / port
    pma = port_dir / "counters"
    hw = port_dir / "hw_counters"
    hw_names = list_dir(hw, _SOURCE)
    if not hw_names and single_port:
        hw = dev_dir / "hw_counters"
        hw_names = list_dir(hw, _SOURCE)
    # lifespan is the writable cache period (ms) of hw_counters, not a counter.
    return (pma, list_dir(pma, _SOURCE)), (hw, [n for n in hw_names if n != "lifespan"])


def _indices(directory: Path) -> list[str]:
    return sorted((n for n in list_dir(directory, _SOURCE) if n.isdigit()), key=int)


def port_netdev(dev_dir: Path, port_dir: Path, port: int) -> str | None:
    """The port's netdev: GID ndevs first, then the PCI function's net/, then rxe's ``parent``."""
    ndevs = port_dir / "gid_attrs" / "ndevs"
    for index in _indices(ndevs):  # empty slots fail with EINVAL: absent
        name = read_text(ndevs / index, _SOURCE)
        if name:
            return name
    net = dev_dir / "device" / "net"
    names = list_dir(net, _SOURCE)
    if len(names) == 1:
        return names[0]
    for name in names:  # several ports on one PCI function: dev_port is the 0-based port index
        if read_text(net / name / "dev_port", _SOURCE) == str(port - 1):
            return name
    return read_text(dev_dir / "parent", _SOURCE) or None


def gid_types(port_dir: Path) -> tuple[str, ...]:
    types = port_dir / "gid_attrs" / "types"
    found = {read_text(types / i, _SOURCE) for i in _indices(types)}
    return tuple(sorted(t for t in found if t))


def directory_runs(port_dir: str, paths: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Consecutive paths of one directory as (directory, names), in order. Files under the port's
    directory are named from it (``counters/<name>``, ``hw_counters/<name>``): one kept directory
    descriptor a port serves both groups and the port's attributes, so 16 ports fit the directory
    budget (two directories a port did not, and the rest were opened by their full path)."""
    out: list[tuple[str, list[str]]] = []
    prefix = f"{port_dir}/"
    for path in paths:
        if path.startswith(prefix):
            head, name = port_dir, path[len(prefix) :]
        else:  # hw_counters of the device (single-port switchdev mlx5)
            head, _, name = path.rpartition("/")
        if out and out[-1][0] == head:
            out[-1][1].append(name)
        else:
            out.append((head, [name]))
    return tuple((head, tuple(names)) for head, names in out)


@dataclass(frozen=True, slots=True)
class CounterFile:
    """One counter file of a port: where it is, the key and name it is known by, how to parse it."""

    path: str
    key: str  # key in PortSample.counters
    label: str  # "<group dir>/<raw name>" for read_errors
    raw_name: str
    group: CounterGroup
    spec: CounterSpec
    # The spec's fields, flattened: read ~1000 times per tick on the hot path.
    name: str = ""
    width: int = 64
    overflow: Overflow = Overflow.WRAP
    scale: int = 1
    raw_max: int = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class PortFiles:
    """One port's files, split by read cadence (docs/metrics.md, Read cadence)."""

    port: int
    attrs: str  # path prefix of ports/<p>/ for state, phys_state, rate
    netdev: str | None
    link_layer: str | None
    gid_types: tuple[str, ...]
    files: tuple[CounterFile, ...]  # read on every call
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()  # the same files as (directory, names) runs
    slow_files: tuple[CounterFile, ...] = ()  # read every slow_interval_s (docs/metrics.md, Read cadence)
    slow_groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    slow_keys: frozenset[str] = frozenset()
    keys_in_order: tuple[str, ...] = ()  # the keys of files, in order
    slow_keys_in_order: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Readings:
    """What one cadence's files of a port read last: the texts as read, the Counter parsed from each
    (None when it failed), and which files to parse again whatever they read (failed, or longer than
    one read)."""

    files: tuple[CounterFile, ...]
    texts: list[bytes | None | SourceError]
    parsed: list[Counter | None]
    redo: tuple[int, ...]

    def counters(self, keys: tuple[str, ...]) -> Iterable[tuple[str, Counter]]:
        """(key, Counter) of every file that parsed; ``keys``: the files' keys in order."""
        if not self.redo:
            return zip(keys, self.parsed, strict=True)  # type: ignore[arg-type]  # nothing failed: no None
        return ((k, c) for k, c in zip(keys, self.parsed, strict=True) if c is not None)


@dataclass(frozen=True, slots=True)
class DeviceLayout:
    """One RDMA device as its last scan found it: the directory's identity, when, its ports."""

    identity: tuple[int, int, int]
    scanned_at: float
    driver: str | None
    ports: tuple[PortFiles, ...]
