"""lldpcli JSON (both of lldpd's shapes, captured from lldpd 1.0.16), the file reader and the runner."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from netd.errors import SourceError
from netd.sources.lldpcli import LldpcliSource, parse_lldpcli_json, read_lldp_file

FIXTURES = Path(__file__).parents[1] / "fixtures" / "lldp"


def test_two_neighbours_captured_from_lldpd():
    a, b = read_lldp_file(FIXTURES / "lldpd_two_ports.json")
    assert (a.interface, a.switch, a.switch_port, a.port_id_type) == ("tvb", "tor1", "tva", "ifname")
    assert b.interface == "tvb2" and b.switch_port == "tva2"
    assert a.mgmt_addresses == ("192.0.2.1", "fe80::d048:92ff:fe1f:3c84") and a.mgmt_address == "192.0.2.1"
    assert (a.ttl_s, a.system_descr, a.source) == (120, "SONiC tor", "lldp-file")


def test_no_neighbour_is_an_empty_answer():
    assert read_lldp_file(FIXTURES / "lldpd_none.json") == ()


def test_json0_shape_gives_the_same_neighbour():
    (n,) = read_lldp_file(FIXTURES / "lldpd_json0.json")
    assert (n.interface, n.chassis_name, n.chassis_id, n.switch_port) == (
        "tvb",
        "tor1",
        "d2:48:92:1f:3c:84",
        "tva",
    )
    assert n.mgmt_address == "192.0.2.1" and n.ttl_s == 120


def test_single_values_and_a_chassis_without_a_name():
    rail0, rail1, mgmt = read_lldp_file(FIXTURES / "sonic_rails.json")
    assert (rail0.switch, rail0.switch_port, rail0.mgmt_address) == ("leaf-r0-p1", "Ethernet24", "10.20.0.11")
    assert rail1.mgmt_addresses == ("10.20.0.12",)  # a lone mgmt-ip is a string, not a list
    # no System Name: the chassis id names the switch; a MAC port id yields to the description
    assert (mgmt.chassis_name, mgmt.switch, mgmt.switch_port) == (None, "00:1c:73:aa:bb:cc", "Ethernet7")


@pytest.mark.parametrize("name", ["lldpd_mfs.json", "lldpd_mfs_json0.json"])
def test_the_maximum_frame_size_as_lldpd_shows_it(name):
    """lldpd 1.0.16 receiving a frame with the 802.3 Maximum Frame Size TLV (9216), in both JSON shapes;
    captured in network namespaces (the interface renamed): ``port.mfs``, a string."""
    (n,) = read_lldp_file(FIXTURES / name)
    assert (n.interface, n.switch, n.switch_port, n.max_frame_size) == ("ens1f0np0", "leaf1", "swp7", 9216)


def test_no_mfs_when_the_neighbour_sends_none():
    """lldpd itself never sends the TLV (the captures of lldpd switches have no ``mfs``)."""
    neighbours = read_lldp_file(FIXTURES / "lldpd_two_ports.json") + read_lldp_file(
        FIXTURES / "sonic_rails.json"
    )
    assert [n.max_frame_size for n in neighbours] == [None] * len(neighbours)


@pytest.mark.parametrize("text", ["not json", "[]", '{"other": {}}'])
def test_garbage_is_a_source_error(text):
    with pytest.raises(SourceError, match="lldp"):
        parse_lldpcli_json(text)


def test_unreadable_file_names_the_path(tmp_path):
    with pytest.raises(SourceError, match="cannot read"):
        read_lldp_file(tmp_path / "missing.json")


def test_runner_reports_a_missing_binary_and_a_failing_lldpcli(tmp_path):
    with pytest.raises(SourceError, match="not found"):
        LldpcliSource(str(tmp_path / "no-lldpcli")).read()
    fake = tmp_path / "lldpcli"
    fake.write_text("#!/bin/sh\necho 'unable to connect to socket /run/lldpd.socket' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    src = LldpcliSource(str(fake), socket=tmp_path / "ctl.sock")
    assert src.command()[1:3] == ["-u", str(tmp_path / "ctl.sock")]
    with pytest.raises(SourceError, match="is lldpd running.*unable to connect"):
        src.read()
    assert not src.available()


def test_runner_parses_what_lldpcli_prints(tmp_path):
    fake = tmp_path / "lldpcli"
    fake.write_text(f"#!/bin/sh\ncat {FIXTURES / 'lldpd_two_ports.json'}\n")
    fake.chmod(0o755)
    src = LldpcliSource(str(fake))
    assert [n.interface for n in src.read()] == ["tvb", "tvb2"] and src.available()
    assert os.path.basename(src.command()[0]) == "lldpcli"


def test_control_characters_relayed_by_lldpd_are_escaped() -> None:
    # lldpd relays what it heard: JSON escapes the bytes (\u001b), json.loads gives them back.
    doc = {
        "lldp": {
            "interface": {
                "ens1f0np0": {
                    "chassis": {"tor\u001b[2J": {"id": {"type": "mac", "value": "aa:bb:cc:dd:ee:ff"}}},
                    "port": {"id": {"type": "ifname", "value": "Eth1/1\u0007"}, "descr": "x\u009b31m"},
                }
            }
        }
    }
    (n,) = parse_lldpcli_json(json.dumps(doc))
    assert (n.switch, n.switch_port, n.port_descr) == ("tor\\x1b[2J", "Eth1/1\\x07", "x\\x9b31m")
