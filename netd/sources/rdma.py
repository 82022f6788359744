"""RDMA port state and counters from ``<sysfs>/class/infiniband``.

Each tick: one listdir of the class directory, one stat per device before
and after reading it, and one ``pread`` per attribute and counter file on a
descriptor kept open (:class:`~netd.sources.sysfs_io.PreadCache`) while the
descriptor budget lasts, open-pread-close beyond it (opened by name under the
port's directory, one kept descriptor a port, while the directory budget lasts). What
changes rarely (the port list, the counter file names and their meaning, the
netdev, GID types, link layer, driver) is the device's *layout*, scanned again
every ``rescan_interval_s`` or at once when the device directory changes
identity (hot unplug and return, driver reload). A bad value never raises and
never hides the other counters: it is left out and named in
``PortSample.read_errors``.

Two cadences (docs/metrics.md, Read cadence): the counters some per-tick signal or detector reads
(``netd.vocabulary.metric_names.TICK_COUNTERS``) are read on every call; the others only feed
exported totals and are read every ``slow_interval_s``, their last readings carried over in between
(``PortSample.slow_counters``, ``slow_read``). On mlx5 that is 23 of 52 files a port: each file read
is three syscalls under the descriptor budget, and the reads were most of a calm daemon's CPU.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import ne
from pathlib import Path

from netd.errors import SourceError
from netd.model.snapshot import Counter, CounterGroup, Overflow, PortSample, frozen_map
from netd.sources import counter_specs
from netd.sources.counter_specs import CounterSpec
from netd.sources.rdma_layout import (
    CounterFile,
    DeviceLayout,
    PortFiles,
    Readings,
    directory_runs,
    gid_types,
    list_counters,
    port_netdev,
)
from netd.sources.rdma_values import parse_counter, parse_rate, parse_state, rate_problem, rate_value
from netd.sources.sysfs_io import (
    DEFAULT_MAX_DIRS,
    DEFAULT_MAX_OPEN,
    PreadCache,
    list_dir,
    read_text,
    stat_identity,
)
from netd.vocabulary.metric_names import TICK_COUNTERS

__all__ = ["RdmaSysfs", "parse_counter", "parse_rate", "parse_state", "rate_problem"]

_SOURCE = "rdma"
_COUNTER_READ = 64  # bytes per counter pread: "%llu\n" is at most 21
# Ticks jitter around whole intervals: a slow read due within this fraction of the slow interval is
# taken now rather than a whole tick later.
_SLOW_EARLY = 0.05
_ATTRS = ("rate", "state", "phys_state")  # read every tick with the counters
_TICK_KEY, _SLOW_KEY = "\0tick", "\0slow"  # RdmaSysfs._last: a port's two cadences
_Runs = tuple[tuple[str, tuple[str, ...]], ...]  # (directory, names) of one batched read each


class RdmaSysfs:
    """Reads every RDMA port under ``<sysfs>/class/infiniband``. Not thread-safe."""

    def __init__(
        self,
        sysfs: Path = Path("/sys"),
        include: Sequence[str] = ("*",),
        exclude: Sequence[str] = (),
        rescan_interval_s: float = 30.0,
        max_open: int = DEFAULT_MAX_OPEN,
        max_dirs: int = DEFAULT_MAX_DIRS,
        slow_interval_s: float = 0.0,
    ) -> None:
        self._root = Path(sysfs) / "class" / "infiniband"
        self._include = tuple(include)
        self._exclude = tuple(exclude)
        self._rescan = rescan_interval_s
        self._slow = slow_interval_s  # 0: every counter on every call
        self._slow_at: dict[str, float] = {}  # device -> when its slow counters were last read
        # port attrs path -> the read errors of its slow counters at their last read (carried too)
        self._slow_errors: dict[str, tuple[str, ...]] = {}
        # Files of the real /sys are never replaced; a replayed or emulated tree's may be (by rename),
        # and a kept descriptor would then read a frozen value: check those (sysfs_io, Replayed trees).
        self._cache = PreadCache(
            _SOURCE, max_open, verify=Path(sysfs).resolve() != Path("/sys"), max_dirs=max_dirs
        )
        self._layouts: dict[str, DeviceLayout] = {}
        # port attrs path + cadence -> what its files read last (Readings): most counters of a calm
        # port read the same text tick after tick; parsing and building ~900 Counters a tick was a
        # quarter of the read. A rescan makes new PortFiles objects, so nothing outlives its layout.
        self._last: dict[str, Readings] = {}
        # port attrs path -> (its files, names, picks, runs) of moved(): _movers_plan
        self._plans: dict[str, tuple[tuple[CounterFile, ...], frozenset[str], tuple[int, ...], _Runs]] = {}
        self.files_read = 0  # counter files read by the last read()
        self.errors: tuple[str, ...] = ()  # devices skipped by the last read(), with the reason

    @property
    def opens(self) -> int:
        """Descriptors opened so far; steady across ticks once every file is open."""
        return self._cache.opens

    @property
    def open_descriptors(self) -> int:
        """Descriptors kept open now: at most the budget, whatever the number of ports."""
        return len(self._cache)

    def devices(self) -> list[str]:
        """Names of the RDMA devices present now that pass the include/exclude patterns."""
        return [n for n in list_dir(self._root, _SOURCE) if self._wanted(n)]

    def read(self, now_monotonic: float | None = None) -> tuple[PortSample, ...]:
        now = time.monotonic() if now_monotonic is None else now_monotonic
        self.files_read = 0
        errors: list[str] = []
        names = self.devices()
        for gone in self._layouts.keys() - set(names):
            self._forget(gone)
        samples: list[PortSample] = []
        for name in names:
            try:
                samples.extend(self._read_device(name, now))
            except SourceError as exc:  # e.g. EIO listing a port: skip the device, keep the others
                self._forget(name)
                errors.append(f"{name}: {exc}")
        self.errors = tuple(errors)
        return tuple(samples)

    def moved(self, names: frozenset[str]) -> bool:
        """Whether a tick-cadence counter with a vocabulary name in ``names`` reads other than at the
        last :meth:`read`: a look between ticks (the calm cadence's, netd.daemon.cadence) that
        reads those files only, through the same descriptors, and compares their texts unparsed. A
        file that fails to read counts as moved (the tick explains it); a port the last read did
        not read is not looked at (the next read is its first)."""
        read = self._cache.read_dir
        for layout in self._layouts.values():
            for port in layout.ports:
                last = self._last.get(port.attrs + _TICK_KEY)
                if last is None or last.files is not port.files:
                    continue
                picks, runs = self._movers_plan(port, names)
                texts = [t for directory, files in runs for t in read(directory, files, _COUNTER_READ)]
                if texts != [last.texts[i] for i in picks]:
                    return True
        return False

    def _movers_plan(self, port: PortFiles, names: frozenset[str]) -> tuple[tuple[int, ...], _Runs]:
        """Which of the port's files :meth:`moved` reads (their indices in ``port.files``), as batched
        reads a directory; made once per layout scan and set of names."""
        plan = self._plans.get(port.attrs)
        if plan is None or plan[0] is not port.files or plan[1] != names:
            picks = tuple(i for i, f in enumerate(port.files) if f.name in names)
            runs = directory_runs(port.attrs[:-1], tuple(port.files[i].path for i in picks))
            plan = self._plans[port.attrs] = (port.files, names, picks, runs)
        return plan[2], plan[3]

    def close(self) -> None:
        self._cache.close()
        self._layouts.clear()
        self._last.clear()
        self._plans.clear()

    # -- per device -------------------------------------------------------------------------

    def _wanted(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self._include) and not any(
            fnmatch.fnmatchcase(name, p) for p in self._exclude
        )

    def _forget(self, name: str) -> None:
        self._layouts.pop(name, None)
        self._slow_at.pop(name, None)
        prefix = f"{self._root / name}/"
        self._cache.forget(prefix)
        self._forget_readings(prefix)

    def _forget_readings(self, prefix: str) -> None:
        for key in [k for k in self._last if k.startswith(prefix)]:
            del self._last[key]
        for key in [k for k in self._plans if k.startswith(prefix)]:
            del self._plans[key]
        for path in [p for p in self._slow_errors if p.startswith(prefix)]:
            del self._slow_errors[path]

    def _read_device(self, name: str, now: float) -> list[PortSample]:
        dev_dir = f"{self._root}/{name}"  # a string: a Path built per device and tick cost more than its stat
        identity = stat_identity(dev_dir)
        if identity is None:  # vanished since the listdir
            self._forget(name)
            return []
        layout = self._layouts.get(name)
        if layout is not None and layout.identity != identity:
            # A new directory under the same name: the old descriptors read a dead device.
            self._forget(name)
            layout = None
        if layout is None or now - layout.scanned_at >= self._rescan:
            self._forget_readings(f"{dev_dir}/")  # files the new layout no longer has
            self._slow_at.pop(name, None)  # nothing to carry over: read every counter now
            layout = self._layouts[name] = self._scan(name, Path(dev_dir), identity, now)
        slow_at = self._slow_at.get(name)
        slow = slow_at is None or now - slow_at >= self._slow * (1 - _SLOW_EARLY)
        if slow:
            self._slow_at[name] = now
        samples = [self._read_port(name, layout.driver, p, slow) for p in layout.ports]
        if stat_identity(dev_dir) != identity:
            # Gone (or replaced) while we read: kept descriptors may have served the dead
            # device's last values, so report nothing for it this tick.
            self._forget(name)
            return []
        return samples

    def _scan(self, name: str, dev_dir: Path, identity: tuple[int, int, int], now: float) -> DeviceLayout:
        port_names = sorted((p for p in list_dir(dev_dir / "ports", _SOURCE) if p.isdigit()), key=int)
        listings = {p: list_counters(dev_dir, p, single_port=len(port_names) == 1) for p in port_names}
        first_hw = listings[port_names[0]][1][1] if port_names else []
        driver = counter_specs.detect_driver(name, dev_dir, set(first_hw))
        ports = tuple(self._scan_port(dev_dir, int(p), driver, *listings[p]) for p in port_names)
        return DeviceLayout(identity, now, driver, ports)

    def _scan_port(
        self,
        dev_dir: Path,
        port: int,
        driver: str | None,
        pma: tuple[Path, list[str]],
        hw: tuple[Path, list[str]],
    ) -> PortFiles:
        port_dir = dev_dir / "ports" / str(port)
        pma_ext = not counter_specs.PMA_EXT_ONLY.isdisjoint(pma[1])
        files: dict[str, CounterFile] = {}
        for group, (directory, names) in ((CounterGroup.PMA, pma), (CounterGroup.HW, hw)):
            for raw in names:
                # PortSample.counters: a name in both groups keeps the PMA reading under its
                # plain name; the other stays reachable as "hw_counters/<name>".
                key = raw if raw not in files else f"{group.value}/{raw}"
                spec = counter_specs.describe(driver, group, raw, pma_ext=pma_ext)
                files[key] = CounterFile(
                    str(directory / raw),
                    key,
                    f"{group.value}/{raw}",
                    raw,
                    group,
                    spec,
                    spec.name,
                    spec.width,
                    spec.overflow,
                    spec.scale,
                    spec.raw_max,
                )
        every = [f for f in files.values() if f.name in TICK_COUNTERS or self._slow <= 0]
        slow = [f for f in files.values() if f.name not in TICK_COUNTERS and self._slow > 0]
        return PortFiles(
            port=port,
            attrs=f"{port_dir}/",
            netdev=port_netdev(dev_dir, port_dir, port),
            link_layer=read_text(port_dir / "link_layer", _SOURCE) or None,
            gid_types=gid_types(port_dir),
            files=tuple(every),
            # the attributes last, in the port directory's run: one batched read a port each tick
            groups=directory_runs(
                str(port_dir), (*(f.path for f in every), *(f"{port_dir}/{a}" for a in _ATTRS))
            ),
            slow_files=tuple(slow),
            slow_groups=directory_runs(str(port_dir), tuple(f.path for f in slow)),
            slow_keys=frozenset(f.key for f in slow),
            keys_in_order=tuple(f.key for f in every),
            slow_keys_in_order=tuple(f.key for f in slow),
        )

    # -- per tick ---------------------------------------------------------------------------

    def _read_port(self, device: str, driver: str | None, port: PortFiles, slow: bool) -> PortSample:
        counters: dict[str, Counter] = {}
        errors: list[str] = []
        attrs = self._read_files(port, False, counters, errors)
        if slow:
            slow_errors: list[str] = []
            self._read_files(port, True, counters, slow_errors)
            self._slow_errors[port.attrs] = tuple(slow_errors)
            errors.extend(slow_errors)
        else:  # the last readings, as the last slow read left them
            seen = self._last.get(port.attrs + _SLOW_KEY)
            if seen is not None and seen.files is port.slow_files:
                counters.update(seen.counters(port.slow_keys_in_order))
            errors.extend(self._slow_errors.get(port.attrs, ()))
        rate_text, state, phys_state = (self._attr(port.attrs, *a) for a in zip(_ATTRS, attrs, strict=True))
        problem = rate_problem(rate_text)
        if problem:
            errors.append(f"rate: {problem}")
        return PortSample(
            device=device,
            port=port.port,
            netdev=port.netdev,
            link_layer=port.link_layer,
            state=parse_state(state),
            phys_state=parse_state(phys_state),
            rate_gbps=None if problem else rate_value(rate_text),
            gid_types=port.gid_types,
            driver=driver,
            counters=frozen_map(counters),
            read_errors=tuple(errors),
            slow_counters=port.slow_keys,
            slow_read=slow,
        )

    def _read_files(
        self, port: PortFiles, slow: bool, counters: dict[str, Counter], errors: list[str]
    ) -> list[bytes | None | SourceError]:
        """Read the port's files of one cadence (one batched read per directory) into ``counters``; a
        file that fails is named in ``errors`` and left out. Returns what the batch read beyond the
        counter files (the port's attributes, on the tick cadence), as read.

        Only the files whose text differs from their last read (found by one C-level comparison of
        the two lists), and those that failed or did not fit one read last time, are parsed; every
        other one keeps the Counter parsed from the same text, the very object (which the series
        layer's own shortcut recognises)."""
        files, groups = (port.slow_files, port.slow_groups) if slow else (port.files, port.groups)
        key = port.attrs + (_SLOW_KEY if slow else _TICK_KEY)
        read = self._cache.read_dir
        texts = [data for directory, names in groups for data in read(directory, names, _COUNTER_READ)]
        mine = texts[: len(files)]
        last = self._last.get(key)
        parsed: list[Counter | None]
        if last is not None and last.files is files:
            parsed = list(last.parsed)
            redo: Iterable[int] = sorted(
                {*compress(range(len(files)), map(ne, mine, last.texts)), *last.redo}
            )
        else:
            parsed = [None] * len(files)
            redo = range(len(files))
        again: list[int] = []
        for i in redo:
            data = mine[i]
            c = parsed[i] = self._parse(files[i], data, errors)
            if c is None or (isinstance(data, bytes) and len(data) == _COUNTER_READ):
                again.append(i)  # failed, or read whole: judged again whatever it reads next
        readings = self._last[key] = Readings(files, mine, parsed, tuple(again))
        counters.update(readings.counters(port.slow_keys_in_order if slow else port.keys_in_order))
        self.files_read += len(files)
        return texts[len(files) :]

    def _parse(self, f: CounterFile, data: bytes | None | SourceError, errors: list[str]) -> Counter | None:
        """One counter file's reading, or None with the reason in ``errors``."""
        if isinstance(data, bytes) and len(data) == _COUNTER_READ:  # not a counter's shape: read it all
            try:
                data = self._cache.read(f.path)
            except SourceError as exc:
                data = exc
        if isinstance(data, SourceError) or data is None:  # EISDIR, EIO, ...: this counter only
            errors.append(f"{f.label}: {'unreadable' if data is None else data}")
            return None
        # Fast path for the one shape sysfs prints ("%llu\n"); anything else takes the careful
        # parser, which explains what is wrong.
        if data[-1:] == b"\n" and data[:-1].isdigit():
            fast = int(data)
            if fast <= f.raw_max:
                return Counter(f.raw_name, f.name, f.group, fast * f.scale, f.width, f.overflow, f.scale)
        value, problem = parse_counter(data)
        if value is None:
            errors.append(f"{f.label}: {problem}")
            return None
        return _counter(f, value)

    def _attr(self, prefix: str, name: str, data: bytes | None | SourceError) -> str | None:
        if isinstance(data, bytes) and len(data) == _COUNTER_READ:  # read with the counters: maybe more
            try:
                data = self._cache.read(prefix + name)
            except SourceError:
                return None
        return data.decode("utf-8", "replace").strip() if isinstance(data, bytes) else None


def _counter(f: CounterFile, value: int) -> Counter:
    spec = f.spec
    if value > spec.raw_max:
        # A reading wider than the table says proves the register is wider: a "noietf" PMA
        # (64-bit data without unicast/multicast files) or q-counters summed over bound QPs.
        spec = CounterSpec(spec.name, 64, Overflow.WRAP, spec.scale)
    return Counter(f.raw_name, spec.name, f.group, value * spec.scale, spec.width, spec.overflow, spec.scale)
