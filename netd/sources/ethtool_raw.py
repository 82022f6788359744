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

    __slots__ = ("_reader", "_raws", "_wanted", "_samples", "_tokens", "_token")

    def __init__(self, reader: StatsReader, raws: dict[str, object], wanted: Mapping[str, tuple[str, ...]]):
        self._reader = reader
        self._raws = raws  # netdev -> read_raw() result; None: the read raised
        self._wanted = wanted
        self._samples: dict[str, EthtoolSample] | None = None
        self._tokens: dict[str, tuple[tuple[str, ...], object]] = {}  # netdev -> (names, its stand-in)
        self._token: tuple[Mapping[str, tuple[str, ...]], tuple[object, ...]] | None = None  # (pause, token)

    def pause_token(
        self, pause: Mapping[str, tuple[str, ...]], last: RawSamples | None = None
    ) -> tuple[object, ...] | None:
        """A stand-in for ``pause`` (netdev -> statistic names) in this read: two reads with equal
        tokens have equal values of every named statistic, and the same netdevs failed. None when some
        reader cannot tell without parsing (then the caller parses and compares values).

        ``last``: an earlier read by the same reader. A netdev read exactly as there (equal bytes or
        values: one comparison) takes its stand-in from there, since a stand-in is a function of the
        read; a replayed capture rewritten once a second reads the same nine samples in ten. A read
        equal to ``last`` in every netdev (one comparison of the two reads, in C) takes ``last``'s
        whole token: a replayed tree reads so between two rewrites (an ioctl read, whose values
        include traffic, rarely does)."""
        token = self._reader.token
        earlier: dict[str, tuple[tuple[str, ...], object]] = {}
        earlier_raws: dict[str, object] = {}
        if last is not None and last._reader is self._reader:
            whole = last._token
            if whole is not None and (whole[0] is pause or whole[0] == pause) and last._raws == self._raws:
                self._tokens, self._token = dict(last._tokens), (pause, whole[1])
                return whole[1]
            earlier, earlier_raws = last._tokens, last._raws
        tokens = self._tokens
        out: list[object] = []
        for netdev, names in pause.items():
            raw = self._raws.get(netdev)
            if raw is None:  # not read (excluded), or the read raised: the same next time compares equal
                out.append(None)
                continue
            seen = earlier.get(netdev)
            if seen is not None and seen[0] == names and earlier_raws.get(netdev) == raw:
                got = seen[1]
            else:
                got = token(raw, names)
                if got is None:
                    return None
            tokens[netdev] = (names, got)
            out.append(got)
        whole_token = tuple(out)
        self._token = (pause, whole_token)
        return whole_token

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
