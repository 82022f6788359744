"""`netd lab` as a command: parsing, help, and the answers that need no fabric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netd.cli import build_parser, main
from netd.errors import LabError
from netd.lab.cli import _hosts
from netd.lab.layout import LabLayout
from netd.lab.scenarios import build_scenario


def test_lab_actions_are_registered() -> None:
    args = build_parser().parse_args(["lab", "run", "incast", "--senders", "8", "--from", "h1,h2"])
    assert (args.lab_command, args.scenario, args.senders, args.from_hosts) == ("run", "incast", 8, "h1,h2")
    assert build_parser().parse_args(["lab", "down", "--all"]).all


def test_help_explains_the_lab(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["lab", "--help"])
    out = capsys.readouterr().out
    assert "network namespaces" in out and "netd lab down" in out and "docs/lab.md" in out


def test_status_of_a_lab_that_is_not_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "status", "--root", str(tmp_path), "--name", "nolab", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["up"] is False and doc["lab"] == "nolab"


def test_run_on_a_lab_that_is_not_up_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "run", "incast", "--root", str(tmp_path), "--name", "nolab"]) == 2
    assert "netd lab up --name nolab" in capsys.readouterr().err


def test_host_lists() -> None:
    assert _hosts("h1, h2") == (1, 2) and _hosts("3") == (3,) and _hosts(None) is None
    with pytest.raises(LabError, match="host names"):
        _hosts("tor0")


def test_incast_restricted_to_one_tor_with_a_slowed_port() -> None:
    lay = LabLayout("lab")
    sc = build_scenario("incast", lay, senders=4, from_hosts=(1,), bottleneck_mbps=30)
    assert {f.src for f in sc.flows} == {1}
    assert sc.shape == {lay.host_facing(0).id: 30.0} and "30 Mb/s" in sc.description
    with pytest.raises(LabError, match="--from"):
        build_scenario("incast", lay, from_hosts=(0,))
    with pytest.raises(LabError, match="--bottleneck"):
        build_scenario("incast", lay, bottleneck_mbps=500)
