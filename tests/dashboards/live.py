"""A real netd on the emulated fabric and a real Prometheus scraping it, both on loopback.

Used by the live dashboard tests: Prometheus scrapes netd every second and evaluates the committed
rule files every second, so after a few seconds every rate, recording rule and alert expression has
data to work on.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

__all__ = ["PrometheusApi", "bpf_available", "free_port", "prometheus_binary", "run_netd", "run_prometheus"]

SCRAPE_INTERVAL_S = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def prometheus_binary() -> str | None:
    return shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _PortTaken(Exception):
    """The port free_port() found was taken by someone else before the server bound it."""


def _wait_http(
    url: str, proc: subprocess.Popen[bytes], log: Path, what: str, timeout_s: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text()
            if "in use" in text:
                raise _PortTaken(what)
            raise AssertionError(f"{what} exited early (status {proc.returncode}):\n{text[-3000:]}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not become ready at {url}:\n{log.read_text()[-3000:]}")


@contextmanager
def _serve(
    argv: Callable[[int], list[str]], ready_path: str, log: Path, what: str, timeout_s: float, **popen: Any
) -> Iterator[str]:
    """Start ``argv(port)`` on a free loopback port (again on another one if that port gets taken)."""
    for _ in range(3):
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(argv(port), stdout=out, stderr=subprocess.STDOUT, **popen)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_http(url + ready_path, proc, log, what, timeout_s)
        except _PortTaken:
            _stop(proc)
            continue
        except BaseException:
            _stop(proc)
            raise
        try:
            yield url
        finally:
            _stop(proc)
        return
    raise AssertionError(f"{what}: three free ports in a row were taken before it could bind")


def bpf_available() -> bool:
    """netd's eBPF probes can load here: root and Debian's bcc importable."""
    return os.geteuid() == 0 and importlib.util.find_spec("bcc") is not None


@contextmanager
def run_netd(workdir: Path, bpf: bool) -> Iterator[str]:
    """`netd run` on the emulated fabric in ``workdir`` (its own state dir); yields its URL.

    With ``bpf``, the probes that need no interface (TCP retransmits, RDMA CM) load with run statistics,
    so the eBPF self-metrics exist. Every state path (emulator, NCCL socket, tuning journal, eBPF
    attachment journal) stays in ``workdir``.
    """
    config = workdir / "netd.toml"
    config.write_text("[bpf]\nenabled = true\nrun_stats = true\n" if bpf else "")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    # every path netd would otherwise share with other daemons on this machine (as root: /run/netd/...)
    env |= {
        "NETD_EMULATOR_STATE_DIR": str(workdir / "emu"),
        "NETD_SYSFS_ROOT": str(workdir),
        "NETD_NCCL_SOCKET": str(workdir / "nccl.sock"),
        "NETD_TUNING_STATE_DIR": str(workdir / "tuning"),
        "NETD_BPF_STATE_FILE": str(workdir / "bpf-state.json"),
    }

    def argv(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "netd",
            "run",
            "--config",
            str(config),
            "--fabric",
            "emulated",
            "--listen",
            f"127.0.0.1:{port}",
            "--interval",
            "0.5",
        ]

    # bcc compiles the probes for seconds before netd listens, more on a loaded machine
    with _serve(argv, "/readyz", workdir / "netd.log", "netd run", 90.0, env=env) as url:
        yield url


@contextmanager
def run_prometheus(workdir: Path, target: str, rule_files: list[Path]) -> Iterator[PrometheusApi]:
    """Prometheus scraping ``target`` (host:port) as job "netd" every second, with ``rule_files``."""
    binary = prometheus_binary()
    assert binary is not None, "prometheus is not installed (make setup installs Debian's package)"
    config = workdir / "prometheus.yml"
    files = "".join(f"\n  - {f.resolve()}" for f in rule_files)
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_INTERVAL_S}s\n  scrape_timeout: {SCRAPE_INTERVAL_S}s\n"
        f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\nrule_files:{files}\n"
        f"scrape_configs:\n  - job_name: netd\n    static_configs:\n      - targets: ['{target}']\n"
    )
    log = workdir / "prometheus.log"

    def argv(port: int) -> list[str]:
        return [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]

    with _serve(argv, "/-/ready", log, "prometheus", 30.0, cwd=workdir) as url:
        with httpx.Client(base_url=url, timeout=10.0) as client:
            yield PrometheusApi(client, log)


class PrometheusApi:
    """The few HTTP API calls the tests need; every call raises on an API error, naming the query."""

    def __init__(self, client: httpx.Client, log: Path) -> None:
        self.client = client
        self.log = log

    def _get(self, path: str, **params: Any) -> Any:
        r = self.client.get(path, params=params)
        body = r.json()
        if r.status_code != 200 or body.get("status") != "success":
            raise PromQLError(f"{body.get('errorType', r.status_code)}: {body.get('error', r.text)}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query", query=expr)
        return list(data["result"]) if data["resultType"] in ("vector", "matrix") else [data["result"]]

    def query_range(self, expr: str, seconds: float = 10.0) -> list[dict[str, Any]]:
        end = time.time()
        data = self._get("/api/v1/query_range", query=expr, start=end - seconds, end=end, step=1)
        return list(data["result"])

    def label_values(self, label: str, selector: str) -> list[str]:
        return list(self._get(f"/api/v1/label/{label}/values", **{"match[]": selector}))

    def wait_for(self, expr: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.query(expr):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no data for {expr} after {timeout_s:.0f} s:\n{self.log.read_text()[-3000:]}"
                )
            time.sleep(0.25)

    def rules(self) -> list[dict[str, Any]]:
        return [r for g in self._get("/api/v1/rules")["groups"] for r in g["rules"]]


class PromQLError(Exception):
    pass
