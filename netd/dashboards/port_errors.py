"""Port detail rows for what should stay at zero: loss and error counters, port state, saturation."""

from __future__ import annotations

from netd.dashboards.grafana import Panel, Row, Target
from netd.dashboards.port_rows import NETDEV, PORT, PORT_LEGEND, PRIO, PRIO_LEGEND, rate_targets
from netd.dashboards.promql import LOSS_COUNTERS, RATE, lossless, per_minute, rate

__all__ = ["loss_row", "state_row"]


def loss_row() -> Row:
    names = {
        "netd_rdma_out_of_sequence_total": "out of sequence",
        "netd_rdma_packet_seq_errors_total": "NAK seq errors",
        "netd_rdma_retransmits_total": "retransmits",
        "netd_rdma_local_ack_timeouts_total": "ACK timeouts",
    }
    transport = tuple((m, names[m]) for m in LOSS_COUNTERS) + (
        ("netd_rdma_implied_nak_seq_errors_total", "implied NAK seq errors"),
    )
    errors = (
        ("netd_rdma_rnr_naks_total", "RNR NAKs"),
        ("netd_rdma_out_of_buffer_drops_total", "out of buffer"),
        ("netd_rdma_retries_exceeded_total", "retries exceeded"),
        ("netd_rdma_icrc_errors_total", "ICRC"),
        ("netd_rdma_duplicate_requests_total", "duplicate requests"),
    )
    discards = lossless(rate("netd_priority_discards_total", RATE, NETDEV, PRIO))
    return Row(
        "Loss and errors",
        (
            Panel(
                "Retransmits and sequence errors per port",
                "RoCE transport events that follow packet loss. Bad: anything above 0 on a lossless fabric "
                "(alert NetdRoceLoss): check lossless-class discards and PHY errors next to it.",
                "pps",
                rate_targets(transport),
                thresholds=((0.001, "red"),),
            ),
            Panel(
                "Discards: lossless priorities and PHY",
                "Packets dropped on PFC priorities (must be 0: alert NetdLosslessClassDiscards) and at the "
                "PHY "
                "for lack of buffer. Bad: anything above 0.",
                "pps",
                (
                    Target(discards, legend="lossless " + PRIO_LEGEND),
                    Target(
                        rate("netd_phy_discards_total", RATE, NETDEV), legend="PHY {{netdev}} {{direction}}"
                    ),
                ),
                thresholds=((0.001, "red"),),
            ),
            Panel(
                "Receiver and completion errors per port",
                "RNR NAKs and out-of-buffer drops (the application did not post receive buffers in time), "
                "retries exceeded, ICRC errors and duplicate requests. Bad: a steady rate: a slow consumer "
                "or "
                "connections being torn down.",
                "pps",
                rate_targets(errors)
                + (
                    Target(
                        rate("netd_rdma_cqe_errors_total", RATE, PORT),
                        legend=f"CQE errors {{{{kind}}}} {PORT_LEGEND}",
                    ),
                ),
            ),
            Panel(
                "PHY and PMA error counters",
                "CRC and symbol errors at the PHY, and the IB PMA error counters by kind, per second. Bad: "
                "any "
                "sustained rate: a dirty or failing optic or cable (losses and flaps follow).",
                "pps",
                (
                    Target(rate("netd_phy_errors_total", RATE, NETDEV), legend="{{netdev}} {{kind}}"),
                    Target(
                        rate("netd_rdma_port_errors_total", RATE, PORT), legend=f"{{{{kind}}}} {PORT_LEGEND}"
                    ),
                ),
            ),
        ),
    )


def state_row() -> Row:
    # 0 for every port without a saturated counter, so "none" reads as 0 rather than "no data"
    sat = (
        f"count by (device, port) (netd_counter_saturated{{{PORT}}}) "
        f"or on(device, port) 0 * sum by (device, port) (netd_port_up{{{PORT}}})"
    )
    return Row(
        "Port state",
        (
            Panel(
                "RDMA port state per port",
                "ACTIVE or not, per port. Bad: not ACTIVE (no RDMA traffic at all); flipping "
                "(link flapping: alert NetdLinkFlapping).",
                "none",
                (Target(f"netd_port_up{{{PORT}}}", legend=PORT_LEGEND),),
                kind="state-timeline",
                mappings=(("1", "ACTIVE", "green"), ("0", "DOWN", "red")),
                thresholds=((0.5, "green"),),
                width=8,
            ),
            Panel(
                "Link down events per minute",
                "PHY link losses per minute (averaged over the rate interval). Bad: any during a job.",
                "short",
                (Target(per_minute("netd_link_down_events_total", RATE, NETDEV), legend="{{netdev}}"),),
                thresholds=((0.001, "red"),),  # any event
                width=8,
            ),
            Panel(
                "Saturated counters per port",
                "Counters stuck at their maximum (legacy PMA counters saturate "
                "instead of wrapping): their rate reads 0 while the fault continues. Bad: above 0 (alert "
                "NetdCounterSaturated; netd_counter_saturated names the counter).",
                "none",
                (Target(sat, legend=PORT_LEGEND),),
                thresholds=((1, "red"),),
                width=8,
            ),
        ),
    )
