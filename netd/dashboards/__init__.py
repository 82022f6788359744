"""netd's Grafana dashboards and Prometheus rules, generated from Python and committed as files.

:func:`artifacts` returns every file `netd dashboards` writes (relative path → text): three
dashboards in Grafana's JSON model and two rule files. The repository's ``dashboards/`` directory
holds the committed output; a test keeps it identical to what this package generates.
"""

from __future__ import annotations

import json

from netd.dashboards.alerts import alert_groups
from netd.dashboards.fabric import fabric_overview
from netd.dashboards.grafana import Dashboard
from netd.dashboards.grafana_json import render
from netd.dashboards.health import netd_health
from netd.dashboards.port_detail import port_detail
from netd.dashboards.recording import RECORDING_GROUPS
from netd.dashboards.rules import render_rules

__all__ = [
    "ALERT_RULES_FILE",
    "DEFAULT_JOB",
    "DEFAULT_RUNBOOK",
    "RECORDING_RULES_FILE",
    "artifacts",
    "dashboards",
]

DEFAULT_JOB = "netd"
# Where runbook_url points: the runbook's path in this repository. Publish docs/runbook.md where your
# on-call can open it and regenerate with --runbook-url to make the links absolute.
DEFAULT_RUNBOOK = "docs/runbook.md"
RECORDING_RULES_FILE = "rules/netd-recording.rules.yml"
ALERT_RULES_FILE = "rules/netd-alerts.rules.yml"


def dashboards() -> dict[str, Dashboard]:
    """File name → dashboard."""
    return {
        "netd-fabric-overview.json": fabric_overview(),
        "netd-host-port-detail.json": port_detail(),
        "netd-health.json": netd_health(),
    }


def artifacts(runbook_base: str = DEFAULT_RUNBOOK, job: str = DEFAULT_JOB) -> dict[str, str]:
    out = {
        name: json.dumps(render(d), indent=2, ensure_ascii=False) + "\n" for name, d in dashboards().items()
    }
    out[RECORDING_RULES_FILE] = render_rules(RECORDING_GROUPS, runbook_base)
    out[ALERT_RULES_FILE] = render_rules(alert_groups(job), runbook_base)
    return out
