"""Local QoS contradictions as anomaly findings, through the real daemon tick: an emulated host's tree
(the emulator leaves host 3 with PFC on priority 4 and ECN/DCQCN only on 3) read by `netd run`'s own
composition (build_daemon + start_qos), with lldpd's JSON in the tree saying the ToR port takes at
most 4096-byte frames while the port's MTU is 4200. The fixes the findings print, applied to the tree,
close them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from netd.api.app import create_app
from netd.commands.anomalies_table import render_anomalies
from netd.commands.run import build_daemon
from netd.config.settings import load_config
from netd.emulated.fabric_host import EmulatedFabric
from netd.qos.wiring import start_qos
from tests.processes import Child, stop, wait_ready

FIXTURES = Path(__file__).parents[1] / "fixtures" / "lldp"
NETDEV = "ens1f0np0"


@pytest.fixture
def host3(tmp_path: Path) -> Iterator[Path]:
    """Emulated host 3's tree, left as the emulator wrote it (nothing rewrites it afterwards), with
    lldpd's captured answer (MFS 9216, on ens1f0np0) turned into a 4096-byte ToR port."""
    fabric = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=4, ports_per_host=1)
    root = fabric.host_root(3)
    fabric.close()
    lldp = (FIXTURES / "lldpd_mfs.json").read_text()
    (root / "lldp.json").write_text(lldp.replace('"mfs": "9216"', '"mfs": "4096"'))
    yield root


def _apply(root: Path, fix: str) -> None:
    """Do on the tree what the printed fix does on a host: echo into sysfs files, or set the MTU."""
    for value, path in re.findall(r"echo (\d) > /sys/([^\s;]+)", fix):
        (root / path).write_text(f"{value}\n")
    mtu = re.match(rf"ip link set dev {NETDEV} mtu (\d+)", fix)
    if mtu:
        (root / "class" / "net" / NETDEV / "mtu").write_text(f"{mtu[1]}\n")


def _by_kind(docs: list[dict]) -> dict[str, dict]:  # type: ignore[type-arg]
    return {d["kind"]: d for d in docs}


def test_contradictions_open_findings_and_their_fixes_close_them(host3: Path) -> None:
    cfg = load_config(None, environ={}, overrides={"sysfs_root": host3, "detect": {"fast_interval": 0}})
    daemon, _ = build_daemon(cfg)
    qos = None
    try:
        daemon.tick()  # as `netd run`: a first tick, then the QoS reader wired to the detector
        qos = start_qos(cfg, host3, "emu-host3", daemon.state, None, daemon.detection)
        assert qos.service is not None
        daemon.tick()
        client = TestClient(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval))
        doc = client.get("/v1/anomalies").json()
        active = _by_kind(doc["active"])
        assert set(active) == {"pfc_without_ecn", "mtu_mismatch"}
        pfc, mtu = active["pfc_without_ecn"], active["mtu_mismatch"]
        assert pfc["severity"] == mtu["severity"] == "warning"
        assert pfc["scope"] | {"host": None} == {
            "host": None,
            "device": "mlx5_0",
            "port": 1,
            "netdev": NETDEV,
            "priority": 4,
            "subject": None,
        }
        assert mtu["scope"]["priority"] is None and mtu["scope"]["subject"] == NETDEV
        assert "accepts at most 4096" in mtu["explanation"]
        # host 3 trusts PCP: its RoCE frames carry an 802.1Q tag, 4096 - 22 = 4074
        assert mtu["evidence"]["fix"].startswith(f"ip link set dev {NETDEV} mtu 4074")
        topology = client.get("/v1/topology").json()["ports"]["items"]
        heard = [n["max_frame_size"] for p in topology if p["netdev"] == NETDEV for n in p["neighbors"]]
        assert heard == [4096]  # what the check compared with
        table = render_anomalies(doc)
        assert "pfc_without_ecn" in table and "mtu_mismatch" in table
        assert (
            client.get("/v1/anomalies", params={"kind": "mtu_mismatch"}).json()["active"][0]["id"]
            == mtu["id"]
        )
        assert 'netd_anomaly_active{device="mlx5_0",kind="pfc_without_ecn"' in client.get("/metrics").text

        daemon.tick()  # a tick with nothing new keeps them open, the same findings
        again = _by_kind(client.get("/v1/anomalies").json()["active"])
        assert {k: f["id"] for k, f in again.items()} == {k: f["id"] for k, f in active.items()}

        _apply(host3, pfc["evidence"]["fix"])
        _apply(host3, mtu["evidence"]["fix"])
        daemon.tick()  # the reader has not looked again: the findings stand
        assert set(_by_kind(client.get("/v1/anomalies").json()["active"])) == set(active)
        qos.service.refresh()
        daemon.tick()
        after = client.get("/v1/anomalies", params={"status": "all"}).json()
        assert after["active"] == []
        closed = _by_kind(after["recent"])
        assert {k: (f["id"], f["resolution"]) for k, f in closed.items()} == {
            k: (f["id"], "cleared") for k, f in active.items()
        }
    finally:
        if qos is not None:
            qos.close()
        daemon.close()


@pytest.mark.slow
def test_netd_anomalies_lists_them_from_a_running_daemon(host3: Path, free_port: int) -> None:
    env = {**os.environ, "NETD_CONFIG": "/dev/null", "NETD_SYSFS_ROOT": str(host3)}
    listen = f"127.0.0.1:{free_port}"
    proc = Child([sys.executable, "-m", "netd", "run", "--listen", listen, "--interval", "0.5"], env=env)
    try:
        wait_ready(f"http://{listen}", proc)
        deadline_ticks = 40
        out = ""
        for _ in range(deadline_ticks):  # the first tick runs before the reader is wired: wait for one more
            cli = subprocess.run(
                [sys.executable, "-m", "netd", "anomalies", "--listen", listen, "--kind", "mtu_mismatch"],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            out = cli.stdout
            if "mtu_mismatch" in out:
                break
        assert cli.returncode == 0, cli.stderr
        assert re.search(r"warning\s+mtu_mismatch\s+mlx5_0/1 ens1f0np0", out), out
    finally:
        stop(proc)
