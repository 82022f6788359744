"""What every ethtool statistics reader returns, and the checks they share."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from netd.model.snapshot import frozen_map

__all__ = [
    "ETH_GSTRING_LEN",
    "IFNAMSIZ",
    "StatsRead",
    "StatsReader",
    "invalid_netdev_name",
    "ordered_stats",
    "subset",
]

ETH_GSTRING_LEN = 32
IFNAMSIZ = 16  # including the NUL: names are at most 15 bytes


@dataclass(frozen=True, slots=True)
class StatsRead:
    """One netdev's answer: ``stats`` (stripped names, driver order), or ``None`` (absent) with ``reason``.

    ``bad`` names the entries that were dropped: unparseable capture values, or duplicate names (the
    first occurrence wins).
    """

    stats: Mapping[str, int] | None
    reason: str | None = None
    bad: tuple[str, ...] = ()

    @classmethod
    def absent(cls, reason: str) -> StatsRead:
        return cls(None, reason)


class StatsReader(Protocol):
    names_reloads: int  # times a cached name table was found stale and read again

    def read(self, netdev: str) -> StatsRead: ...

    def read_some(self, netdev: str, names: tuple[str, ...]) -> StatsRead:
        """Only ``names`` (those present); a reader that can fetch fewer statistics does so."""
        ...

    def read_kept(self, netdev: str, keep: Callable[[str], bool]) -> StatsRead:
        """Only the statistics whose name ``keep`` accepts (asked once per name table), in driver order."""
        ...

    # The PFC fast path's calm test: read unparsed, compare tokens, parse only a sample to evaluate.
    # ``read_some(n, names)`` is ``pick(read_raw(n), names)``.
    def read_raw(self, netdev: str, recheck_names: bool = True) -> object:
        """One read of ``netdev`` as the reader got it (or a StatsRead saying why there is none);
        ``recheck_names=False`` lets a reader whose name table can go stale skip re-reading it."""
        ...

    def pick(self, raw: Any, names: tuple[str, ...]) -> StatsRead:
        """Only ``names`` (those present) of a :meth:`read_raw` result."""
        ...

    def token(self, raw: Any, names: tuple[str, ...]) -> tuple[object, ...] | None:
        """A cheap stand-in for the values of ``names`` in a :meth:`read_raw` result: two equal tokens
        mean equal values; None when the reader cannot tell without parsing."""
        ...

    def close(self) -> None: ...


def invalid_netdev_name(netdev: str) -> str | None:
    """Why ``netdev`` cannot name a Linux interface (kernel dev_valid_name()), or None when it can.

    Checked before any ioctl (a name over 15 bytes would not fit ``ifr_name``) and before any path join
    (a capture reader must never be steered out of its directory by ``../``).
    """
    raw = os.fsencode(netdev)
    if not raw or len(raw) >= IFNAMSIZ:
        return f"interface name {netdev!r} is not 1..{IFNAMSIZ - 1} bytes long"
    if netdev in (".", "..") or any(c in "/:\0" or c.isspace() for c in netdev):
        return f"interface name {netdev!r} is not a valid Linux interface name"
    return None


def ordered_stats(pairs: Iterable[tuple[str, int]], bad: list[str]) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for name, value in pairs:
        if name in out:
            bad.append(name)
        else:
            out[name] = value
    return frozen_map(out)


def subset(got: StatsRead, names: tuple[str, ...]) -> StatsRead:
    """``got`` with only ``names`` (those present); an absent read stays absent."""
    if got.stats is None:
        return got
    stats = got.stats
    return StatsRead(frozen_map({n: stats[n] for n in names if n in stats}), got.reason, got.bad)
