"""Alerts about QoS configuration (docs/qos.md): drift across hosts, and contradictions inside one host.

Both link the runbook's "QoS drift" section. The drift alert is fleet-wide PromQL (a setting with more
than one value among all hosts' ``netd_qos_setting_info``); which hosts differ, from what, and the fix
are in ``netd qos --fabric`` (the audit can also take the majority per ToR, which PromQL cannot).
"""

from __future__ import annotations

from netd.dashboards.alerts_netd import HOST
from netd.dashboards.rules import Alert

__all__ = ["QOS_DISTINCT_VALUES", "qos_alerts"]

# how many different values each QoS setting has across every host netd reports
QOS_DISTINCT_VALUES = "count by (setting) (count by (setting, value) (netd_qos_setting_info))"


def qos_alerts() -> tuple[Alert, ...]:
    drift = Alert(
        "NetdQosDrift",
        signal=QOS_DISTINCT_VALUES,
        condition="> 1",
        for_="30m",
        severity="warning",
        runbook="qos-drift",
        summary="QoS setting {{ $labels.setting }} differs across hosts ({{ $value }} values)",
        description="RoCE hosts disagree on {{ $labels.setting }}: {{ $value }} different values for 30 "
        "minutes. One misconfigured host (PCP trust, PFC on another priority, ECN or DCQCN off) looks like "
        "congestion; `netd qos --fabric` names the hosts, each difference and the command that fixes it.",
    )
    local = Alert(
        "NetdQosInconsistent",
        signal="netd_qos_local_findings",
        condition="> 0",
        for_="15m",
        severity="warning",
        runbook="qos-drift",
        summary=f"QoS contradiction on {HOST}: {{{{ $labels.kind }}}}",
        description=f"{HOST} has {{{{ $value }}}} QoS contradiction(s) of kind {{{{ $labels.kind }}}} for 15 "
        f"minutes (PFC on a priority without ECN/DCQCN, RoCE traffic on a priority without PFC, or an MTU "
        f"larger than the maximum frame size its LLDP neighbour reports). "
        f"`netd qos` on {HOST} shows each with its fix.",
    )
    return drift, local
