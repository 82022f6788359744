"""ETHTOOL_GSTATS of netdevs, from the kernel (ioctl) or from ``ethtool -S`` text captures.

mlx5 keeps its PFC/pause counters here (reference §3). The kernel hands out names and values in two
calls (ETHTOOL_GSTRINGS, ETHTOOL_GSTATS) that pair up only by position, and the set is dynamic: toggling
PFC on a priority adds or removes five names. pyroute2's ``IoctlEthtool.get_statistics()`` caches the
names once and sends GSTATS with ``n_stats=0`` ("no check"), so after such a change it pairs values with
the wrong names or lets the kernel write past its buffer. :class:`IoctlStatsReader` therefore checks the
count on every read, sends GSTATS with ``n_stats`` set (kernels with 7b07be1ff1cb, Dec 2025, answer
``n_stats=0`` instead of writing when it is stale) and re-reads the names on any mismatch.
"""

from __future__ import annotations

import ctypes
import fcntl
import fnmatch
import os
import socket
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from netd.errors import EthtoolError, SourceError
from netd.model.snapshot import EthtoolSample, frozen_map
from netd.sources.ethtool_raw import RawSamples
from netd.sources.ethtool_read import (
    ETH_GSTRING_LEN,
    StatsRead,
    StatsReader,
    invalid_netdev_name,
)
from netd.sources.ethtool_text import CapturedStatsReader, format_ethtool_text, parse_ethtool_text
from netd.sources.sysfs_io import ABSENT_ERRNOS

__all__ = [
    "CapturedStatsReader",
    "EthtoolSource",
    "IoctlStatsReader",
    "StatsRead",
    "StatsReader",
    "format_ethtool_text",
    "invalid_netdev_name",
    "make_reader",
    "parse_ethtool_text",
]

SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSTATS = 0x1D
ETHTOOL_GSSET_INFO = 0x37
ETH_SS_STATS = 1
_IFREQ_SIZE = 40  # sizeof(struct ifreq) on 64-bit: 16-byte name + 24-byte union
_COMMANDS = {
    ETHTOOL_GSTRINGS: "ETHTOOL_GSTRINGS",
    ETHTOOL_GSTATS: "ETHTOOL_GSTATS",
    ETHTOOL_GSSET_INFO: "ETHTOOL_GSSET_INFO",
}


class IoctlStatsReader:
    """ETHTOOL_GSTATS through SIOCETHTOOL on one datagram socket.

    The kernel resolves ``ifr_name`` in the network namespace of the *socket* (dev_ioctl() uses
    sock_net()), so a reader reads the namespace that was current when it was constructed, from any
    thread. A changed count is caught by GSSET_INFO, but mlx5 keeps the count when PFC moves from one
    priority to another and only the names show it; so by default (``names_recheck_every=1``) the
    names are re-read on every read, which costs one cheap call beside GSTATS's many firmware reads.
    ``N`` re-reads them every N-th read (values may sit on stale names for up to N-1 reads of such a
    move); ``0`` only when the count changes. ``read_raw(netdev, False)`` is a read that skips them
    (the count is still checked): the PFC fast path's calm probes, between reads that do not, so a
    same-count move is seen at the next tick or evaluated sample at the latest (docs/detection.md).
    """

    def __init__(self, names_recheck_every: int = 1) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._names: dict[str, _Names] = {}
        self._age: dict[str, int] = {}
        self._recheck = names_recheck_every
        self.names_reloads = 0

    def read(self, netdev: str) -> StatsRead:
        got = self._checked(netdev)
        if isinstance(got, StatsRead):
            return got
        names, values = got
        return StatsRead(frozen_map(dict(zip(names.first, values, strict=True))), bad=names.bad)

    def read_some(self, netdev: str, names: tuple[str, ...]) -> StatsRead:
        """ETHTOOL_GSTATS has no per-statistic variant: the whole set is read, then only ``names``
        are picked out (by position, learnt once per name set)."""
        return self.pick(self.read_raw(netdev), names)

    def read_kept(self, netdev: str, keep: Callable[[str], bool]) -> StatsRead:
        """The whole set read, only the names ``keep`` accepts picked out (decided once per name table)."""
        raw = self.read_raw(netdev)
        return raw if isinstance(raw, StatsRead) else self.pick(raw, raw[0].kept(keep))

    def read_raw(self, netdev: str, recheck_names: bool = True) -> tuple[_Names, tuple[int, ...]] | StatsRead:
        """The name table and values of one read, or why there are none: what :meth:`pick` and
        :meth:`token` take. ``recheck_names=False`` skips the name re-read (the count is still
        checked): the PFC fast path's calm probes, between reads that do re-read them. On veth with
        145 statistics ETHTOOL_GSTRINGS is 24 of a read's 32 µs of CPU (the kernel formats every
        name); mlx5 formats thousands with many channels."""
        return self._checked(netdev, recheck_names)

    @staticmethod
    def pick(raw: tuple[_Names, tuple[int, ...]] | StatsRead, names: tuple[str, ...]) -> StatsRead:
        """What :meth:`read_some` returns, from a :meth:`read_raw` result."""
        if isinstance(raw, StatsRead):
            return raw
        table, values = raw
        return StatsRead(frozen_map({n: values[i] for n, i in table.positions(names)}), bad=table.bad)

    @staticmethod
    def token(
        raw: tuple[_Names, tuple[int, ...]] | StatsRead, names: tuple[str, ...]
    ) -> tuple[object, ...] | None:
        """A stand-in for the values of ``names`` in a :meth:`read_raw` result: equal tokens, equal
        values. The name table is part of it (a new table is a new object), so values at the same
        positions of a table whose names moved never compare equal."""
        if isinstance(raw, StatsRead):
            return None
        table, values = raw
        return (table, *(values[i] for _, i in table.positions(names)))

    def close(self) -> None:
        self._sock.close()

    def __del__(self) -> None:  # best effort, and no ResourceWarning; owners call close()
        sock = getattr(self, "_sock", None)
        if sock is not None:
            sock.close()

    def _checked(self, netdev: str, recheck: bool = True) -> tuple[_Names, tuple[int, ...]] | StatsRead:
        why = invalid_netdev_name(netdev)
        if why is not None:
            return StatsRead.absent(why)
        try:
            return self._read(netdev, recheck)
        except _Absent as exc:
            self._names.pop(netdev, None)  # the device may come back as a different one
            self._age.pop(netdev, None)
            return StatsRead.absent(str(exc))

    def _read(self, netdev: str, recheck: bool = True) -> tuple[_Names, tuple[int, ...]] | StatsRead:
        for _attempt in range(2):  # the count may change between calls; retry once, never guess
            count = self._count(netdev)
            if count is None:
                return StatsRead.absent("driver has no ethtool statistics (ETH_SS_STATS not offered)")
            names = self._names.get(netdev)
            # A read that skips the recheck does not age the names: the next one that may is due as before.
            age = self._age.get(netdev, 0) + (1 if recheck else 0)
            due = recheck and self._recheck and age >= self._recheck
            if names is None or len(names.all) != count or due:
                raw = self._strings(netdev, count)
                if raw is None:
                    continue
                if names is None or raw != names.raw:  # decoded only when the driver's table moved
                    fresh = _Names.decode(raw)
                    if names is not None and fresh.all != names.all:
                        self.names_reloads += 1
                    names = self._names[netdev] = fresh
                age = 0
            self._age[netdev] = age
            values = self._stats(netdev, len(names.all))
            if values is None:
                continue
            return names, names.firsts(values)
        return StatsRead.absent("statistics count kept changing while being read")

    def _count(self, netdev: str) -> int | None:
        buf = ctypes.create_string_buffer(20)  # {u32 cmd; u32 reserved; u64 sset_mask; u32 data[1]}
        struct.pack_into("=IIQ", buf, 0, ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS)
        self._ioctl(netdev, ETHTOOL_GSSET_INFO, buf)
        # The kernel clears the mask bit of a set the driver does not have (lo) instead of failing.
        if not struct.unpack_from("=Q", buf, 8)[0] & (1 << ETH_SS_STATS):
            return None
        return int(struct.unpack_from("=I", buf, 16)[0])

    def _strings(self, netdev: str, count: int) -> bytes | None:
        """The driver's name table as the kernel wrote it (``count`` names of ETH_GSTRING_LEN bytes),
        or None when the count moved meanwhile."""
        # Room for twice the count: kernels before 7b07be1ff1cb ignore ``len`` and write the current set.
        buf = ctypes.create_string_buffer(12 + ETH_GSTRING_LEN * (2 * count + 64))
        struct.pack_into("=III", buf, 0, ETHTOOL_GSTRINGS, ETH_SS_STATS, count)
        self._ioctl(netdev, ETHTOOL_GSTRINGS, buf)
        if struct.unpack_from("=I", buf, 8)[0] != count:  # new kernels answer len=0 when it moved
            return None
        return ctypes.string_at(ctypes.addressof(buf) + 12, ETH_GSTRING_LEN * count)

    def _stats(self, netdev: str, count: int) -> tuple[int, ...] | None:
        buf = ctypes.create_string_buffer(8 + 8 * (2 * count + 64))
        struct.pack_into("=II", buf, 0, ETHTOOL_GSTATS, count)
        self._ioctl(netdev, ETHTOOL_GSTATS, buf)
        if struct.unpack_from("=I", buf, 4)[0] != count:  # 0 (new kernels) or the new count (old ones)
            return None
        return struct.unpack_from(f"={count}Q", buf, 8)

    def _ioctl(self, netdev: str, command: int, buf: ctypes.Array[ctypes.c_char]) -> None:
        """One SIOCETHTOOL call; the only place that touches the kernel (tests replace it)."""
        ifreq = struct.pack("16sP", os.fsencode(netdev), ctypes.addressof(buf)).ljust(_IFREQ_SIZE, b"\0")
        try:
            fcntl.ioctl(self._sock.fileno(), SIOCETHTOOL, ifreq)
        except OSError as exc:
            name = _COMMANDS.get(command, hex(command))
            if exc.errno in ABSENT_ERRNOS:
                raise _Absent(f"{name}: {exc.strerror}") from exc
            raise EthtoolError(netdev, name, exc.errno or 0, exc.strerror or str(exc)) from exc


class _Absent(Exception):
    """Internal: an errno that means "not there" unwinds a read to StatsRead.absent()."""


class _Names:
    """One netdev's statistics names, decoded once per name table the driver hands out.

    The names are re-read on every read by default (a PFC move keeps the count), but decoding ~150
    names in Python cost three times the rest of a read: the raw table is compared first and decoded
    only when it differs. Duplicated names keep their first position (the first occurrence wins, as in
    :func:`~netd.sources.ethtool_read.ordered_stats`) and are named in ``bad``.
    """

    __slots__ = ("all", "bad", "first", "raw", "_first_at", "_kept", "_positions")

    def __init__(self, raw: bytes, names: tuple[str, ...]) -> None:
        self.raw = raw
        self.all = names
        index: dict[str, int] = {}
        bad: list[str] = []
        for i, name in enumerate(names):
            if name in index:
                bad.append(name)
            else:
                index[name] = i
        self.first = tuple(index)
        self.bad = tuple(bad)
        # positions of the first occurrences, or None when there is no duplicate (all of them)
        self._first_at = None if not bad else tuple(index.values())
        self._positions: dict[tuple[str, ...], tuple[tuple[str, int], ...]] = {}
        self._kept: dict[Callable[[str], bool], tuple[str, ...]] = {}

    @classmethod
    def decode(cls, raw: bytes) -> _Names:
        # Strip: older mlx5 named a counter "tx_pause_storm_warning_events " (trailing space).
        names = tuple(
            raw[i : i + ETH_GSTRING_LEN].split(b"\0", 1)[0].decode("utf-8", "replace").strip()
            for i in range(0, len(raw), ETH_GSTRING_LEN)
        )
        return cls(raw, names)

    def firsts(self, values: tuple[int, ...]) -> tuple[int, ...]:
        """``values`` (one per name) narrowed to the first occurrence of each name."""
        return values if self._first_at is None else tuple(values[i] for i in self._first_at)

    def kept(self, keep: Callable[[str], bool]) -> tuple[str, ...]:
        """The names ``keep`` accepts, in driver order (first occurrences), asked once per table."""
        names = self._kept.get(keep)
        if names is None:
            names = self._kept[keep] = tuple(n for n in self.first if keep(n))
        return names

    def positions(self, wanted: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
        """(name, position in :meth:`firsts`) of each wanted name present, learnt once per tuple."""
        found = self._positions.get(wanted)
        if found is None:
            if len(self._positions) >= 64:  # the fast path asks with one tuple per netdev
                self._positions.clear()
            order = {n: k for k, n in enumerate(self.first)}
            found = self._positions[wanted] = tuple((n, order[n]) for n in wanted if n in order)
        return found


class EthtoolSource:
    """Samples for the wanted netdevs; one netdev that fails never stops the others."""

    def __init__(
        self,
        reader: StatsReader,
        include: Sequence[str] = ("*",),
        exclude: Sequence[str] = (),
        keep: Callable[[str], bool] | None = None,
    ) -> None:
        self.reader = reader
        self._include = tuple(include)
        self._exclude = tuple(exclude)
        # Which statistics a whole read keeps (None: all). The collector passes netd's vocabulary: a
        # 64-channel mlx5 netdev has ~4000 statistics and netd uses ~60 of them.
        self._keep = keep
        self._wanted: dict[str, bool] = {}

    def wanted(self, netdev: str) -> bool:
        """fnmatch include/exclude on the name (exclude wins): some DGX ports must never be polled.
        Decided once per name (the fast path asks 13 times a second)."""
        known = self._wanted.get(netdev)
        if known is None:
            if len(self._wanted) >= 4096:
                self._wanted.clear()
            known = self._wanted[netdev] = any(
                fnmatch.fnmatchcase(netdev, p) for p in self._include
            ) and not any(fnmatch.fnmatchcase(netdev, p) for p in self._exclude)
        return known

    @property
    def names_reloads(self) -> int:
        return self.reader.names_reloads

    def read(
        self, netdevs: Iterable[str], only: Mapping[str, tuple[str, ...]] | None = None
    ) -> tuple[dict[str, EthtoolSample], dict[str, str]]:
        """(samples of netdevs that answered, reasons): a reason says why a netdev is absent or failed,
        or, for a netdev that also has a sample, which of its values were skipped. Excluded netdevs
        appear in neither. ``only``: per netdev, the statistics wanted (the PFC fast path's few);
        a netdev not in it is read whole (narrowed to what ``keep`` accepts)."""
        samples: dict[str, EthtoolSample] = {}
        reasons: dict[str, str] = {}
        for netdev in netdevs:
            if not self.wanted(netdev) or netdev in samples or netdev in reasons:
                continue
            names = None if only is None else only.get(netdev)
            try:
                if names is not None:
                    got = self.reader.read_some(netdev, names)
                elif self._keep is not None:
                    got = self.reader.read_kept(netdev, self._keep)
                else:
                    got = self.reader.read(netdev)
            except SourceError as exc:
                reasons[netdev] = f"error: {exc}"
                continue
            if got.stats is None:
                reasons[netdev] = f"absent: {got.reason}"
                continue
            samples[netdev] = EthtoolSample(netdev, got.stats)
            if got.bad:
                reasons[netdev] = "skipped values: " + ", ".join(got.bad)
        return samples, reasons

    def read_raw(self, only: Mapping[str, tuple[str, ...]], recheck_names: bool = True) -> RawSamples:
        """The samples ``read(only, only=only)`` would return, read now and parsed only when looked at
        (the PFC fast path compares a calm sample by :meth:`RawSamples.pause_token` and never parses
        it). A read that raises is left out, as ``read`` leaves it out of its samples.
        ``recheck_names=False``: a reader that can skip re-reading the name table does (the ioctl
        reader; a capture carries its names)."""
        raws: dict[str, object] = {}
        read_raw, wanted = self.reader.read_raw, self.wanted
        for netdev in only:
            if wanted(netdev):
                try:
                    raws[netdev] = read_raw(netdev, recheck_names)
                except SourceError:
                    raws[netdev] = None
        return RawSamples(self.reader, raws, only)

    def close(self) -> None:
        self.reader.close()


def make_reader(backend: str, sysfs_root: Path) -> StatsReader:
    """``ioctl`` (the running kernel), ``files`` (captures under ``sysfs_root``), or ``auto``: ioctl
    exactly when ``sysfs_root`` is the real ``/sys``, so a replayed or emulated tree never mixes with
    the live kernel's netdevs."""
    if backend == "auto":
        backend = "ioctl" if Path(sysfs_root).resolve() == Path("/sys") else "files"
    if backend == "ioctl":
        return IoctlStatsReader()
    if backend == "files":
        return CapturedStatsReader(sysfs_root)
    raise ValueError(f"ethtool backend must be one of auto, ioctl, files; got {backend!r}")
