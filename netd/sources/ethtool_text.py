"""``ethtool -S`` text captures: parse, format, and read them from a tree.

A capture is how netd replays a host (``ethtool -S ens1f0np0 > DIR/ethtool/ens1f0np0``) and how the
emulated fabric publishes its netdev statistics; the same parser serves both.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netd.errors import SourceError
from netd.model.snapshot import frozen_map, tuple_getter
from netd.sources.ethtool_read import ETH_GSTRING_LEN, StatsRead, invalid_netdev_name, ordered_stats, subset
from netd.sources.sysfs_io import ABSENT_ERRNOS, READ_FLAGS

__all__ = [
    "CapturedStatsReader",
    "format_ethtool_text",
    "parse_ethtool_text",
    "pick_ethtool_stats",
    "value_texts",
]

_HEADER = "NIC statistics:"
_HEADER_LINE = (_HEADER + "\n").encode()
_U64_DIGITS = len(str(2**64 - 1))


def parse_ethtool_text(text: str) -> StatsRead:
    """Parse ``ethtool -S`` output: a ``NIC statistics:`` line, then ``     name: value`` lines.

    Values must be unsigned decimal below 2**64 (ethtool prints ``%llu``); anything else is skipped and
    named in ``bad``. A last line without its newline is a capture cut off mid-write: it goes to ``bad``
    too, since "12" may be the head of "12345".
    """
    if not text.strip():
        return StatsRead.absent("empty capture")
    fast = _parse_clean(text)
    if fast is not None:
        return StatsRead(frozen_map(fast))
    head, *body = text.split("\n")
    if head.strip() != _HEADER:
        return StatsRead.absent(f"not an `ethtool -S` capture (first line is not {_HEADER!r})")
    tail = body.pop() if body else ""  # what follows the last newline: "" in a complete capture
    bad: list[str] = []
    pairs: list[tuple[str, int]] = []
    for line in filter(str.strip, body):
        name, colon, text_value = (part.strip() for part in line.rpartition(":"))
        value = _u64(text_value)
        if colon and name and value is not None:
            pairs.append((name, value))
        else:
            bad.append(name or line.strip())
    if tail.strip():
        bad.append(tail.rpartition(":")[0].strip() or tail.strip())
    return StatsRead(ordered_stats(pairs, bad), bad=tuple(bad))


def _parse_clean(text: str) -> dict[str, int] | None:
    """The whole capture in a few C-level passes, or None when anything needs the careful parser.

    Captures are re-parsed every tick (16 mlx5 netdevs x ~200 lines on a big host), so the common
    case must be cheap: ASCII only, exactly one colon per line, names without whitespace, decimal
    values, unique names, a complete last line. Anything else (names with spaces, a cut-off
    capture, a hostile value) returns None and is parsed line by line with reasons.
    """
    split = _split_clean(text)
    if split is None:
        return None
    names, values = split
    out = dict(zip(names, map(int, values), strict=True))
    return out if len(out) == len(names) else None  # duplicates: the careful parser reports them


def _split_clean(text: str) -> tuple[list[str], list[str]] | None:
    """(names, decimal value texts) of a clean capture (:func:`_parse_clean`'s shape, uniqueness
    not checked), or None."""
    if not text.startswith(_HEADER + "\n") or not text.endswith("\n") or not text.isascii():
        return None
    body = text[len(_HEADER) + 1 :]
    lines = body.count("\n")
    if body.count(":") != lines:
        return None
    parts = body.replace(":", " ").split()
    if len(parts) != 2 * lines:
        return None
    names, values = parts[0::2], parts[1::2]
    if not all(map(str.isdigit, values)) or max(map(len, values), default=0) >= _U64_DIGITS:
        return None  # non-decimal, or 20 digits that may exceed 2**64 - 1: let the careful parser judge
    return names, values


def pick_ethtool_stats(data: bytes, names: tuple[str, ...]) -> dict[str, int] | None:
    """The values of ``names`` found by search in a capture, without parsing the other lines; None
    whenever the careful parser could say something else (then the caller parses the whole capture).

    The PFC fast path reads ~10 of a capture's ~160 lines 13 times a second: one C-level search per
    name instead of a parse of every line. Exact: each name must be found on a line of its own with
    ethtool's ``     name: value`` shape and a decimal u64 value, in a complete capture (header
    first, newline last); a duplicated name gives its first value, as the parser's first-wins does.
    """
    texts = value_texts(data, names)
    if texts is None:
        return None
    out: dict[str, int] = {}
    for name, raw in zip(names, texts, strict=True):
        if len(raw) > _U64_DIGITS or (value := int(raw)) >= 2**64:
            return None
        out[name] = value
    return out


def value_texts(data: bytes, names: tuple[str, ...]) -> tuple[bytes, ...] | None:
    """The decimal text of each of ``names`` in a capture, found as :func:`pick_ethtool_stats` finds
    them (None when it would not be sure). Two captures with equal texts give equal values: the PFC
    fast path compares these to tell a calm sample without converting or parsing anything."""
    if not data.startswith(_HEADER_LINE) or not data.endswith(b"\n"):
        return None
    out: list[bytes] = []
    find, index = data.find, data.index
    for key in _search_keys(names):
        at = find(key)
        if at < 0:
            return None  # missing, or spelt differently (a trailing space): let the parser judge
        start = at + len(key)
        raw = data[start : index(b"\n", start)]
        if not raw.isdigit():
            return None
        out.append(raw)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _search_keys(names: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(b"\n     " + n.encode() + b": " for n in names)


def _u64(text: str) -> int | None:
    # isascii: str.isdigit() accepts "²"; the length test comes before int(), which refuses > 4300 digits.
    if text.isascii() and text.isdigit() and len(text) <= _U64_DIGITS and int(text) < 2**64:
        return int(text)
    return None


def format_ethtool_text(stats: Mapping[str, int]) -> str:
    """The inverse of :func:`parse_ethtool_text`, byte for byte what ``ethtool -S`` prints.

    Names are written as given (a trailing space included, to reproduce older mlx5); the kernel limits
    them to ETH_GSTRING_LEN bytes, so longer ones, line breaks and values outside u64 raise ValueError.
    """
    lines = [_HEADER]
    for name, value in stats.items():
        if not name.strip() or "\n" in name or "\r" in name or len(name.encode()) > ETH_GSTRING_LEN:
            raise ValueError(f"not an ethtool stat name: {name!r}")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
            raise ValueError(f"{name}: value {value!r} is not an unsigned 64-bit integer")
        lines.append(f"     {name}: {value}")
    return "\n".join(lines) + "\n"


@dataclass(slots=True)
class _Capture:
    fd: int
    identity: tuple[int, int]
    size_hint: int


class CapturedStatsReader:
    """``ethtool -S`` captures at ``<root>/ethtool/<netdev>``: a replayed host or the emulated fabric.

    The emulator rewrites captures in place every tick, so one descriptor per netdev stays open and is
    re-read with pread from offset 0 (one call once the size hint fits; mlx5 captures are 10-40 KiB, more
    than sysfs_io.PreadCache's one page). A writer may also replace a file by rename: every read stats the
    path (one cheap syscall) and reopens when (st_dev, st_ino) differs from the open descriptor's.
    At most ``max_open`` descriptors are kept (netd's descriptor budget, sysfs_io); the captures of
    further netdevs are read with open-pread-close.

    A capture once found replaced is no longer kept open either: it is read with open-pread-close from
    then on. Whoever drops the last reference to a replaced file frees it, and a kept descriptor made
    that the daemon, once per replacement: ~50 µs a close on ext4 (a page-cache truncate and an inode
    eviction), ~10 µs on tmpfs, for a 20 KiB capture. Not keeping it costs ~1 µs a read, leaves the
    freeing to the writer that replaced the file, and frees the descriptor: a net gain on a tree on
    disk, about even on tmpfs (docs/benchmarks.md, Round 9).
    """

    def __init__(self, root: Path, max_bytes: int = 1 << 20, max_open: int = 16) -> None:
        self._dir = Path(root) / "ethtool"
        self._max = max_bytes
        self._max_open = max_open
        self._open: dict[str, _Capture] = {}
        self._paths: dict[str, str] = {}  # netdev -> its capture's path, checked once
        self._replaced: dict[str, int] = {}  # netdev -> size hint, for captures read without keeping
        self.names_reloads = 0  # a capture carries its names with its values: never stale
        self.opens = 0
        # netdev -> (its capture's names, a fetch of the kept positions, their names, by which predicate):
        # read_kept's fast path
        self._layouts: dict[
            str,
            tuple[list[str], Callable[[Any], tuple[Any, ...]], tuple[str, ...], Callable[[str], bool]],
        ] = {}

    def read(self, netdev: str) -> StatsRead:
        got = self._data(netdev)
        return got if isinstance(got, StatsRead) else parse_ethtool_text(got.decode("utf-8", "replace"))

    def read_kept(self, netdev: str, keep: Callable[[str], bool]) -> StatsRead:
        """Only the names ``keep`` accepts. A clean capture whose names are those of the netdev's
        last one converts only the kept values (their positions are remembered per netdev); anything
        else is parsed whole, then narrowed."""
        got = self._data(netdev)
        if isinstance(got, StatsRead):
            return got
        text = got.decode("utf-8", "replace")
        split = _split_clean(text)
        if split is not None:
            names, values = split
            layout = self._layouts.get(netdev)
            if layout is None or layout[3] is not keep or layout[0] != names:
                layout = None
                if len(set(names)) == len(names):  # duplicates: the careful parser reports them
                    if len(self._layouts) >= 4096:
                        self._layouts.clear()
                    kept = [i for i, n in enumerate(names) if keep(n)]
                    layout = self._layouts[netdev] = (
                        names,
                        tuple_getter(kept),
                        tuple(names[i] for i in kept),
                        keep,
                    )
            if layout is not None:  # the kept values fetched and converted at C level
                return StatsRead(frozen_map(dict(zip(layout[2], map(int, layout[1](values)), strict=True))))
        whole = parse_ethtool_text(text)  # unclean (rare): parsed with reasons, then narrowed
        return whole if whole.stats is None else subset(whole, tuple(filter(keep, whole.stats)))

    def read_some(self, netdev: str, names: tuple[str, ...]) -> StatsRead:
        """Only ``names`` (those present): searched for in the capture, parsed whole only when the
        search cannot be sure (:func:`pick_ethtool_stats`)."""
        return self.pick(self.read_raw(netdev), names)

    def read_raw(self, netdev: str, recheck_names: bool = True) -> bytes | StatsRead:
        """The capture's bytes, unparsed, or why there are none: what :meth:`pick` and :meth:`token`
        take (the PFC fast path parses a sample only when it must be evaluated). A capture carries
        its names with its values: ``recheck_names`` changes nothing."""
        return self._data(netdev)

    @staticmethod
    def pick(raw: bytes | StatsRead, names: tuple[str, ...]) -> StatsRead:
        """What :meth:`read_some` returns, from a :meth:`read_raw` result."""
        if isinstance(raw, StatsRead):
            return raw
        picked = pick_ethtool_stats(raw, names)
        if picked is not None:
            return StatsRead(frozen_map(picked))
        return subset(parse_ethtool_text(raw.decode("utf-8", "replace")), names)

    @staticmethod
    def token(raw: bytes | StatsRead, names: tuple[str, ...]) -> tuple[object, ...] | None:
        """A stand-in for the values of ``names`` in a :meth:`read_raw` result: equal tokens, equal
        values (None when that cannot be told without parsing)."""
        return None if isinstance(raw, StatsRead) else value_texts(raw, names)

    def _data(self, netdev: str) -> bytes | StatsRead:
        """The capture's bytes, or why there are none."""
        path = self._paths.get(netdev)
        if path is None:
            why = invalid_netdev_name(netdev)
            if why is not None:
                return StatsRead.absent(why)
            if len(self._paths) >= 4096:  # netdev names come and go; the cache must not grow forever
                self._paths.clear()
            path = self._paths[netdev] = str(self._dir / netdev)
        try:
            data = self._pread(netdev, path)
        except OSError as exc:
            self._drop(netdev)
            if exc.errno in ABSENT_ERRNOS:
                return StatsRead.absent(f"no capture at {path}: {exc.strerror}")
            raise SourceError("ethtool", f"reading {path}: {exc.strerror or exc}") from exc
        if len(data) > self._max:
            return StatsRead.absent(f"capture {path} is larger than {self._max} bytes")
        return data

    @property
    def open_descriptors(self) -> int:
        return len(self._open)

    def close(self) -> None:
        for netdev in list(self._open):
            self._drop(netdev)

    def _pread(self, netdev: str, path: str) -> bytes:
        hint = self._replaced.get(netdev)
        if hint is not None:
            return self._transient(netdev, path, hint)
        st = os.stat(path)
        cap = self._open.get(netdev)
        if cap is not None and cap.identity != (st.st_dev, st.st_ino):
            self._drop(netdev)  # replaced: from now on read without keeping it (class docstring)
            if len(self._replaced) >= 4096:  # netdev names come and go
                self._replaced.clear()
            self._replaced[netdev] = cap.size_hint
            return self._transient(netdev, path, cap.size_hint)
        if cap is None:
            fd = os.open(path, READ_FLAGS)  # non-blocking: a FIFO planted as a capture
            self.opens += 1
            fst = os.fstat(fd)
            hint = min(fst.st_size, self._max) + 4096  # never allocate for a hostile giant at once
            cap = _Capture(fd, (fst.st_dev, fst.st_ino), hint)
            if len(self._open) >= self._max_open:
                try:
                    return self._whole(cap)
                finally:
                    os.close(fd)
            self._open[netdev] = cap
        return self._whole(cap)

    def _transient(self, netdev: str, path: str, hint: int) -> bytes:
        """Open, read whole, close: a capture that is replaced rather than rewritten. Read by the fast
        path sixteen times a sample on a replayed 16-port host: one pread when the hint fits."""
        fd = os.open(path, READ_FLAGS)  # non-blocking: a FIFO planted as a capture
        self.opens += 1
        try:
            data = os.pread(fd, hint, 0)
            if len(data) < hint:
                return data
            cap = _Capture(fd, (0, 0), hint)
            data = self._whole(cap)
            self._replaced[netdev] = cap.size_hint
            return data
        finally:
            os.close(fd)

    def _whole(self, cap: _Capture) -> bytes:
        size = cap.size_hint
        data = os.pread(cap.fd, size, 0)
        while len(data) == size and size <= self._max:  # maybe more: read again, whole, from 0
            size *= 2
            data = os.pread(cap.fd, size, 0)
        cap.size_hint = max(cap.size_hint, len(data) + 4096)
        return data

    def _drop(self, netdev: str) -> None:
        cap = self._open.pop(netdev, None)
        if cap is not None:
            os.close(cap.fd)

    def __del__(self) -> None:  # best effort; owners call close()
        try:
            self.close()
        except Exception:
            pass
