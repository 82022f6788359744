"""`netd tune` without --listen: it asks the daemon at the configured address when one answers, builds a
temporary fabric (saying so in one line on stderr) only when none does, and keeps `--json` stdout
one JSON document, with progress on stderr only when asked or on a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import Child, stop, wait_ready

pytestmark = pytest.mark.slow  # real `netd run` and `netd tune` processes


def _tune(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "netd", "tune", *args], env=env, capture_output=True, text=True, timeout=300
    )


def _env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    empty = tmp_path / "sys"  # no RDMA device here: the temporary fabric is the only other source
    empty.mkdir(exist_ok=True)
    return {
        **os.environ,
        "NETD_LISTEN": f"127.0.0.1:{port}",  # the "default" address netd tune asks, set like a user would
        "NETD_SYSFS_ROOT": str(empty),
        "NETD_TUNING_STATE_DIR": str(tmp_path / "journal"),
        "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"),
        **extra,
    }


@pytest.fixture
def daemon(tmp_path: Path, free_port: int, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A real `netd run` on a random port (emulated fabric); its environment, for the commands."""
    env = _env(tmp_path, free_port, **getattr(request, "param", {}))
    proc = Child([sys.executable, "-m", "netd", "run", "--interval", "0.5"], env=env, start_new_session=True)
    try:
        wait_ready(f"http://127.0.0.1:{free_port}", proc)
        yield env
    finally:
        stop(proc)


def test_a_running_daemon_answers_and_no_temporary_fabric_is_built(daemon: dict[str, str]) -> None:
    r = _tune(daemon, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # the whole of stdout: the daemon's /v1/tuning document
    assert doc["mode"] == "recommend" and "recommendation" in doc
    assert "temporary" not in r.stderr and r.stderr.strip() == ""
    text = _tune(daemon)
    assert text.returncode == 0 and text.stdout.startswith(
        f"netd tune: from the daemon at {daemon['NETD_LISTEN']}"
    )


@pytest.mark.parametrize("daemon", [{"NETD_TUNING_MODE": "off"}], indirect=True)
def test_a_daemon_without_tuning_is_one_line_not_a_temporary_fabric(daemon: dict[str, str]) -> None:
    r = _tune(daemon)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 404" in lines[0] and 'mode = "off"' in lines[0], r.stderr
    assert r.stdout == ""


def test_without_a_daemon_one_line_says_so_and_json_stdout_stays_pure(tmp_path: Path, free_port: int) -> None:
    env = _env(tmp_path, free_port)  # nothing listens on free_port
    quiet = _tune(env, "--json", "--seconds", "2")
    assert quiet.returncode == 0, quiet.stderr
    doc = json.loads(quiet.stdout)
    assert doc["recommendation"]["action"] in ("hold", "change")
    lines = quiet.stderr.strip().splitlines()
    assert len(lines) == 1, quiet.stderr  # stderr is a pipe here: no progress unless asked
    assert f"no netd daemon at 127.0.0.1:{free_port}" in lines[0] and "temporary emulated fabric" in lines[0]

    loud = _tune(env, "--json", "--seconds", "2", "--progress")
    assert loud.returncode == 0, loud.stderr
    assert json.loads(loud.stdout)["recommendation"]["action"] in ("hold", "change")
    progress = [line for line in loud.stderr.splitlines() if line.startswith("netd tune:")]
    assert any("building a temporary emulated fabric" in p for p in progress), loud.stderr
    assert any("observing counters, second 2/2" in p for p in progress), loud.stderr
    assert any("simulating the candidate parameter sets" in p for p in progress), loud.stderr
    assert "\r" not in loud.stderr  # not a terminal: plain lines for a log
