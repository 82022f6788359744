"""Session fixtures: one netd on the emulated fabric and one Prometheus scraping it, for the live tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from netd.dashboards import ALERT_RULES_FILE, RECORDING_RULES_FILE
from tests.dashboards.live import PrometheusApi, bpf_available, prometheus_binary, run_netd, run_prometheus

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "dashboards"


@dataclass(frozen=True)
class LiveNetd:
    url: str
    bpf: bool  # the eBPF probes are loaded (root with bcc), so netd_bpf_* metrics exist


@pytest.fixture(scope="session")
def live_netd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveNetd]:
    """A running `netd run` on the emulated fabric (interval 0.5 s), with eBPF probes where possible."""
    bpf = bpf_available()
    with run_netd(tmp_path_factory.mktemp("dash-netd"), bpf) as url:
        yield LiveNetd(url, bpf)


@pytest.fixture(scope="session")
def live_scrape(live_netd: LiveNetd) -> str:
    return httpx.get(live_netd.url + "/metrics", timeout=5).text


@pytest.fixture(scope="session")
def live_prometheus(live_netd: LiveNetd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusApi]:
    """Prometheus scraping the live netd every second with the committed rule files loaded."""
    if prometheus_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed: .ci/setup-host should have installed it")
        pytest.skip("prometheus is not installed (make setup installs Debian's package)")
    rules = [COMMITTED / RECORDING_RULES_FILE, COMMITTED / ALERT_RULES_FILE]
    target = live_netd.url.removeprefix("http://")
    with run_prometheus(tmp_path_factory.mktemp("dash-prom"), target, rules) as api:
        api.wait_for('rate(netd_ticks_total{job="netd"}[4s])')  # two scrapes: rates exist
        yield api
