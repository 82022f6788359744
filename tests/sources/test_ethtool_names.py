"""Name parsing over mlx5-shaped ethtool stats (reference §8 fixture: ConnectX-7, PFC on prio 3)."""

from __future__ import annotations

from typing import Any

import pytest

from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.vocabulary.ethtool_names import PFC_DIRECTIONS, PRIORITIES, EthtoolSignals, parse_signals


def mlx5_names(
    pfc: tuple[int, ...] = (3,), *, global_pause: bool = False, storm_space: bool = False, rings: int = 2
) -> list[str]:
    """The §8 name list in driver order (the emulator's generator); shared with test_ethtool.py."""
    return mlx5_ethtool_names(pfc, rings, global_pause=global_pause, storm_trailing_space=storm_space)


def mlx5_stats(pfc: tuple[int, ...] = (3,), **kw: Any) -> dict[str, int]:
    """Distinct values (1000 + position) so a value on the wrong name cannot pass unnoticed."""
    return {name: 1000 + i for i, name in enumerate(mlx5_names(pfc, **kw))}


@pytest.mark.parametrize(
    ("kw", "active"),
    [
        ({"pfc": (3,)}, (3,)),
        ({"pfc": (3, 4)}, (3, 4)),
        ({"pfc": ()}, ()),
        ({"pfc": (), "global_pause": True}, ()),
        ({"pfc": (3,), "storm_space": True}, (3,)),
    ],
    ids=["prio3", "prio3+4", "no-pfc", "global-pause", "storm-trailing-space"],
)
def test_mlx5_fixture(kw: dict[str, Any], active: tuple[int, ...]) -> None:
    stats = mlx5_stats(**kw)
    sig = parse_signals(stats)
    assert sig.active_priorities == active
    for p in PRIORITIES:
        assert sig.pfc_enabled(p) == (p in active)
        for d in PFC_DIRECTIONS:
            key = (d, p)
            assert sig.bytes[key] == stats[f"{d}_prio{p}_bytes"]
            assert sig.packets[key] == stats[f"{d}_prio{p}_packets"]
            if p in active:
                assert sig.pause_frames[key] == stats[f"{d}_prio{p}_pause"]
                assert sig.pause_duration_us[key] == stats[f"{d}_prio{p}_pause_duration"]
            else:  # absent, not zero: PFC is off on this priority
                assert key not in sig.pause_frames and key not in sig.pause_duration_us
        assert sig.discards.get(("rx", p)) == stats[f"rx_prio{p}_discards"]
        assert ("tx", p) not in sig.discards and ("tx", p) not in sig.pause_transitions
        assert sig.pause_transitions.get(("rx", p)) == stats.get(f"rx_prio{p}_pause_transition")
    space = " " if kw.get("storm_space") else ""
    assert sig.pause_storm_warning_events == stats[f"tx_pause_storm_warning_events{space}"]
    assert sig.pause_storm_error_events == stats[f"tx_pause_storm_error_events{space}"]
    for name in (
        "rx_discards_phy",
        "tx_discards_phy",
        "link_down_events_phy",
        "rx_crc_errors_phy",
        "rx_symbol_err_phy",
    ):
        assert getattr(sig, name) == stats[name]
    if kw.get("global_pause"):
        for d in PFC_DIRECTIONS:
            assert sig.global_pause_frames[d] == stats[f"{d}_global_pause"]
            assert sig.global_pause_duration_us[d] == stats[f"{d}_global_pause_duration"]
        assert dict(sig.global_pause_transitions) == {"rx": stats["rx_global_pause_transition"]}
    else:
        assert not sig.global_pause_frames and not sig.global_pause_duration_us


def test_missing_names_are_absent_not_zero() -> None:
    sig = parse_signals({})
    assert sig == EthtoolSignals()
    assert sig.pause_storm_warning_events is None and sig.rx_discards_phy is None
    assert not sig.pause_frames and sig.active_priorities == ()


@pytest.mark.parametrize(
    "name",
    [
        "rx_prio8_pause",
        "rx_prio3_pause_frames",
        "xx_prio3_pause",
        "tx_crc_errors_phy",
        "rx_global_bytes",
        "rx_prio3_buf_discard",
        "rx_prio3_marked",
        "rx0_packets",
        "rx_pause_ctrl_phy",
        " rx_prio3_pause",
    ],
)
def test_unrecognised_names_are_ignored(name: str) -> None:
    assert parse_signals({name: 7}) == EthtoolSignals()


def test_pause_duration_alone_marks_priority_active() -> None:
    sig = parse_signals({"tx_prio5_pause_duration": 0})
    assert sig.active_priorities == (5,)
    assert sig.pause_duration_us == {("tx", 5): 0}  # zero is a measurement, kept


def test_first_occurrence_wins_for_trailing_space_duplicate() -> None:
    sig = parse_signals({"tx_pause_storm_error_events ": 1, "tx_pause_storm_error_events": 2})
    assert sig.pause_storm_error_events == 1


def test_signals_are_read_only() -> None:
    sig = parse_signals(mlx5_stats())
    with pytest.raises(TypeError):
        sig.pause_frames[("rx", 3)] = 0  # type: ignore[index]
    with pytest.raises(AttributeError):
        sig.rx_discards_phy = 0  # type: ignore[misc]
