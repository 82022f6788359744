"""Alerting rules: what pages an engineer during a fabric incident, and what each alert says.

Every alert names the port (host, device/port, netdev, ToR when known) and the priority where one
applies, and links the section of docs/runbook.md that says what to check and what to do. Where
the alert's own labels cannot name a port (a ToR or the whole fabric), the description asks
Prometheus for the worst port at the time the alert fires.

Thresholds are set against a healthy busy fabric: under DCQCN a loaded port is paused a few
percent of the time at most and sees no transport loss; the promtool tests hold every alert
silent on such a fabric.
"""

from __future__ import annotations

from netd.dashboards.alerts_netd import COUNT_VALUE, RATE_VALUE, detection_alerts, netd_alerts, tuner_alerts
from netd.dashboards.alerts_qos import qos_alerts
from netd.dashboards.promql import increase, lossless, on_netdev, on_port, rate
from netd.dashboards.recording import WINDOW, port_record
from netd.dashboards.rules import Alert, Group

__all__ = ["ALERT_GROUPS", "alert_groups", "alerts"]

PORT = "{{ $labels.host }} {{ $labels.device }}/{{ $labels.port }}"
WHERE = (
    "{{ $labels.netdev }} ({{ $labels.device }} port {{ $labels.port }} on {{ $labels.host }}"
    "{{ with $labels.tor }}, ToR {{ . }}{{ end }})"
)
PAUSE = port_record("netd_pfc_pause_fraction")
TOR_PAUSE = f"tor:netd_pfc_pause_fraction:avg{WINDOW}"
MINUTES = int(WINDOW.removesuffix("m"))  # the recording window, for the descriptions
SPREAD_THRESHOLD = 0.05
STORM_ERRORS = increase("netd_pause_storm_events_total", "5m", 'severity="error"')


def _worst_port(selector: str, args: str) -> str:
    """Template text naming the most-paused port matching ``selector`` (a printf format).

    Formats are Go raw strings (backquotes), so the PromQL inside keeps its ordinary double quotes.
    """
    q = f"printf `topk(1, {PAUSE}{{{selector}}})` {args}"
    return (
        f"{{{{ with query ({q}) }}}}{{{{ with first . }}}}{{{{ .Labels.host }}}} {{{{ .Labels.device }}}}/"
        "{{ .Labels.port }} ({{ .Labels.netdev }}, paused {{ .Value | humanizePercentage }})"
        "{{ end }}{{ else }}none reporting{{ end }}"
    )


PFC_PRIORITIES = (
    '{{ range $i, $s := query (printf `netd_pfc_pause_frames_total{instance="%s",netdev="%s",'
    'direction="rx"}` $labels.instance $labels.netdev) | sortByLabel "priority" }}'
    "{{ if $i }}, {{ end }}{{ $s.Labels.priority }}{{ else }}none{{ end }}"
)


def _pfc() -> tuple[Alert, ...]:
    storm = Alert(
        "NetdPfcStorm",
        signal=PAUSE,
        condition="> 0.5",
        for_="2m",
        severity="critical",
        runbook="pfc-storm",
        summary=f"PFC storm: {PORT} priority {{{{ $labels.priority }}}} "
        '{{ if eq $labels.direction "tx" }}pausing its switch{{ else }}paused by its switch{{ end }} '
        "{{ $value | humanizePercentage }} of the time",
        description=f"{WHERE} has been "
        '{{ if eq $labels.direction "tx" }}sending PFC pause on priority {{ $labels.priority }}: '
        "the NIC cannot drain what it receives and holds back every sender behind its switch port"
        "{{ else }}held by PFC pause on priority {{ $labels.priority }}: the switch keeps this port from "
        "sending because a queue downstream does not drain{{ end }}, "
        f"{{{{ $value | humanizePercentage }}}} of the last {MINUTES} minutes, for over 2 minutes. "
        "A loaded port under DCQCN stays below a few percent.",
    )
    watchdog = Alert(
        "NetdNicPauseStormWatchdog",
        # the metric's own severity label ("error") would clash with the alert's
        signal=on_netdev(f"sum without (severity) ({STORM_ERRORS})"),
        condition="> 0",
        severity="critical",
        runbook="pfc-storm",
        summary=f"PFC storm: the NIC's pause-storm watchdog fired on {PORT}",
        description=f"{WHERE} reached the NIC's critical pause-storm watermark "
        f"{COUNT_VALUE} times in 5 minutes: it was sending PFC pause for so long that it stopped "
        f"pausing, so its lossless priorities ({PFC_PRIORITIES}) now drop packets.",
    )
    return storm, watchdog


def _congestion() -> tuple[Alert, ...]:
    tor = Alert(
        "NetdTorCongestionSustained",
        signal=f'{TOR_PAUSE}{{direction="rx"}}',
        condition="> 0.1",
        for_="10m",
        severity="warning",
        runbook="sustained-congestion-on-a-tor",
        summary="Sustained congestion on ToR {{ $labels.tor }}: host ports paused "
        "{{ $value | humanizePercentage }} of the time on priority {{ $labels.priority }}",
        description="Averaged over the host ports of ToR {{ $labels.tor }}, PFC pause on priority "
        "{{ $labels.priority }} has held senders {{ $value | humanizePercentage }} of the time for over "
        "10 minutes: DCQCN is not keeping this ToR's queues below the PFC threshold. Most-paused port: "
        + _worst_port('tor="%s",priority="%s",direction="rx"', "$labels.tor $labels.priority")
        + ".",
    )
    tors = (
        f'{{{{ range $i, $s := query (printf `{TOR_PAUSE}{{priority="%s",direction="rx"}} > '
        f'{SPREAD_THRESHOLD}` $labels.priority) | sortByLabel "tor" }}}}{{{{ if $i }}}}, {{{{ end }}}}'
        "{{ $s.Labels.tor }} ({{ $s.Value | humanizePercentage }}){{ end }}"
    )
    spreading = Alert(
        "NetdCongestionSpreading",
        signal=f'count by (priority) ({TOR_PAUSE}{{direction="rx"}} > {SPREAD_THRESHOLD})',
        condition=">= 2",
        for_="5m",
        severity="critical",
        runbook="congestion-spreading",
        sparse="counts congested ToRs: empty while no ToR is paused more than 5% of the time",
        summary="Congestion spreading: {{ $value }} ToRs paused on priority {{ $labels.priority }}",
        description="{{ $value }} ToRs have had their host ports paused more than "
        f"{SPREAD_THRESHOLD:.0%} of the time on priority {{{{ $labels.priority }}}} for 5 minutes: "
        f"{tors}. PFC back-pressure is spreading through the spine (or one job's traffic overloads "
        "the whole fabric). Most-paused port: "
        + _worst_port('priority="%s",direction="rx"', "$labels.priority")
        + ".",
    )
    return tor, spreading


def _loss() -> tuple[Alert, ...]:
    discards = Alert(
        "NetdLosslessClassDiscards",
        signal=on_netdev(lossless(rate("netd_priority_discards_total", "5m"))),
        condition="> 0",
        for_="2m",
        severity="critical",
        runbook="loss-in-the-lossless-class",
        summary=f"Loss in the lossless class: {PORT} drops priority {{{{ $labels.priority }}}} packets",
        description=f"{WHERE} has discarded {RATE_VALUE} packets/s on PFC priority "
        "{{ $labels.priority }} over the last 5 minutes. A lossless priority must never drop: PFC is "
        "missing on this priority at one end of the link, or the NIC's buffer headroom is too small.",
    )
    transport = Alert(
        "NetdRoceLoss",
        signal=port_record("netd_rdma_loss_events"),
        condition="> 0",
        for_="5m",
        severity="warning",
        runbook="loss-in-the-lossless-class",
        summary=f"Loss in the lossless class: {PORT} sees RoCE packet loss ({RATE_VALUE} events/s)",
        description=f"{WHERE} has counted out-of-sequence packets, NAK sequence errors, "
        f"retransmissions or ACK timeouts for 5 minutes ({RATE_VALUE}/s). RoCE on its lossless "
        f"priorities ({PFC_PRIORITIES}) should see none: packets are lost between this port and its peers.",
    )
    ignored = Alert(
        "NetdCnpIgnored",
        signal=on_port(rate("netd_rdma_cnp_ignored_total", "5m")),
        condition="> 0",
        for_="10m",
        severity="warning",
        runbook="cnps-ignored",
        summary=f"DCQCN not reacting: {PORT} ignores {RATE_VALUE} CNPs/s",
        description=f"{WHERE} receives congestion notifications it does not act on "
        f"({RATE_VALUE}/s for 10 minutes): DCQCN's reaction point is disabled on the priority "
        f"its RoCE traffic uses (PFC priorities here: {PFC_PRIORITIES}), so its senders never slow down.",
    )
    return discards, transport, ignored


def _links() -> tuple[Alert, ...]:
    # two counters of the same event: the PHY's link_down_events (ethtool) and the PMA's link_downed
    phy = on_netdev(increase("netd_link_down_events_total", "15m"))
    pma = on_port(increase("netd_rdma_port_errors_total", "15m", 'kind="link_downed"'))
    flaps = f"max by (instance, host, device, port, netdev, tor, spine, rail) ({phy} or {pma})"
    flapping = Alert(
        "NetdLinkFlapping",
        signal=flaps,
        condition=">= 3",
        severity="warning",
        runbook="link-flapping",
        summary=f"Link flapping: {PORT} went down {COUNT_VALUE} times in 15 minutes",
        description=f"{WHERE} has lost its link {COUNT_VALUE} times in 15 minutes. Every "
        "flap stalls all RDMA connections on the port, on every priority: queue pairs retry, then time "
        "out, and the job's collectives stall with them.",
    )
    down = Alert(
        "NetdPortDown",
        signal=on_port("netd_port_up"),
        condition="== 0",
        for_="5m",
        severity="warning",
        runbook="link-flapping",
        summary=f"Port down: {PORT}",
        description=f"{WHERE} has not been ACTIVE for 5 minutes: no RDMA traffic on any priority.",
    )
    saturated = Alert(
        "NetdCounterSaturated",
        signal=on_port("netd_counter_saturated"),
        condition="== 1",
        for_="15m",
        severity="warning",
        runbook="saturated-counters",
        sparse="only present while a counter is stuck at its maximum",
        summary=f"Saturated counter: {PORT} {{{{ $labels.kind }}}} is stuck at its maximum",
        description=f"{WHERE}: counter {{{{ $labels.kind }}}} has been stuck at its width's maximum for "
        "15 minutes, so its rate reads 0 while the fault it counts may still be happening.",
    )
    return flapping, down, saturated


def alerts(job: str = "netd") -> tuple[Alert, ...]:
    return (
        *_pfc(),
        *_congestion(),
        *_loss(),
        *_links(),
        *netd_alerts(job),
        *detection_alerts(),
        *tuner_alerts(),
        *qos_alerts(),
    )


def alert_groups(job: str = "netd") -> tuple[Group, ...]:
    return (Group("netd-alerts", alerts(job)),)


ALERT_GROUPS = alert_groups()
