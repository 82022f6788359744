"""The PFC fast path's reads: unparsed until a sample must be evaluated.

Between ticks the fast path reads the few pause statistics of every PFC netdev ten times a second, and
almost every such sample is calm: no pause frame, no pause time, no storm event moved, so it is put
aside unevaluated (docs/detection.md, Calm samples). :class:`RawSamples` keeps each netdev's read as its
reader returned it (a capture's bytes, an ioctl's values) and offers :meth:`RawSamples.pause_token`, a
comparison stand-in for the pause statistics that needs no parse and builds no sample object. Only a
sample that is evaluated, now or later (the last one put aside is, before the next that is), is parsed
into :class:`~netd.model.snapshot.EthtoolSample` objects, exactly as ``EthtoolSource.read`` would have
made them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from netd.model.snapshot import EthtoolSample
from netd.sources.ethtool_read import StatsReader

__all__ = ["RawSamples"]


class RawSamples(Mapping[str, EthtoolSample]):
    """netdev -> its sample of the wanted statistics, parsed on first access; netdevs whose read found
    nothing (absent, failed) are not in it, as they are not in ``EthtoolSource.read``'s samples."""

    __slots__ = ("_reader", "_raws", "_wanted", "_samples")

    def __init__(self, reader: StatsReader, raws: dict[str, object], wanted: Mapping[str, tuple[str, ...]]):
        self._reader = reader
        self._raws = raws  # netdev -> read_raw() result; None: the read raised
        self._wanted = wanted
        self._samples: dict[str, EthtoolSample] | None = None

    def pause_token(self, pause: Mapping[str, tuple[str, ...]]) -> tuple[object, ...] | None:
        """A stand-in for ``pause`` (netdev -> statistic names) in this read: two reads with equal
        tokens have equal values of every named statistic, and the same netdevs failed. None when some
        reader cannot tell without parsing (then the caller parses and compares values)."""
        token = self._reader.token
        out: list[object] = []
        for netdev, names in pause.items():
            raw = self._raws.get(netdev)
            if raw is None:  # not read (excluded), or the read raised: the same next time compares equal
                out.append(None)
                continue
            got = token(raw, names)
            if got is None:
                return None
            out.append(got)
        return tuple(out)

    def _parsed(self) -> dict[str, EthtoolSample]:
        samples = self._samples
        if samples is None:
            samples = self._samples = {}
            pick, wanted = self._reader.pick, self._wanted
            for netdev, raw in self._raws.items():
                if raw is None:
                    continue
                got = pick(raw, wanted[netdev])
                if got.stats is not None:
                    samples[netdev] = EthtoolSample(netdev, got.stats)
        return samples

    def __getitem__(self, netdev: str) -> EthtoolSample:
        return self._parsed()[netdev]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsed())

    def __len__(self) -> int:
        return len(self._parsed())
