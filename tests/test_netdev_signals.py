"""netdev_signals (the series layer's cheap path to a netdev's ethtool signals) must say exactly what
parse_signals says of the full statistics, for every mlx5 name set netd meets."""

from __future__ import annotations

import pytest

from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.model.snapshot import EthtoolSample, frozen_map
from netd.series.port_signals import netdev_signals
from netd.series.tracker import NetdevView
from netd.vocabulary.ethtool_names import parse_signals


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
    assert netdev_signals(view) == parse_signals(rates)
    del rates[names[len(names) // 2]]  # a rate that is unknown this tick (held, first reading)
    view = NetdevView(view.sample, rates=frozen_map(rates))
    assert netdev_signals(view) == parse_signals(rates)
