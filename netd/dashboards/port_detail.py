"""Host / port detail: one host's RDMA ports, chained instance → device → port → priority."""

from __future__ import annotations

from netd.dashboards.grafana import Dashboard, Panel, Row, Target, Variable
from netd.dashboards.port_errors import loss_row, state_row
from netd.dashboards.port_rows import (
    NETDEV,
    PORT,
    PORT_LEGEND,
    PRIO,
    PRIO_LEGEND,
    dcqcn_row,
    findings_row,
    rate_targets,
    score_row,
)
from netd.dashboards.promql import RATE, per_minute, rate

__all__ = ["port_detail"]


def _throughput() -> Row:
    rx, tx = rate("netd_rdma_rx_bytes_total", RATE, PORT), rate("netd_rdma_tx_bytes_total", RATE, PORT)
    speed = "on(instance, device, port) netd_port_speed_bytes"
    return Row(
        "Throughput",
        (
            Panel(
                "RDMA throughput per port (received and sent)",
                "RDMA payload per second (the PMA data counters, 4-byte words scaled to bytes). Bad: well "
                "below "
                "the link speed during a communication phase while pause time or CNPs below rise.",
                "bps",
                (
                    Target(f"8 * {rx}", legend=f"rx {PORT_LEGEND}"),
                    Target(f"8 * {tx}", legend=f"tx {PORT_LEGEND}"),
                ),
            ),
            Panel(
                "Link utilisation per port (share of link speed)",
                "Received and sent RDMA payload over the port's link speed. Bad: one port of a rail pair far "
                "below the other in an all-reduce; pinned at 100% with pause time rising (a congested "
                "receiver).",
                "percentunit",
                (
                    Target(f"{rx} / {speed}", legend=f"rx {PORT_LEGEND}"),
                    Target(f"{tx} / {speed}", legend=f"tx {PORT_LEGEND}"),
                ),
                max=1,
            ),
            Panel(
                "Traffic per priority and direction",
                "Bytes per second per 802.1p priority at the PHY (all traffic, not only RDMA). Bad: RoCE "
                "traffic "
                "on a priority without PFC (no pause counters below for it): it is lossy and will drop under "
                "load.",
                "bps",
                (
                    Target(
                        f"8 * {rate('netd_priority_bytes_total', RATE, NETDEV, PRIO)} > 0", legend=PRIO_LEGEND
                    ),
                ),
                width=24,
            ),
        ),
    )


def _congestion() -> Row:
    ecn = rate("netd_rdma_ecn_marked_packets_total", RATE, PORT)
    rx = rate("netd_rdma_rx_packets_total", RATE, PORT)
    cnps = (
        ("netd_rdma_cnp_sent_total", "sent"),
        ("netd_rdma_cnp_handled_total", "handled"),
        ("netd_rdma_cnp_ignored_total", "ignored"),
    )
    return Row(
        "Congestion: ECN and CNPs",
        (
            Panel(
                "ECN-marked RoCE packets received per port",
                "Packets that arrived CE-marked by a switch queue past its ECN threshold, per second. Marks "
                "are "
                "DCQCN's normal signal; bad: a steady high rate for minutes (a persistently congested path).",
                "pps",
                (Target(ecn, legend=PORT_LEGEND),),
            ),
            Panel(
                "Share of received RoCE packets ECN-marked per port",
                "ECN-marked over all received RoCE packets. Bad: above about 5% for long: the queues feeding "
                "this "
                "port sit above Kmin, adding latency to every message.",
                "percentunit",
                (Target(f"{ecn} / ({rx} > 0)", legend=PORT_LEGEND),),
                thresholds=((0.05, "red"),),
            ),
            Panel(
                "CNPs sent, handled and ignored per port",
                "Sent: CNPs this port returned as notification point for marked packets it received. "
                "Handled: CNPs "
                "it acted on as reaction point (its senders slowed down). Ignored should stay 0; bad: any "
                "ignored "
                "(DCQCN disabled on the priority RoCE uses), marks without CNPs sent.",
                "pps",
                rate_targets(cnps, suffix=PORT_LEGEND),
                width=24,
            ),
        ),
    )


def _pfc() -> Row:
    frames = rate("netd_pfc_pause_frames_total", RATE, NETDEV, PRIO)
    paused = rate("netd_pfc_pause_duration_seconds_total", RATE, NETDEV, PRIO)
    transitions = rate("netd_pfc_pause_transitions_total", RATE, NETDEV, PRIO)
    storms = per_minute("netd_pause_storm_events_total", RATE, NETDEV)
    return Row(
        "PFC",
        (
            Panel(
                "PFC pause frames per priority and direction",
                "rx: pause frames received (the switch told this port to stop sending); tx: sent (this NIC "
                "told "
                "its switch to stop). Bad: any sustained tx from a host NIC; rx rising with throughput "
                "falling.",
                "pps",
                (Target(frames, legend=PRIO_LEGEND),),
            ),
            Panel(
                "Share of time paused per priority and direction",
                "Seconds paused per second. Under load a few percent is normal. Bad: above 10% for minutes "
                "(congestion DCQCN does not absorb); above 50% (a PFC storm: alert NetdPfcStorm).",
                "percentunit",
                (Target(paused, legend=PRIO_LEGEND),),
                thresholds=((0.1, "orange"), (0.5, "red")),
                max=1,
            ),
            Panel(
                "PFC pause transitions (Xoff to Xon) per priority",
                "How often a pause episode ended. Many short episodes (transitions high, time paused low) "
                "are "
                "benign incast; bad: few transitions with much time paused (long stalls, a stuck receiver).",
                "short",
                (Target(transitions, legend=PRIO_LEGEND),),
            ),
            Panel(
                "NIC pause-storm watchdog events per minute",
                "The NIC's own pause-storm watermarks crossed, per minute. warning: pause sent past the "
                "minor "
                "watermark; error: past the critical one, and the NIC stopped pausing (its lossless "
                "priorities "
                "now drop). Bad: any error (alert NetdNicPauseStormWatchdog).",
                "short",
                (Target(storms, legend="{{netdev}} {{severity}}"),),
                thresholds=((0.001, "red"),),  # any event
            ),
            Panel(
                "Global (802.3x) pause: time paused per direction",
                "Link-level pause, which stops every priority at once. Bad: any on a port that runs PFC (the "
                "two must not be mixed: global pause turns one congested class into a stall of all of them).",
                "percentunit",
                (
                    Target(
                        rate("netd_pause_duration_seconds_total", RATE, NETDEV),
                        legend="{{netdev}} {{direction}}",
                        sparse="NICs count global pause only where it is enabled; RoCE fabrics use PFC",
                    ),
                ),
                thresholds=((0.001, "red"),),
                width=24,
            ),
        ),
    )


def port_detail() -> Dashboard:
    return Dashboard(
        uid="netd-port",
        title="netd / Host and port detail",
        description="Everything netd knows about one host's RDMA ports: throughput, ECN and CNPs, PFC per "
        "priority, loss and errors, port state, netd's congestion score and findings.",
        rows=(
            _throughput(),
            score_row(),
            _congestion(),
            _pfc(),
            loss_row(),
            state_row(),
            dcqcn_row(),
            findings_row(),
        ),
        variables=(
            Variable(
                "instance",
                "Instance",
                "label_values(netd_port_info, instance)",
                "The host's netd endpoint (Prometheus instance).",
                multi=False,
            ),
            Variable(
                "device",
                "RDMA device",
                'label_values(netd_port_info{instance="$instance"}, device)',
                "RDMA devices of this host.",
            ),
            Variable(
                "port",
                "Port",
                'label_values(netd_port_info{instance="$instance", device=~"$device"}, port)',
                "Ports of the chosen devices.",
            ),
            Variable(
                "netdev",
                "Netdev",
                'label_values(netd_port_info{instance="$instance", device=~"$device", '
                'port=~"$port"}, netdev)',
                "The chosen ports' netdevs (ethtool counters join on it).",
                hidden=True,
            ),
            Variable(
                "priority",
                "Priority",
                f"label_values(netd_priority_packets_total{{{NETDEV}}}, priority)",
                "802.1p priorities of the chosen ports' netdevs.",
            ),
        ),
    )
