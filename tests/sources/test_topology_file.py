"""The static topology file: accepted shapes and clear errors."""

from __future__ import annotations

import pytest

from netd.errors import SourceError
from netd.sources.topology_file import parse_topology_file, read_topology_file


def test_full_file():
    f = parse_topology_file(
        """
version: 1
spines:
  spine-1: {mgmt_address: 10.0.0.1}
tors:
  leaf-1: {spines: [spine-1, spine-2], rail: 0, mgmt_address: 10.0.1.1}
  leaf-2:
hosts:
  gpu-01:
    mlx5_0: {tor: leaf-3, tor_port: Ethernet0, rail: 1}
"""
    )
    assert f.tors["leaf-1"].spines == ("spine-1", "spine-2") and f.tors["leaf-1"].rail == 0
    assert f.tors["leaf-2"].spines == () and "leaf-3" in f.tors  # named by a host port: declared implicitly
    assert f.spines["spine-1"].mgmt_address == "10.0.0.1" and "spine-2" in f.spines
    assert f.ports["gpu-01"]["mlx5_0"].tor_port == "Ethernet0" and f.rails_by == "device_index"


def test_empty_file_is_an_empty_fabric():
    f = parse_topology_file("")
    assert (dict(f.tors), dict(f.spines), dict(f.ports)) == ({}, {}, {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tors:\n  leaf-1: {spine: [x]}\n", "unknown key `tors.leaf-1.spine`"),
        ("tors:\n  leaf-1: {rail: -1}\n", "`tors.leaf-1.rail`"),
        ("version: 2\n", "`version`"),
        ("rails: by-magic\n", "`rails`"),
        ("- a\n- b\n", "expected a mapping"),
        ("tors: [\n", "not valid YAML"),
    ],
)
def test_errors_name_the_key(text, message):
    with pytest.raises(SourceError, match=message):
        parse_topology_file(text, origin="t.yaml")


def test_reading_a_missing_file(tmp_path):
    with pytest.raises(SourceError, match="cannot read"):
        read_topology_file(tmp_path / "nope.yaml")
    (tmp_path / "t.yaml").write_text("spines: [s1]\n")
    assert read_topology_file(tmp_path / "t.yaml").path == str(tmp_path / "t.yaml")
