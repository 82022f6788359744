"""netdev_signals (the series layer's cheap path to a netdev's ethtool signals) must say exactly what
parse_signals says of the full statistics in every field the port signals and the scorer read, for
every mlx5 name set netd meets."""

from __future__ import annotations

import pytest

from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.model.snapshot import Counter, CounterGroup, EthtoolSample, PortSample, frozen_map
from netd.series.port_signals import PORT_FIELDS, netdev_signals, port_signals
from netd.series.tracker import NetdevView, PortView
from netd.vocabulary.ethtool_names import EthtoolSignals, parse_signals


@pytest.mark.parametrize(
    "names",
    [
        mlx5_ethtool_names((3,)),
        mlx5_ethtool_names((0, 3, 5)),
        mlx5_ethtool_names((), global_pause=True),
        mlx5_ethtool_names((3,), global_pause=True, storm_trailing_space=True),
        # the trailing-space storm name and the stripped one together: the first wins in both
        [*mlx5_ethtool_names((4,), storm_trailing_space=True), "tx_pause_storm_error_events"],
    ],
)
def test_netdev_signals_equal_parse_signals_of_every_statistic(names: list[str]) -> None:
    rates = {name: float(1000 + 7 * i) for i, name in enumerate(names)}  # distinct: a mix-up shows
    view = NetdevView(
        EthtoolSample("ens1f0np0", frozen_map(dict.fromkeys(names, 0))), rates=frozen_map(rates)
    )
    _assert_port_fields_equal(netdev_signals(view), parse_signals(rates))
    del rates[names[len(names) // 2]]  # a rate that is unknown this tick (held, first reading)
    view = NetdevView(view.sample, rates=frozen_map(rates))
    _assert_port_fields_equal(netdev_signals(view), parse_signals(rates))


def _assert_port_fields_equal(got: EthtoolSignals, full: EthtoolSignals) -> None:
    for name in PORT_FIELDS:
        assert getattr(got, name) == getattr(full, name), name
    assert full.packets  # the name sets have more than what is compared
    assert not got.packets  # a field no port signal reads is left empty


def _view(counters: list[tuple[str, str]], rates: dict[str, float]) -> PortView:
    made = {key: Counter(key, name, CounterGroup.HW, 0) for key, name in counters}
    sample = PortSample("mlx5_0", 1, None, "Ethernet", "ACTIVE", "LinkUp", 100.0, counters=frozen_map(made))
    return PortView(sample, rates=frozen_map(rates))


@pytest.mark.parametrize(
    ("counters", "rates", "expected"),
    [
        # a name twice (PMA and hw_counters): the first one's rate, as PortView.rate() answers
        (
            [("port_rcv_data", "rx_bytes"), ("hw_counters/port_rcv_data", "rx_bytes")],
            {"port_rcv_data": 1e9, "hw_counters/port_rcv_data": 5e9},
            {"rx_gbps": 8.0},
        ),
        # the first has no rate this tick: no rate, not the second's
        (
            [("port_rcv_data", "rx_bytes"), ("hw_counters/port_rcv_data", "rx_bytes")],
            {"hw_counters/port_rcv_data": 5e9, "x": 1.0},
            {"rx_gbps": None},
        ),
        # an error name twice: the last one counts once; errors of different names add up
        (
            [("a", "out_of_sequence"), ("b", "out_of_sequence"), ("c", "out_of_buffer"), ("d", "rx_packets")],
            {"a": 100.0, "b": 3.0, "c": 4.0, "d": 1000.0},
            {"errors_per_s": 7.0},
        ),
        # ECN marks over packets received; retransmits and timeouts add up
        (
            [("e", "ecn_marked"), ("d", "rx_packets"), ("r", "retransmits"), ("t", "timeouts")],
            {"e": 50.0, "d": 1000.0, "r": 2.0, "t": 1.0},
            {"ce_fraction": 0.05, "retransmits_per_s": 3.0, "errors_per_s": None},
        ),
    ],
)
def test_port_signals_read_the_first_counter_of_a_name_and_the_last_of_an_error(
    counters: list[tuple[str, str]], rates: dict[str, float], expected: dict[str, float | None]
) -> None:
    signals = port_signals(_view(counters, rates))
    for name, value in expected.items():
        assert getattr(signals, name) == (pytest.approx(value) if value is not None else None), name
