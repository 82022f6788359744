"""`netd fabric export` as a process over the emulated fabric: every host's topology comes from its
own tree and lldp.json through netd's ordinary topology sources, then the three formats."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.kube.schemas import check
from tests.kube.test_export import parse_slurm

pytestmark = pytest.mark.slow  # builds the emulated fabric in a child process

TORS, PER_TOR = 3, 2


def _export(fmt: str) -> str:
    env = {
        **os.environ,
        "NETD_EMULATOR_TORS": str(TORS),
        "NETD_EMULATOR_HOSTS_PER_TOR": str(PER_TOR),
        "NETD_EMULATOR_PORTS_PER_HOST": "1",
    }
    env.pop("NETD_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "netd", "fabric", "export", "--emulated", "--format", fmt],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# the emulator's wiring (docs/emulated-fabric.md): host h under ToR emu-tor<h // hosts_per_tor>, one spine
EXPECTED = {f"emu-host{h}": f"emu-tor{h // PER_TOR}" for h in range(TORS * PER_TOR)}


def test_node_labels_and_kueue_topology():
    objs = list(yaml.safe_load_all(_export("node-labels")))
    for obj in objs:
        check(obj)
    nodes = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objs if o["kind"] == "Node"}
    assert {n: labels["netd.io/tor"] for n, labels in nodes.items()} == EXPECTED
    assert {labels["netd.io/spine"] for labels in nodes.values()} == {"emu-spine0"}
    assert {labels["netd.io/rail"] for labels in nodes.values()} == {"0"}  # one port each: rail 0
    assert [o["kind"] for o in objs].count("Topology") == 1


def test_hypernodes():
    objs = list(yaml.safe_load_all(_export("hypernodes")))
    for obj in objs:
        check(obj)
    tier1 = {o["metadata"]["name"]: o for o in objs if o["spec"]["tier"] == 1}
    assert len(tier1) == TORS
    for t in range(TORS):
        members = {
            m["selector"]["exactMatch"]["name"] for m in tier1[f"netd-tor-emu-tor{t}"]["spec"]["members"]
        }
        assert members == {h for h, tor in EXPECTED.items() if tor == f"emu-tor{t}"}
    (tier2,) = [o for o in objs if o["spec"]["tier"] == 2]
    assert {m["selector"]["exactMatch"]["name"] for m in tier2["spec"]["members"]} == set(tier1)


def test_slurm():
    switches = parse_slurm(_export("slurm"))
    assert switches["emu-spine0"] == ("Switches", [f"emu-tor{t}" for t in range(TORS)])
    for t in range(TORS):
        kind, nodes = switches[f"emu-tor{t}"]
        assert kind == "Nodes" and set(nodes) == {h for h, tor in EXPECTED.items() if tor == f"emu-tor{t}"}


def test_export_without_a_view_is_a_one_line_error():
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    done = subprocess.run(
        [sys.executable, "-m", "netd", "fabric", "export", "--format", "slurm"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("netd: no cluster view") and "Traceback" not in done.stderr
