"""`netd fabric export` over the lab: real LLDP frames between namespaces place each lab host under
its ToR, `netd run` on every host exports that in netd_port_info, Prometheus scrapes it, and the
export reads it back from Prometheus, as on a real cluster. The lab and its netd/Prometheus/fabric
processes are tests/lab/test_lab_e2e.py's fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netd.lab.state import LabState
from tests.kube.schemas import check
from tests.kube.test_export import parse_slurm
from tests.lab.test_lab_e2e import lab, netd_on_lab  # noqa: F401  (fixtures)
from tests.lab.test_lab_e2e import pytestmark as lab_marks

pytestmark = [*lab_marks, pytest.mark.slow]


def _export(fmt: str, prometheus: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "netd", "fabric", "export", "--format", fmt, "--prometheus", prometheus],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_three_formats_from_the_labs_lldp(lab: tuple[Path, LabState], netd_on_lab: dict[str, str]) -> None:  # noqa: F811
    _, state = lab
    layout = state.layout
    expected = {f"{state.name}-h{h}": f"{state.name}-tor{layout.tor_of(h)}" for h in range(state.hosts)}
    prom = netd_on_lab["prometheus"]

    objs = [o for o in yaml.safe_load_all(_export("node-labels", prom)) if o]
    for obj in objs:
        check(obj)
    nodes = {
        o["metadata"]["name"]: o["metadata"]["labels"]["netd.io/tor"] for o in objs if o["kind"] == "Node"
    }
    assert nodes == expected

    hns = [o for o in yaml.safe_load_all(_export("hypernodes", prom)) if o]
    for obj in hns:
        check(obj)
    tier1 = {
        o["metadata"]["name"]: {m["selector"]["exactMatch"]["name"] for m in o["spec"]["members"]}
        for o in hns
        if o["spec"]["tier"] == 1
    }
    assert sorted(map(sorted, tier1.values())) == sorted(
        sorted(h for h, t in expected.items() if t == tor) for tor in set(expected.values())
    )

    switches = parse_slurm(_export("slurm", prom))
    for tor in set(expected.values()):
        assert switches[tor] == ("Nodes", sorted(h for h, t in expected.items() if t == tor))
