"""The lab's DCQCN operating point and its scenarios are plain, validated values."""

from __future__ import annotations

import pytest

from cc.model.params import DcqcnParams
from netd.errors import LabError
from netd.lab.layout import LabLayout
from netd.lab.params import lab_params, parse_overrides
from netd.lab.scenarios import SCENARIOS, build_scenario


def test_lab_params_are_valid_device_values_with_switch_below_pfc() -> None:
    p = lab_params()
    assert isinstance(p, DcqcnParams)
    assert p.kmin_bytes < p.kmax_bytes < p.xon_bytes < p.xoff_bytes
    # every DCQCN timer is longer than the controller's 1 ms step: rp_step is exact per step
    for name in (
        "rp_time_reset",
        "rp_dce_tcp_rtt",
        "np_min_time_between_cnps",
        "rp_rate_reduce_monitor_period",
    ):
        assert getattr(p, name) >= 1000


def test_bytes_and_rates_scale_with_the_link_times_do_not() -> None:
    slow, fast = lab_params(100.0), lab_params(400.0)
    assert fast.kmax_bytes == 4 * slow.kmax_bytes and fast.rp_ai_rate == 4 * slow.rp_ai_rate
    assert fast.rp_time_reset == slow.rp_time_reset
    assert lab_params(10.0).rp_ai_rate == 1  # never below the knob's minimum


def test_overrides_are_typed_and_validated() -> None:
    assert parse_overrides(["rp_ai_rate=2", "pmax=0.25", "kmin_bytes=0x1000"]) == {
        "rp_ai_rate": 2,
        "pmax": 0.25,
        "kmin_bytes": 4096,
    }
    assert lab_params(overrides={"rp_ai_rate": 3}).rp_ai_rate == 3
    with pytest.raises(LabError, match="expected NAME=VALUE"):
        parse_overrides(["nonsense=1"])
    with pytest.raises(LabError, match="not a number"):
        parse_overrides(["rp_ai_rate=fast"])
    with pytest.raises(LabError, match="invalid DCQCN parameter"):
        lab_params(overrides={"kmin_bytes": 10**6, "kmax_bytes": 10})


def test_incast_spreads_senders_far_tor_first() -> None:
    sc = build_scenario("incast", LabLayout("lab"), senders=8, duration_s=3.0)
    assert [f.src for f in sc.flows] == [2, 3, 1, 2, 3, 1, 2, 3]
    assert {f.dst for f in sc.flows} == {0}
    assert sc.focus == (LabLayout("lab").host_facing(0).id,)
    assert 0 < sc.warmup_s < sc.duration_s


def test_all_to_all_and_victim_and_storm_shapes() -> None:
    lay = LabLayout("lab")
    a2a = build_scenario("all-to-all", lay)
    assert len(a2a.flows) == 12 and len(a2a.focus) == 4
    victim = build_scenario("victim", lay, senders=4)
    assert [f.label for f in victim.flows].count("victim") == 1
    assert victim.switch == {"mark": False}
    assert build_scenario("victim", lay, ecn=True).switch == {}
    storm = build_scenario("storm", lay)
    assert storm.stuck == ((0, 1.0, 3.0),) and all(f.src != f.dst for f in storm.flows)
    assert set(SCENARIOS) == {"incast", "all-to-all", "victim", "storm"}


def test_scenario_errors_say_what_to_do() -> None:
    with pytest.raises(LabError, match="unknown scenario"):
        build_scenario("meltdown", LabLayout("lab"))
    with pytest.raises(LabError, match="at least 2 ToRs"):
        build_scenario("victim", LabLayout("lab", hosts=2, tors=1))
    with pytest.raises(LabError, match="senders"):
        build_scenario("incast", LabLayout("lab"), senders=0)
