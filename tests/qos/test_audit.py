"""The fabric consistency check, table-driven over profiles: consistent, and each kind of drift.

Every host's settings are real readings (the emulated renderer's trees read back by the real source), so
the table below states, per drift kind, which settings a human expects to differ.
"""

from __future__ import annotations

import pytest

from netd.emulated.qos_state import DRIFT_KINDS
from netd.qos.audit import PortSettings, audit_ports
from netd.qos.bench import bench_qos, profiles

PROFILES = profiles(ports_per_host=2)

# drift kind -> the settings that differ from the healthy profile
EXPECTED_DIFFERENCES = {
    "trust_pcp": {"trust", "dscp_prio"},
    "pfc_priority": {"pfc", "prio_buffer"},
    "ecn_off": {"ecn"},
    "dcqcn_off": {"dcqcn", "cc_algorithm"},
    "dscp_map": {"dscp_prio"},
    "mtu": {"mtu"},
    "dcqcn_param": {"dcqcn.rp_ai_rate"},
}


def _fabric(drifts: dict[int, str], hosts: int = 8, tor_size: int = 8) -> list[PortSettings]:
    out = []
    for h in range(hosts):
        for device, netdev, settings in PROFILES[drifts.get(h, "")]:
            out.append(PortSettings(f"h{h}", f"tor{h // tor_size}", device, 1, netdev, settings))
    return out


def test_the_table_covers_every_drift_kind() -> None:
    assert set(EXPECTED_DIFFERENCES) == set(DRIFT_KINDS)


def test_a_consistent_fabric_has_no_findings() -> None:
    result = audit_ports(_fabric({}))
    assert result.findings == () and result.undecided == ()
    assert result.hosts == 8 and result.ports == 16
    assert result.expected["tor0"]["pfc"] == "3" and result.expected["tor0"]["trust"] == "dscp"


@pytest.mark.parametrize("kind", sorted(EXPECTED_DIFFERENCES))
def test_each_drift_is_one_finding_naming_the_host_and_the_settings(kind: str) -> None:
    result = audit_ports(_fabric({5: kind}))
    (finding,) = result.findings
    assert finding.host == "h5" and finding.tor == "tor0"
    assert {d.setting for d in finding.differences} == EXPECTED_DIFFERENCES[kind]
    assert {d.netdev for d in finding.differences} == {"ens0np0", "ens1np0"}  # both ports drifted
    assert all(d.basis == "majority of tor tor0 (14/16 ports)" for d in finding.differences)


def test_the_difference_says_what_and_how_to_fix_it() -> None:
    (finding,) = audit_ports(_fabric({2: "pfc_priority"})).findings
    pfc = next(d for d in finding.differences if d.setting == "pfc" and d.netdev == "ens0np0")
    assert (pfc.actual, pfc.expected) == ("4", "3")
    assert pfc.fix == "dcb pfc set dev ens0np0 prio-pfc all:off 3:on"
    trust = audit_ports(_fabric({2: "trust_pcp"})).findings[0].differences
    assert any(d.fix.startswith("mlnx_qos -i ens0np0 --trust dscp") for d in trust)
    mtu = audit_ports(_fabric({2: "mtu"})).findings[0].differences[0]
    assert mtu.fix == "ip link set dev ens0np0 mtu 4200"


def test_majority_is_per_tor_by_default_and_fabric_wide_on_request() -> None:
    # tor1 (h4..h7) is entirely on MTU 1500: consistent within its ToR, drift against the fabric.
    ports = _fabric({4: "mtu", 5: "mtu", 6: "mtu", 7: "mtu"}, hosts=12, tor_size=4)
    assert audit_ports(ports, scope="tor").findings == ()
    fabric = audit_ports(ports, scope="fabric")
    assert [f.host for f in fabric.findings] == ["h4", "h5", "h6", "h7"]


def test_a_declared_profile_beats_the_majority() -> None:
    # Every host has PFC on 3; the config says 4: every host differs, on pfc only.
    result = audit_ports(_fabric({}, hosts=3), declared={"pfc": "4"})
    assert [f.host for f in result.findings] == ["h0", "h1", "h2"]
    assert {d.setting for f in result.findings for d in f.differences} == {"pfc"}
    assert result.findings[0].differences[0].basis == "config"


def test_no_strict_majority_is_undecided_not_a_finding() -> None:
    result = audit_ports(_fabric({2: "mtu", 3: "mtu"}, hosts=4))
    assert result.findings == ()
    assert result.undecided == ("tor0: no majority for mtu (4 x '4200', 4 x '1500')",)


def test_ignored_settings_are_not_compared() -> None:
    assert audit_ports(_fabric({1: "mtu"}), ignore=("mtu",)).findings == ()


@pytest.mark.slow
def test_bench_finds_exactly_the_drifted_hosts() -> None:
    out = bench_qos(hosts=256, ports_per_host=1, repeat=1)
    # every 64th host (63, 127, 191, 255) carries one drift
    assert out["hosts"] == 256 and out["drifted"] == 4 and out["findings"] == 4
    assert out["seconds"] > 0
