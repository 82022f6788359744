"""`netd run` as a process serving the plugin: its socket, /v1/nccl, the CLI, and a static export."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from netd.nccl.table import unpack_table
from tests.nccl.plugin_harness import NCCL_SUCCESS, Plugin, build_plugin
from tests.processes import Child, stop

pytestmark = pytest.mark.slow  # runs `netd run` with its NCCL socket

TOKEN = "service-test-token"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("svc")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    env.update(
        NETD_EMULATOR_STATE_DIR=str(tmp / "emu"),
        NETD_SYSFS_ROOT=str(tmp),
        NETD_NCCL_SOCKET=str(tmp / "nccl.sock"),
        NETD_API_TOKEN=TOKEN,
        NETD_NCCL_PIN_SERVICE=url,
        NETD_NCCL_PIN_WINDOW="10",
    )
    argv = ["run", "--listen", f"127.0.0.1:{port}", "--interval", "0.5"]
    proc = Child([sys.executable, "-m", "netd", *argv], env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr_text()
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200 and (tmp / "nccl.sock").exists():
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "netd run did not become ready"
            time.sleep(0.2)
        time.sleep(1.2)  # two ticks: rates, hence conditions
        yield {"proc": proc, "url": url, "env": env, "socket": tmp / "nccl.sock", "port": port, "tmp": tmp}
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def plugin() -> Plugin:
    return Plugin(build_plugin())


def _cli(daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "netd", *args, "--listen", f"127.0.0.1:{daemon['port']}"],
        env=daemon["env"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_single_node_communicator_pins_at_netd_run(daemon, plugin, monkeypatch):
    monkeypatch.setenv("NETD_TUNER_SOCKET", str(daemon["socket"]))
    rc, ctx = plugin.init(0xE2E1, 1, 1)
    assert rc == NCCL_SUCCESS
    assert "latched" in plugin.logs[-1][2] and "(1 ranks, 1 nodes)" in plugin.logs[-1][2]
    plugin.finalize(ctx)


def test_multi_node_communicator_pins_through_the_pin_service(daemon, plugin, monkeypatch):
    monkeypatch.setenv("NETD_TUNER_SOCKET", str(daemon["socket"]))
    got: list[tuple[int, int | None]] = []
    ranks = [threading.Thread(target=lambda: got.append(plugin.init(0xE2E2, 2, 2))) for _ in range(2)]
    for t in ranks:
        t.start()
    for t in ranks:
        t.join(30)
    assert [rc for rc, _ in got] == [NCCL_SUCCESS, NCCL_SUCCESS]
    for _, ctx in got:
        plugin.finalize(ctx)
    pins = httpx.get(daemon["url"] + "/v1/nccl/pins").json()["pins"]
    mine = [p for p in pins if p["comm_id"] == f"{0xE2E2:016x}"]
    assert mine and mine[0]["state"] == "apply" and mine[0]["members"] == 2


def test_nccl_env_and_table_commands(daemon):
    env = _cli(daemon, "nccl-env")
    assert env.returncode == 0, env.stderr
    assert "export NCCL_TUNER_PLUGIN=netd" in env.stdout and "EMULATED" in env.stdout
    assert f"export NETD_TUNER_SOCKET={daemon['socket']}" in env.stdout
    show = _cli(daemon, "nccl-table", "show")
    assert show.returncode == 0 and show.stdout.startswith("table ")


def test_exported_table_pins_a_job_statically(daemon, plugin, monkeypatch):
    path = daemon["tmp"] / "job.ndht"
    out = _cli(daemon, "nccl-table", "export", str(path))
    assert out.returncode == 0, out.stderr
    lines = dict(
        line.removeprefix("export ").split("=", 1) for line in out.stdout.splitlines() if "=" in line
    )
    assert Path(lines["NETD_TUNER_TABLE"]) == path.resolve()
    monkeypatch.setenv("NETD_TUNER_TABLE", lines["NETD_TUNER_TABLE"])
    monkeypatch.setenv("NETD_TUNER_TABLE_SHA256", lines["NETD_TUNER_TABLE_SHA256"])
    monkeypatch.setenv("NETD_TUNER_SOCKET", "/nonexistent/never-asked.sock")
    rc, ctx = plugin.init(0xE2E3, 8, 4)
    assert rc == NCCL_SUCCESS and "static table" in plugin.logs[-1][2]
    plugin.finalize(ctx)
    decoded = subprocess.run(
        [sys.executable, "-m", "netd", "nccl-table", "show", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert decoded.returncode == 0 and decoded.stdout.startswith("table ")


@pytest.mark.parametrize("where", ["before FILE", "after FILE", "before export"])
def test_table_export_takes_its_options_anywhere(daemon, where):
    """`netd nccl-table export --listen X FILE` once rejected FILE: the options may come before the
    file, after it, or before the action."""
    path = daemon["tmp"] / f"order-{where.replace(' ', '-')}.ndht"
    listen = ["--listen", f"127.0.0.1:{daemon['port']}"]
    args = {
        "before FILE": ["nccl-table", "export", *listen, str(path)],
        "after FILE": ["nccl-table", "export", str(path), *listen],
        "before export": ["nccl-table", *listen, "export", str(path)],
    }[where]
    out = subprocess.run(
        [sys.executable, "-m", "netd", *args], env=daemon["env"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    data = path.read_bytes()
    unpack_table(data)  # the daemon's table, as the plugin would check it
    assert f"NETD_TUNER_TABLE_SHA256={hashlib.sha256(data).hexdigest()}" in out.stdout


def test_table_export_without_a_file_is_a_usage_error(daemon):
    out = _cli(daemon, "nccl-table", "export")
    assert out.returncode == 2 and "required: file" in out.stderr and "Traceback" not in out.stderr


def test_banner_names_the_socket_and_shutdown_removes_it(daemon):
    proc = daemon["proc"]
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    stderr = proc.stderr_text()
    assert proc.returncode == 0
    assert f"NCCL tuner: NCCL_TUNER_PLUGIN=netd NETD_TUNER_SOCKET={daemon['socket']}" in stderr
    assert not daemon["socket"].exists()
