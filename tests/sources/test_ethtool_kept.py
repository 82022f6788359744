"""Whole ethtool reads keep only the statistics netd uses (netd.vocabulary.ethtool_names.used).

A 64-channel mlx5 netdev has hundreds to thousands of per-ring statistics; netd reads ~54 names. The
narrowing must change nothing netd exports or detects: the exporter's families and the detectors'
tick inputs are compared with and without it on the same replayed host.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from netd.bench.static_tree import StaticHost
from netd.detect.feed import DetectFeed
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.exporter.ethtool import ethtool_families
from netd.series.port_signals import port_signals
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler
from netd.sources.ethtool import CapturedStatsReader, EthtoolSource, make_reader
from netd.sources.ethtool_read import StatsRead
from netd.vocabulary.ethtool_names import used
from tests.sources.test_ethtool import FakeKernel, write

USED = [
    "rx_prio3_pause",
    "tx_prio3_pause_duration",
    "rx_prio3_pause_transition",
    "rx_prio0_bytes",
    "tx_prio7_packets",
    "rx_prio5_discards",
    "rx_global_pause",
    "tx_pause_storm_error_events",
    "tx_pause_storm_warning_events ",  # older mlx5's trailing space
    "rx_discards_phy",
    "link_down_events_phy",
    "rx_crc_errors_phy",
    "rx_vport_rdma_unicast_bytes",
    "tx_vport_rdma_unicast_bytes",
]
UNUSED = [
    "rx0_packets",
    "ch63_events",
    "tx17_bytes",
    "rx_pause_ctrl_phy",
    "rx_prio3_buf_discard",
    "rx_vport_rdma_unicast_packets",
    "outbound_pci_stalled_rd",
    "rx_out_of_buffer",
]


@pytest.mark.parametrize("name", USED)
def test_what_netd_reads_is_used(name: str) -> None:
    assert used(name)


@pytest.mark.parametrize("name", UNUSED)
def test_per_ring_and_unread_statistics_are_not(name: str) -> None:
    assert not used(name)


def _stats(rings: int) -> dict[str, int]:
    return {n: 1000 + i for i, n in enumerate(mlx5_ethtool_names((3,), rings))}


def test_a_kernel_read_keeps_the_used_names_in_driver_order() -> None:
    stats = _stats(64) | {"dup": 1, "dup ": 2, "rx_discards_phy ": 5}  # duplicates, one of them used
    k = FakeKernel(stats)
    whole = k.read("eth0")
    got = k.read_kept("eth0", used)
    assert got == StatsRead({n: v for n, v in whole.stats.items() if used(n)}, bad=whole.bad)
    assert list(got.stats) == [n for n in whole.stats if used(n)] and len(got.stats) == 54
    assert got.bad == ("dup", "rx_discards_phy")


def test_a_capture_read_keeps_the_same(tmp_path: Path) -> None:
    """Clean captures (positions remembered, re-learnt when the names move) and unclean ones (parsed
    whole with reasons, then narrowed) give what narrowing the whole read gives."""
    (tmp_path / "ethtool").mkdir()
    reader = CapturedStatsReader(tmp_path)
    moved = {n: 1000 + i for i, n in enumerate(mlx5_ethtool_names((4,), 8))}
    for stats in (_stats(64), _stats(64) | {"rx_prio0_bytes": 7}, moved, _stats(8)):
        write(tmp_path, "eth0", stats)
        assert reader.read_kept("eth0", used) == StatsRead({n: v for n, v in stats.items() if used(n)})
    path = tmp_path / "ethtool" / "eth0"
    text = path.read_text()
    path.write_text(text + "     rx0_packets: 12x\n     rx_discards_phy: 3\n")  # a bad line, a duplicate
    got = reader.read_kept("eth0", used)
    assert got == StatsRead(
        {n: v for n, v in _stats(8).items() if used(n)}, bad=("rx0_packets", "rx_discards_phy")
    )
    reader.close()


def test_the_predicate_is_asked_once_per_name_table() -> None:
    asked: list[str] = []

    def keep(name: str) -> bool:
        asked.append(name)
        return used(name)

    k = FakeKernel(_stats(8))
    for _ in range(3):
        k.read_kept("eth0", keep)
    assert len(asked) == len(k.stats)
    k.stats = {n: 1000 + i for i, n in enumerate(mlx5_ethtool_names((3, 4), 8))}  # PFC on 4 too
    assert k.read_kept("eth0", keep).stats == {n: v for n, v in k.stats.items() if used(n)}
    assert len(asked) == len(_stats(8)) + len(k.stats)


def test_narrowing_changes_nothing_netd_exports_or_detects(tmp_path: Path) -> None:
    """Two collectors on one replayed host, one of them keeping every statistic: the same
    Prometheus families, port signals and detector tick inputs, tick after tick."""
    host = StaticHost(tmp_path / "sys", 2)
    kept = Sampler(host.root, ethtool_backend="files", host="h")
    whole = Sampler(host.root, ethtool_backend="files", host="h")
    whole.ethtool = EthtoolSource(make_reader("files", host.root))  # no narrowing
    trackers, feeds = (SeriesTracker(), SeriesTracker()), (DetectFeed(), DetectFeed())
    try:
        for t in range(3):
            host.advance(1.0)
            snaps = [
                dataclasses.replace(c.collect(), monotonic=float(t), timestamp=1e9 + t) for c in (kept, whole)
            ]
            ks, ws = (len(s.ethtool["ens1f0np0"].stats) for s in snaps)
            assert ks == 54 and ws > 150
            obs = [tr.update(s) for tr, s in zip(trackers, snaps, strict=True)]
            families = [[(m.name, m.samples) for m in ethtool_families(o)] for o in obs]
            assert families[0] == families[1] and families[0][0][1]
            signals = [[port_signals(p, o.netdev(p.sample.netdev)) for p in o.ports] for o in obs]
            assert signals[0] == signals[1]
            inputs = [f.tick_input(o) for f, o in zip(feeds, obs, strict=True)]
            assert inputs[0] == inputs[1]
    finally:
        kept.close()
        whole.close()
        host.close()
