"""The PFC fast path's unparsed reads (netd.sources.ethtool_raw, the readers' read_raw/pick/token):
samples equal to the parsed reads, and tokens that are equal only when the named values are."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

import netd.sources.ethtool as et
from netd.sources.ethtool import CapturedStatsReader, EthtoolSource, format_ethtool_text, parse_ethtool_text
from netd.sources.ethtool_text import value_texts
from tests.sources.test_ethtool import FakeKernel, write
from tests.sources.test_ethtool_names import mlx5_stats
from tests.sources.test_ethtool_pick import CLEAN, DAMAGED, _stats

PAUSE = ("rx_prio3_pause", "tx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause_duration")
WANTED = (*PAUSE, "rx_prio3_packets", "tx_prio3_packets")


def _moved(**deltas: int) -> bytes:
    stats = _stats()
    for name, delta in deltas.items():
        stats[name] += delta
    return format_ethtool_text(stats).encode()


CAPTURES = {
    "clean": CLEAN,
    "packets moved": _moved(rx_prio3_packets=5, tx_prio3_packets=9),
    "pause moved": _moved(rx_prio3_pause=1),
    "pause time moved": _moved(tx_prio3_pause_duration=3),
    **{f"damaged: {k}": v for k, v in DAMAGED.items()},
}


def _parsed(data: bytes, names: tuple[str, ...]) -> dict[str, int] | None:
    full = parse_ethtool_text(data.decode("utf-8", "replace")).stats
    return None if full is None else {n: full[n] for n in names if n in full}


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations_with_replacement(sorted(CAPTURES), 2)))
def test_equal_capture_tokens_mean_equal_parsed_values(a: str, b: str) -> None:
    """The law the calm test rests on, checked against the full parser on every pair of captures."""
    ta, tb = value_texts(CAPTURES[a], PAUSE), value_texts(CAPTURES[b], PAUSE)
    if ta is not None and ta == tb:
        assert _parsed(CAPTURES[a], PAUSE) == _parsed(CAPTURES[b], PAUSE)


def test_capture_tokens_see_pause_and_ignore_traffic() -> None:
    token = {k: value_texts(v, PAUSE) for k, v in CAPTURES.items()}
    assert token["clean"] is not None and token["clean"] == token["packets moved"]
    assert token["pause moved"] != token["clean"] != token["pause time moved"]
    # Whatever the search cannot vouch for has no token: the caller parses and compares values.
    for case in ("no header", "cut off in a wanted line", "wanted value not a number"):
        assert token[f"damaged: {case}"] is None, case


def _tree(tmp_path: Path) -> EthtoolSource:
    (tmp_path / "ethtool").mkdir()
    write(tmp_path, "eth0", _stats())
    (tmp_path / "ethtool" / "eth1").write_bytes(DAMAGED["wanted value not a number"])
    (tmp_path / "ethtool" / "eth2").mkdir()  # EISDIR: the read raises
    write(tmp_path, "eth4", _stats(base=7))  # excluded below
    return EthtoolSource(CapturedStatsReader(tmp_path), exclude=("eth4",))


ONLY = {n: WANTED for n in ("eth0", "eth1", "eth2", "eth3", "eth4")}  # eth3: no capture


def test_raw_samples_are_the_parsed_samples(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    raw = source.read_raw(ONLY)
    parsed, _ = source.read(ONLY, only=ONLY)
    assert sorted(raw) == sorted(parsed) == ["eth0", "eth1"]
    assert dict(raw) == parsed and len(raw) == 2 and raw["eth1"].stats == parsed["eth1"].stats
    source.close()


def test_raw_tokens_follow_pause_reads_and_failures(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    pause = {"eth0": PAUSE, "eth2": PAUSE}
    first = source.read_raw(ONLY).pause_token(pause)
    assert first is not None
    moved = _stats()
    moved["tx_prio3_packets"] += 1000
    write(tmp_path, "eth0", moved)
    assert source.read_raw(ONLY).pause_token(pause) == first  # traffic only
    moved["rx_prio3_pause"] += 1
    write(tmp_path, "eth0", moved)
    assert source.read_raw(ONLY).pause_token(pause) != first
    # An absent capture has no cheap token (it is parsed, and compared by value); nor has one the
    # search cannot vouch for. Never read (excluded) or raising compares equal to itself.
    assert source.read_raw(ONLY).pause_token({**pause, "eth1": PAUSE}) is None
    (tmp_path / "ethtool" / "eth0").unlink()
    assert source.read_raw(ONLY).pause_token({"eth0": PAUSE}) is None
    assert source.read_raw(ONLY).pause_token({"eth2": PAUSE, "eth4": PAUSE}) == (None, None)
    source.close()


def test_a_raw_read_that_raises_is_left_out_like_a_parsed_one(tmp_path: Path) -> None:
    source = _tree(tmp_path)
    only = {"eth2": WANTED}
    parsed, reasons = source.read(only, only=only)
    assert not parsed and reasons["eth2"].startswith("error:")
    assert not dict(source.read_raw(only))
    source.close()


def test_ioctl_tokens_compare_values_by_position_and_name_table() -> None:
    k = FakeKernel(mlx5_stats((3,)))
    first = k.read_raw("eth0")
    assert k.pick(first, WANTED) == k.read_some("eth0", WANTED)
    assert k.token(k.read_raw("eth0"), PAUSE) == k.token(first, PAUSE)
    k.stats["tx_prio3_packets"] += 10
    assert k.token(k.read_raw("eth0"), PAUSE) == k.token(first, PAUSE)  # traffic only
    k.stats["rx_prio3_pause"] += 1
    assert k.token(k.read_raw("eth0"), PAUSE) != k.token(first, PAUSE)
    # PFC moved to priority 4 with the same count and the same values at the same positions: a new
    # name table, so never equal (its names are not the ones the token was taken for).
    k.stats = dict(zip(mlx5_stats((4,)), k.stats.values(), strict=True))
    moved = k.read_raw("eth0")
    assert k.token(moved, PAUSE) != k.token(first, PAUSE)
    absent = k.read_raw("x" * 16)  # no interface can have that name: absent, never asked
    assert k.token(absent, PAUSE) is None and k.pick(absent, WANTED).stats is None


@pytest.mark.parametrize("every", [1, 3, 0])
def test_a_probe_read_skips_the_name_table_but_never_the_count(every: int) -> None:
    k = FakeKernel(mlx5_stats((3,)), names_recheck_every=every)
    first = k.read_raw("eth0")
    k.calls.clear()
    probe = k.read_raw("eth0", False)
    assert k.calls == [et.ETHTOOL_GSSET_INFO, et.ETHTOOL_GSTATS]  # no ETHTOOL_GSTRINGS
    assert k.token(probe, PAUSE) == k.token(first, PAUSE)
    # A probe does not age the names: the reads that may re-read them keep their cadence.
    k.calls.clear()
    for _ in range(5):
        k.read_raw("eth0", False)
    k.read_raw("eth0")
    assert k.calls.count(et.ETHTOOL_GSTRINGS) == (1 if every == 1 else 0)
    # A changed count is caught by the probe too: the names are re-read, the values never shifted.
    k.stats = mlx5_stats((3, 4))
    grown = k.read_raw("eth0", False)
    assert k.pick(grown, tuple(k.stats)).stats == k.stats and k.names_reloads == 1


class _CountingTokens:
    """A reader's token function, counted: how many stand-ins were computed rather than taken over."""

    def __init__(self, reader: object) -> None:
        self.calls = 0
        self._token = reader.token  # type: ignore[attr-defined]

    def __call__(self, raw: object, names: tuple[str, ...]) -> object:
        self.calls += 1
        return self._token(raw, names)


@pytest.mark.parametrize("kind", ["captures", "kernel"])
def test_a_stand_in_taken_from_the_last_read_is_the_one_computed_afresh(tmp_path: Path, kind: str) -> None:
    """``pause_token(pause, last)`` takes a netdev's stand-in from ``last`` only when its read is equal
    there; over a script of reads (nothing moved, traffic, pause, a capture replaced, damaged, gone,
    and a name-table change on the kernel) every token equals the token computed without ``last``."""
    stats = {n: _stats() for n in ("eth0", "eth1")}
    if kind == "captures":
        (tmp_path / "ethtool").mkdir()
        reader: object = CapturedStatsReader(tmp_path)

        def put(netdev: str, data: bytes | None = None) -> None:
            path = tmp_path / "ethtool" / netdev
            if data is None:
                data = format_ethtool_text(stats[netdev]).encode()
            tmp = path.with_name(f".{netdev}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
    else:
        kernels = {n: FakeKernel(stats[n]) for n in stats}

        class _Kernels(FakeKernel):  # one fake kernel per netdev
            def _ioctl(self, netdev: str, command: int, buf: object) -> None:  # type: ignore[override]
                kernels[netdev]._ioctl(netdev, command, buf)  # type: ignore[arg-type]

        reader = _Kernels({})

        def put(netdev: str, data: bytes | None = None) -> None:
            kernels[netdev].stats = stats[netdev] if data is None else {**stats[netdev], "rx_new_stat": 1}

    source = EthtoolSource(reader)  # type: ignore[arg-type]
    counting = _CountingTokens(reader)
    reader.token = counting  # type: ignore[attr-defined]
    pause = {"eth0": PAUSE, "eth1": PAUSE}
    only = {n: WANTED for n in pause}
    for netdev in stats:
        put(netdev)

    def step(change: Callable[[], None]) -> None:
        change()
        got = source.read_raw(only, recheck_names=True)
        nonlocal last
        with_last = got.pause_token(pause, last)
        assert with_last == got.pause_token(pause)
        last = got

    def bump(netdev: str, name: str, by: int = 1) -> Callable[[], None]:
        def change() -> None:
            stats[netdev][name] += by
            put(netdev)

        return change

    last = None
    script: list[Callable[[], None]] = [
        lambda: None,
        lambda: None,
        bump("eth0", "rx_prio3_packets", 1000),  # traffic only
        lambda: None,
        bump("eth1", "rx_prio3_pause"),
        lambda: None,
        bump("eth0", "tx_prio3_pause_duration", 7),
    ]
    if kind == "captures":
        script += [
            lambda: put("eth1", DAMAGED["wanted value not a number"]),
            lambda: None,
            lambda: (tmp_path / "ethtool" / "eth0").unlink(),
            lambda: put("eth0"),
            lambda: None,
        ]
    else:
        script += [lambda: put("eth1", b"names changed"), lambda: None, lambda: put("eth1"), lambda: None]
    for change in script:
        step(change)
    # The reads that repeat the last one took their stand-ins over: fewer computed than asked for.
    asked = 2 * 2 * len(script)  # two netdevs, with and without ``last``, per step
    assert counting.calls < asked - len(script)
    source.close()


def test_a_read_equal_to_the_last_in_every_netdev_takes_its_whole_token(tmp_path: Path) -> None:
    """A read equal to ``last`` everywhere takes ``last``'s token without computing one; asked for other
    names, it computes (and equals a fresh computation), and so does the read after it."""
    (tmp_path / "ethtool").mkdir()
    write(tmp_path, "eth0", _stats())
    write(tmp_path, "eth1", _stats(base=7))
    source = EthtoolSource(CapturedStatsReader(tmp_path))
    counting = _CountingTokens(source.reader)
    source.reader.token = counting  # type: ignore[attr-defined]
    pause = {"eth0": PAUSE, "eth1": PAUSE}
    first = source.read_raw(ONLY)
    fresh = first.pause_token(pause)
    assert fresh is not None
    second = source.read_raw(ONLY)
    before = counting.calls
    assert second.pause_token(pause, first) == fresh
    assert counting.calls == before  # taken over whole
    fewer = {"eth0": PAUSE[:1], "eth1": PAUSE}
    third = source.read_raw(ONLY)
    assert third.pause_token(fewer, second) == third.pause_token(fewer) != fresh
    fourth = source.read_raw(ONLY)
    before = counting.calls
    assert fourth.pause_token(pause, third) == fresh
    assert counting.calls == before + 1  # eth0's names changed back: computed; eth1's taken over
    write(tmp_path, "eth1", {**_stats(base=7), "rx_prio3_pause": 99})
    fifth = source.read_raw(ONLY)
    assert fifth.pause_token(pause, fourth) == fifth.pause_token(pause) != fresh
    source.close()
