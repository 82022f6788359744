"""The progress line of long commands: on stderr only, on a terminal by itself (a real pty here) or
with --progress; `--json` stdout stays exactly one JSON document."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from netd.api.progress import Progress


def read_all(fd: int) -> str:
    """Everything written so far: a pty hands a read what one write put there, not all of it."""
    data = b""
    while select.select([fd], [], [], 0.5)[0]:
        data += os.read(fd, 4096)
    return data.decode()


def test_on_a_terminal_the_line_rewrites_itself_throttled_and_is_blanked_at_the_end():
    master, slave = pty.openpty()
    now = [0.0]
    try:
        with os.fdopen(slave, "w", closefd=False) as term:
            with Progress("job", 10, stream=term, clock=lambda: now[0], tty_every_s=0.1) as p:
                assert p.enabled and p.tty
                for i in range(10):
                    p.update(i)
                    now[0] += 0.04  # 25 updates a second: every third one is drawn
                p.update(note="phase two", force=True)
            shown = read_all(master)
    finally:
        os.close(master)
        os.close(slave)
    assert "\n" not in shown.replace("\r\n", "")  # one line, rewritten with \r
    drawn = [part.strip() for part in shown.split("\r") if part.strip()]
    assert drawn == ["job: 0/10", "job: 3/10", "job: 6/10", "job: 9/10", "job: phase two"]
    assert shown.endswith("\r" + " " * len("job: phase two") + "\r")  # blanked for what follows


def test_elsewhere_it_is_silent_unless_forced_and_then_one_line_per_second():
    silent = io.StringIO()
    with Progress("job", 3, stream=silent) as p:
        p.update(1)
    assert silent.getvalue() == "" and not p.enabled

    log, now = io.StringIO(), [0.0]
    with Progress("job", 3, force=True, stream=log, clock=lambda: now[0]) as p:
        for i in range(3):
            p.update(i, "ticks")
            now[0] += 0.6
    assert log.getvalue() == "job: 0/3 ticks\njob: 2/3 ticks\n"  # at most one a second, no \r


def _run(args: list[str], tmp_path: Path, stderr_tty: bool) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run `netd ...` with stdout a pipe and stderr a pipe or a real terminal; (result, stderr text)."""
    env = {**os.environ, "NETD_SYSFS_ROOT": str(tmp_path)}
    if not stderr_tty:
        r = subprocess.run(
            [sys.executable, "-m", "netd", *args], env=env, capture_output=True, text=True, timeout=300
        )
        return r, r.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "netd", *args], env=env, stdout=subprocess.PIPE, stderr=slave, text=True
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        out, _ = proc.communicate(timeout=300)
    finally:
        os.close(master)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), b"".join(chunks).decode()


@pytest.mark.slow
@pytest.mark.parametrize("tty", [True, False])
def test_bench_collect_json_stdout_is_pure_and_progress_goes_to_stderr(tmp_path: Path, tty: bool):
    r, err = _run(["bench", "collect", "--devices", "1", "--ticks", "30", "--json"], tmp_path, stderr_tty=tty)
    assert r.returncode == 0, err
    assert json.loads(r.stdout)["ticks"] == 30
    if tty:
        assert "netd bench collect: 0/30 ticks" in err and "\r" in err
    else:
        assert err == ""  # a pipe, no --progress: nothing added
    forced, err = _run(
        ["bench", "collect", "--devices", "1", "--ticks", "30", "--json", "--progress"],
        tmp_path,
        stderr_tty=False,
    )
    assert forced.returncode == 0 and json.loads(forced.stdout)["ticks"] == 30
    assert err.splitlines()[0] == "netd bench collect: 0/30 ticks"


@pytest.mark.slow
def test_bench_detect_json_stdout_is_pure_and_progress_names_the_trace(tmp_path: Path):
    args = [
        "bench",
        "detect",
        "--duration",
        "60",
        "--healthy",
        "0",
        "--glitches",
        "0",
        "--json",
        "--progress",
    ]
    r, err = _run(args, tmp_path, stderr_tty=False)
    assert r.returncode == 0, err
    assert {d["kind"] for d in json.loads(r.stdout)["detectors"]} >= {"pfc_storm", "congestion"}
    lines = err.splitlines()
    assert lines and all(line.startswith("netd bench detect: faults trace, ") for line in lines), err
