"""The lab end to end, on the real kernel: namespaces, veths, qdiscs, BPF, PFC frames, DCQCN, netd.

Root only (CI is root). One lab per module, named ``t<random>`` under a temporary root so parallel
runs never collide; the fixture removes it in any case, and checks that nothing is left behind.
Traffic stays inside the lab's namespaces (10.77.0.0/16 exists nowhere else).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from netd.cli import main
from netd.lab.bench import measure_incast
from netd.lab.layout import NS_PREFIX, LabLayout
from netd.lab.lldp import LLDP_SOCKET_DIR, lldp_socket, neighbors
from netd.lab.manage import down, up
from netd.lab.netns import list_netns
from netd.lab.params import lab_params
from netd.lab.render import render_summary
from netd.lab.runner import run_scenario
from netd.lab.scenarios import build_scenario
from netd.lab.state import LabState, lab_dir
from netd.lab.status import lab_status
from netd.lab.summary import summarize
from tests.lab.marks import LAB
from tests.processes import Child, stop

pytestmark = [*LAB]


def _leftovers(name: str, root: Path) -> list[str]:
    left = list_netns(f"{NS_PREFIX}{name}-")
    left += [str(p) for p in LLDP_SOCKET_DIR.glob(f"{NS_PREFIX}{name}-*")] if LLDP_SOCKET_DIR.is_dir() else []
    if lab_dir(root, name).exists():
        left.append(str(lab_dir(root, name)))
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(lab_dir(root, name)).encode() in cmd:
                left.append(f"pid {entry}: {cmd[:80]!r}")
    return left


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, LabState]]:
    root = tmp_path_factory.mktemp("lab")
    name = f"t{secrets.token_hex(3)}"
    try:
        state, note = up(root, LabLayout(name))
        assert note == "up"
        yield root, state
    finally:
        down(root, name)
        assert _leftovers(name, root) == []


def test_fabric_is_up_with_processes_and_lldp_neighbours(lab: tuple[Path, LabState]) -> None:
    root, state = lab
    doc = lab_status(root, state.name)
    assert doc["up"], doc["problems"]
    assert all(p["running"] for p in doc["processes"].values())
    assert {r["node"] for r in doc["ports"]} == {"h0", "h1", "h2", "h3", "tor0", "tor1", "spine"}
    assert up(root, LabLayout(state.name))[1] == "already up"  # idempotent
    layout = state.layout
    h0 = layout.host_nodes[0]
    deadline = time.monotonic() + 20
    seen: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        seen = neighbors(lldp_socket(h0))
        if seen:
            break
        time.sleep(0.5)
    assert seen and seen[0]["interface"] == "eth0"
    assert (seen[0]["system"], seen[0]["port"]) == (f"{state.name}-tor0", "swp1")


def test_incast_dcqcn_ground_truth_and_netd_agree(lab: tuple[Path, LabState]) -> None:
    root, state = lab
    m = measure_incast(root, state.name, senders=8, duration_s=5.0)
    s = m["summary"]
    (bottleneck,) = s["bottlenecks"]
    assert bottleneck["port"] == "tor0/swp1" and bottleneck["toward"] == "h0"
    # CE marks at the bottleneck, CNPs back to every sending host, rates cut by DCQCN
    assert s["ce_fraction"] > 0.005 and bottleneck["marked"] > 0
    assert s["cnps"] > 0 and all(s["hosts"][f"h{h}"]["cnp_handled"] > 0 for h in (1, 2, 3))
    assert all(f["final_rate_mbps"] < 50.0 for f in s["flows"])  # from 100 Mb/s line rate
    # queue held near the marking thresholds (Kmin 5 KB, Kmax 100 KB), lossless, link kept busy
    # (the controller's timing says whether the machine starved the reaction points meanwhile)
    ctl = s["controller"]
    assert bottleneck["queue_p99_kb"] is not None and bottleneck["queue_p99_kb"] <= 150.0, (bottleneck, ctl)
    assert ctl["steps"] >= 2000 and f"{ctl['late_steps']} later than the cut period" in render_summary(s)
    assert s["drops"] == 0
    assert bottleneck["utilization"] >= 0.85 and s["goodput_gbps"] >= 0.08
    assert s["jain"] is not None and s["jain"] >= 0.9
    # what the receiver's NIC counted is what the switch marked (none are lost in between)
    assert s["hosts"]["h0"]["ecn_marked_rx"] == pytest.approx(bottleneck["marked"], rel=0.05)
    # netd (counters read through its sources and series; eBPF probes where they load) vs wire taps
    assert m["ticks"] >= 4
    assert {"ecn_marked", "cnp_sent", "cnp_received_h1", "cnp_received_h2", "cnp_received_h3"} <= set(
        m["rate_errors"]
    )
    # totals over one window that starts and ends with the fabric quiet: exact, nothing lost or invented
    assert all(e == 0.0 for e in m["rate_errors"].values()), m["rate_errors"]
    # the wire, from captures decoded independently: valid ICRCs, BECN on CNPs, the NP's interval kept,
    # and netd's PSN gaps (where its probe loads) equal to the capture's
    w = m["wire"]
    assert (w["icrc_valid_fraction"], w["becn_fraction"]) == (1.0, 1.0)
    assert w["cnp_min_interval_ms"] >= lab_params().np_min_time_between_cnps / 1e3
    assert w["psn_gaps_false"] == (0 if m["probes"] else None)


def test_storm_pauses_spread_and_recover(lab: tuple[Path, LabState]) -> None:
    root, state = lab
    sc = build_scenario("storm", state.layout, duration_s=3.5, stuck_at_s=0.8, stuck_for_s=1.5)
    s = summarize(run_scenario(root, state.name, sc, lab_params()))
    paused = s["pfc"]["paused_ports"]
    assert paused.get("tor0/swp1", 0) >= 1.2  # h0's XOFF stops its ToR port for the whole storm
    assert any(p.startswith(("spine/", "tor1/")) for p in paused)  # and the pause spreads upstream
    assert s["hosts"]["h0"]["tx_pause"] > 0 and s["hosts"]["h0"]["pause_storm_warning"] >= 1
    assert any(s["hosts"][h].get("rx_pause_duration_us", 0) > 1e6 for h in ("h2", "h3"))
    before, stuck, after = (p["goodput_mbps"] for p in s["phases"])
    assert stuck < 0.25 * before and after > 0.5 * before
    assert s["drops"] == 0, s["pfc"]  # lossless: PFC, not the buffer limit, held the traffic


def test_cli_victim_flow_is_throttled_by_pfc(
    lab: tuple[Path, LabState], capsys: pytest.CaptureFixture[str]
) -> None:
    root, state = lab
    assert main(["lab", "status", "--name", state.name, "--root", str(root)]) == 0
    assert "up" in capsys.readouterr().out
    argv = ["lab", "run", "victim", "--name", state.name, "--root", str(root), "--duration", "2.5", "--json"]
    assert main(argv) == 0
    import json

    s = json.loads(capsys.readouterr().out)
    victim = next(f for f in s["flows"] if f["label"] == "victim")
    h1_port = next(b for b in s["bottlenecks"] if b["toward"] == "h1")
    # the victim's own receiver port is nearly idle, yet PFC holds the victim far below its line rate
    assert h1_port["utilization"] < 0.5 and victim["goodput_mbps"] < 50.0
    assert s["pfc"]["xoff_sent"] > 0 and s["ce_fraction"] == 0  # ECN off: PFC only


def test_down_removes_everything_after_a_crash(tmp_path: Path) -> None:
    name = f"c{secrets.token_hex(3)}"
    try:
        state, _ = up(tmp_path, LabLayout(name, hosts=2, tors=1), lldp=False)
        # a crash: the lab daemon and an agent die, and the state file is lost
        for key in ("labd", "agent:h0"):
            os.kill(state.pids[key], signal.SIGKILL)
            try:
                os.waitpid(state.pids[key], 0)  # our child (spawned by up): no zombie left behind
            except ChildProcessError:
                pass
        assert lab_status(tmp_path, name)["up"] is False
        (lab_dir(tmp_path, name) / "lab.json").unlink()
    finally:
        report = down(tmp_path, name)
    assert set(report["namespaces_removed"]) == {f"ndl-{name}-h0", f"ndl-{name}-h1", f"ndl-{name}-tor0"}
    assert _leftovers(name, tmp_path) == []
    assert down(tmp_path, name)["namespaces_removed"] == []  # idempotent


# -- netd on the lab: detectors, topology, the fabric service and the scheduler extender ---------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, **params: str) -> Any:
    return httpx.get(url, params=params, timeout=3).json()


def _until(
    what: str, check: Callable[[], Any], timeout_s: float, show: Callable[[], Any] | None = None
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = check()
        except (httpx.HTTPError, ValueError, KeyError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"; last: {show()}" if show else ""))
        time.sleep(0.25)


@pytest.fixture
def netd_on_lab(lab: tuple[Path, LabState], tmp_path: Path) -> Iterator[dict[str, str]]:
    """`netd run` on every lab host (its tree, its LLDP snapshot), Prometheus scraping them, and
    `netd fabric` over that Prometheus: the deployment docs/service.md describes, on the lab."""
    if shutil.which("prometheus") is None:
        pytest.skip("needs Debian's prometheus package")
    root, state = lab
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    procs: list[Child] = []
    urls: dict[str, str] = {}
    try:
        for h in range(state.hosts):
            port = _free_port()
            host_env = env | {
                "NETD_HOST": f"{state.name}-h{h}",
                "NETD_NCCL_SOCKET": str(tmp_path / f"nccl{h}.sock"),
            }
            tree = str(lab_dir(root, state.name) / f"host{h}")
            argv = [
                "run",
                "--sysfs-root",
                tree,
                "--fabric",
                "hardware",
                "--interval",
                "0.5",
                "--listen",
                f"127.0.0.1:{port}",
            ]
            procs.append(_netd(argv, host_env))
            urls[f"h{h}"] = f"http://127.0.0.1:{port}"
        prom = _free_port()
        targets = ", ".join(f"'{u.removeprefix('http://')}'" for u in urls.values())
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: netd\n    static_configs: [{{targets: [{targets}]}}]\n"
        )
        procs.append(
            Child(
                [
                    "prometheus",
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prom}",
                    "--log.level=warn",
                ]
            )
        )
        urls["prometheus"] = f"http://127.0.0.1:{prom}"
        fabric = _free_port()
        fabric_env = env | {
            "NETD_CLUSTER_WINDOW": "4s",
            "NETD_CLUSTER_REFRESH_INTERVAL": "1",
            "NETD_NCCL_SOCKET": str(tmp_path / "nccl-fabric.sock"),
        }
        procs.append(
            _netd(
                [
                    "fabric",
                    "--prometheus",
                    urls["prometheus"],
                    "--listen",
                    f"127.0.0.1:{fabric}",
                    "--sysfs-root",
                    str(tmp_path),
                ],
                fabric_env,
            )
        )
        urls["fabric"] = f"http://127.0.0.1:{fabric}"

        def scraped() -> bool:
            r = _get(f"{urls['prometheus']}/api/v1/query", query="netd_port_info")
            return len(r["data"]["result"]) == state.hosts

        _until("Prometheus to scrape every lab host's netd", scraped, 90)
        _until("netd fabric", lambda: httpx.get(f"{urls['fabric']}/readyz", timeout=1).status_code == 200, 60)
        yield urls
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            stop(p)


def _netd(args: list[str], env: dict[str, str]) -> Child:
    return Child([sys.executable, "-m", "netd", *args], env=env)


def _in_background(
    root: Path, name: str, scenario: Any
) -> tuple[threading.Thread, list[Any], threading.Event]:
    """The scenario in a thread; set the event to end it once the test has seen what it waits for."""
    out: list[Any] = []
    stop = threading.Event()
    t = threading.Thread(
        target=lambda: out.append(run_scenario(root, name, scenario, lab_params(), stop=stop)), daemon=True
    )
    t.start()
    return t, out, stop


def test_netd_detectors_scores_and_scheduler_see_the_lab(
    lab: tuple[Path, LabState], netd_on_lab: dict[str, str]
) -> None:
    root, state = lab
    tor0, tor1 = f"{state.name}-tor0", f"{state.name}-tor1"
    urls = netd_on_lab
    # h0's port is placed under tor0/swp1 by LLDP, as on a real host
    (port,) = _get(f"{urls['h0']}/v1/topology")["ports"]["items"]
    assert (port["device"], port["tor"], port["tor_port"]) == ("mlx5_0", tor0, "swp1")

    runner, _, done = _in_background(
        # long enough to outlast the three waits below even on a loaded machine (they run in sequence
        # while the incast must still be congesting tor0); ended as soon as they have succeeded. The
        # senders are h0's neighbour under tor0, into h0's ToR port slowed to half its rate: senders
        # under tor1 had PFC pause their own ports as tor1's uplink backed up (congestion spreading),
        # and tor1 could then score as congested as tor0 (CI once: 0.600 against 0.594), when the
        # preference this test asserts, tor1's idle hosts over tor0's, does not follow.
        root,
        state.name,
        build_scenario(
            "incast",
            state.layout,
            senders=8,
            duration_s=120.0,
            from_hosts=(1,),
            bottleneck_mbps=state.layout.host_facing(0).rate_mbps / 2,
        ),
    )
    try:

        def congestion_on_h0() -> Any:
            active = _get(f"{urls['h0']}/v1/anomalies")["active"]
            return [f for f in active if f["kind"] == "congestion" and f["scope"]["device"] == "mlx5_0"]

        (finding,) = _until("a congestion finding on h0's port", congestion_on_h0, 30)
        assert finding["scope"]["port"] == 1 and finding["severity"] in ("warning", "critical")

        def ranked() -> Any:
            items = _get(f"{urls['fabric']}/v1/congestion", scope="tor")["items"]
            names = [i["name"] for i in items]
            return (
                items
                if tor0 in names
                and tor1 in names
                and items[0]["name"] == tor0
                and items[0]["smoothed"] > items[1]["smoothed"]
                and items[0]["level"] != "ok"  # (smoothed scores rise over ticks: wait for both)
                else None
            )

        def tors() -> Any:
            return [
                (i["name"], i["smoothed"], i["level"])
                for i in _get(f"{urls['fabric']}/v1/congestion", scope="tor")["items"]
            ]

        ranked_items = _until("the fabric to rank tor0 first", ranked, 30, show=tors)
        assert ranked_items[0]["level"] != "ok"
        nodes = [f"{state.name}-h{h}" for h in range(state.hosts)]
        pod = {"Pod": {"metadata": {"name": "job-0"}}, "NodeNames": nodes}

        def scores() -> dict[str, int]:
            answer = httpx.post(f"{urls['fabric']}/scheduler/prioritize", json=pod, timeout=3).json()
            return {h["Host"]: h["Score"] for h in answer}

        def prefers_tor1() -> bool:
            s = scores()
            under = [[s[f"{state.name}-h{h}"] for h in state.layout.hosts_under(t)] for t in (0, 1)]
            return min(under[1]) > max(under[0])

        _until("prioritize to prefer the hosts under tor1", prefers_tor1, 30, show=lambda: (scores(), tors()))
    finally:
        done.set()
        runner.join(timeout=60)

    # stuck for as long as a loaded machine may need to see it; ended once seen
    storm = build_scenario("storm", state.layout, duration_s=40.0, stuck_at_s=0.5, stuck_for_s=39.0)
    runner, _, done = _in_background(root, state.name, storm)
    try:

        def storm_on_a_sender() -> Any:
            found = []
            for h in ("h2", "h3"):
                found += [f for f in _get(f"{urls[h]}/v1/anomalies")["active"] if f["kind"] == "pfc_storm"]
            return found

        stormed = _until("a PFC storm finding on a paused sender", storm_on_a_sender, 30)
        assert all(f["scope"]["priority"] == 3 for f in stormed)
    finally:
        done.set()
        runner.join(timeout=30)
