"""Alerts about netd itself: down, stalled, sources, detectors, eBPF probes; and its critical findings.

They link the runbook's "netd down or its sources failing" section, except for netd's own critical
anomaly findings, which link the table of finding kinds.
"""

from __future__ import annotations

from netd.dashboards.promql import rate
from netd.dashboards.rules import Alert

__all__ = ["COUNT_VALUE", "RATE_VALUE", "detection_alerts", "netd_alerts", "tuner_alerts"]

# small per-second rates read better as "0.5" than as humanize's "500m"
RATE_VALUE = '{{ $value | printf "%.3g" }}'
# a count of events from increase(): whole events, though increase() extrapolates to the range's ends
# (a single event reads 1.04 when the scrapes do not line up with the range)
COUNT_VALUE = '{{ $value | printf "%.0f" }}'
HOST = "{{ $labels.instance }}"


def netd_alerts(job: str) -> tuple[Alert, ...]:
    host = HOST
    down = Alert(
        "NetdDown",
        signal=f'up{{job="{job}"}}',
        condition="== 0",
        for_="2m",
        severity="critical",
        runbook="netd-down-or-its-sources-failing",
        summary=f"netd down on {host}",
        description=f"Prometheus has failed to scrape netd at {host} for 2 minutes: this host's ports "
        "are invisible (no congestion, PFC or loss signals, and no alerts from them).",
    )
    stalled = Alert(
        "NetdStalled",
        signal="rate(netd_ticks_total[5m])",
        condition="== 0",
        for_="1m",
        severity="critical",
        runbook="netd-down-or-its-sources-failing",
        summary=f"netd on {host} answers but has stopped collecting",
        description=f"netd at {host} serves /metrics but has completed no tick in 5 minutes: every value "
        "it exports is frozen.",
    )
    source_down = Alert(
        "NetdSourceDown",
        signal="netd_source_up",
        condition="== 0",
        for_="5m",
        severity="warning",
        runbook="netd-down-or-its-sources-failing",
        summary=f"netd source {{{{ $labels.source }}}} failing on {host}",
        description=f"Every read of netd's {{{{ $labels.source }}}} source on {host} has failed for 5 "
        "minutes: the metrics it provides are missing from this host.",
    )
    source_errors = Alert(
        "NetdSourceErrors",
        signal=rate("netd_source_errors_total", "5m"),
        condition="> 0 unless on(instance, job, source) netd_source_up == 0",
        for_="15m",
        severity="warning",
        runbook="netd-down-or-its-sources-failing",
        summary=f"netd source {{{{ $labels.source }}}} on {host} fails intermittently",
        description=f"netd's {{{{ $labels.source }}}} source on {host} has failed reads for 15 minutes "
        f"({RATE_VALUE}/s) while other reads succeed: some of its counters are intermittently "
        "stale.",
    )
    emulated = Alert(
        "NetdEmulatedFabric",
        signal="netd_fabric_emulated",
        condition="== 1",
        for_="10m",
        severity="warning",
        runbook="netd-down-or-its-sources-failing",
        summary=f"netd on {host} serves an EMULATED fabric",
        description=f"netd at {host} found no RDMA device and serves its emulated fabric: every counter "
        "from this host is synthetic. Expected on a laptop or in CI; on a GPU host the RDMA driver is not "
        "loaded or netd cannot see /sys/class/infiniband.",
    )
    return down, stalled, source_down, source_errors, emulated


def detection_alerts() -> tuple[Alert, ...]:
    host = HOST
    scope = (
        "{{ with $labels.device }} {{ . }}/{{ $labels.port }}{{ end }}"
        "{{ with $labels.netdev }} ({{ . }}){{ end }}"
    )
    anomaly = Alert(
        "NetdAnomalyCritical",
        signal='netd_anomaly_active{severity="critical"}',
        condition="> 0",
        severity="critical",
        runbook="anomalies-netd-detects",
        sparse="only while netd has a critical finding",
        summary=f"netd detected {{{{ $labels.kind }}}} on {host}{scope}"
        "{{ with $labels.priority }} priority {{ . }}{{ end }}",
        description=f"netd's detectors report a critical {{{{ $labels.kind }}}} finding on {host}{scope}"
        "{{ with $labels.priority }}, priority {{ . }}{{ end }}. Its evidence and explanation are in "
        f"GET /v1/anomalies on {host} and in netd's log (event=anomaly_opened).",
    )
    detector_errors = Alert(
        "NetdDetectorErrors",
        signal=rate("netd_anomaly_detector_errors_total", "5m"),
        condition="> 0",
        for_="15m",
        severity="warning",
        runbook="netd-down-or-its-sources-failing",
        sparse="the family has series only after a detector raised",
        summary=f"netd detector {{{{ $labels.detector }}}} failing on {host}",
        description=f"netd's {{{{ $labels.detector }}}} detector on {host} has raised exceptions for 15 "
        "minutes "
        f"({RATE_VALUE}/s): its findings are stale, so anomalies of its kinds go unreported.",
    )
    probe_failed = Alert(
        "NetdBpfProbeFailed",
        signal='netd_bpf_probe_info{state="failed"}',
        condition="== 1",
        for_="5m",
        severity="warning",
        runbook="netd-down-or-its-sources-failing",
        sparse="only while a configured probe failed to load or attach",
        requires="bpf",
        summary=f"netd eBPF probe {{{{ $labels.probe }}}} failed on {host}",
        description=f"netd's {{{{ $labels.probe }}}} eBPF probe on {host} is configured but failed to load "
        "or "
        "attach{{ with $labels.attach }} ({{ . }}){{ end }}: the signals it provides are missing.",
    )
    map_full = Alert(
        "NetdBpfMapFull",
        signal="netd_bpf_map_entries / netd_bpf_map_capacity",
        condition="> 0.95",
        for_="10m",
        severity="warning",
        runbook="netd-down-or-its-sources-failing",
        requires="bpf",
        summary=f"netd eBPF map {{{{ $labels.map }}}} on {host} is {{{{ $value | humanizePercentage }}}} "
        "full",
        description=f"netd's eBPF map {{{{ $labels.map }}}} on {host} has been over 95% full for 10 minutes: "
        "new flows are evicted or not recorded, so GET /v1/flows is incomplete. Raise its size in the [bpf] "
        "configuration (flow_table_size, tcp_table_size).",
    )
    return anomaly, detector_errors, probe_failed, map_full


TUNER_ROLLBACKS = 'increase(netd_tuner_actions_total{action=~"rollback|rolled_back|crash_recovered"}[30m])'


def tuner_alerts() -> tuple[Alert, ...]:
    failed = Alert(
        "NetdTunerApplyFailed",
        signal='increase(netd_tuner_actions_total{action="apply_failed"}[15m])',
        condition="> 0",
        severity="warning",
        runbook="dcqcn-tuner",
        summary=f"DCQCN change failed on {HOST}",
        description=f"netd's applier failed to write or verify a DCQCN change set on {HOST} "
        f"({COUNT_VALUE} in 15 minutes). The journal rolls a partial change back; what failed is "
        f"in GET /v1/tuning (last_outcome) on {HOST} and in netd's log.",
    )
    rolled_back = Alert(
        "NetdTunerRolledBack",
        signal=f"sum without (action) ({TUNER_ROLLBACKS})",
        condition="> 0",
        severity="warning",
        runbook="dcqcn-tuner",
        summary=f"DCQCN tuning rolled back on {HOST}",
        description=f"netd's DCQCN tuner on {HOST} decided or performed a rollback "
        f"({COUNT_VALUE} in 30 minutes): a change made congestion worse, or a change set was "
        "interrupted by a crash. The parameters in force are on the port detail dashboard; the reasons in "
        f"GET /v1/tuning on {HOST}.",
    )
    return failed, rolled_back
