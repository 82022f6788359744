"""PromQL for netd's signals, written once and shared by the dashboards and the rules.

Every function takes the range ``window`` (``$__rate_interval`` in a panel, ``1m`` in a recording
rule) and optional extra label matchers, so a panel and the rule that aggregates the same signal
cannot drift apart.

Joins: RDMA counters are keyed by ``device, port``, ethtool counters by ``netdev``; the one info
metric ``netd_port_info{device, port, netdev, host, tor, spine, rail, ...}`` joins both to a host
name and a place in the topology. Topology labels an exporter does not set are simply absent from
the result (``group_left`` copies only what exists), so these expressions work before and after
netd learns its ToR, spine and rail.
"""

from __future__ import annotations

__all__ = [
    "LEVELS",
    "LOSS_COUNTERS",
    "RATE",
    "TOPOLOGY",
    "increase",
    "lossless",
    "matchers",
    "on_netdev",
    "on_port",
    "per_minute",
    "port_loss_events",
    "rate",
]

RATE = "$__rate_interval"
TOPOLOGY = ("tor", "spine", "rail")
LEVELS = TOPOLOGY  # the aggregation levels of the recording rules
# RoCE transport counters that only move when packets were lost (out-of-order arrival, NAK sequence
# errors, adaptive retransmissions, ACK timeouts). On a lossless class all of them should stay flat.
LOSS_COUNTERS = (
    "netd_rdma_out_of_sequence_total",
    "netd_rdma_packet_seq_errors_total",
    "netd_rdma_retransmits_total",
    "netd_rdma_local_ack_timeouts_total",
)
PORT_KEYS = "job, instance, device, port"  # job too: two jobs may scrape one host (federation, migration)
NETDEV_KEYS = "job, instance, netdev"


def matchers(*parts: str) -> str:
    """``{a="b", c=~"d"}`` from non-empty matcher strings; empty when there are none."""
    inner = ", ".join(p for p in parts if p)
    return "{" + inner + "}" if inner else ""


def rate(metric: str, window: str, *sel: str) -> str:
    return f"rate({metric}{matchers(*sel)}[{window}])"


def increase(metric: str, window: str, *sel: str) -> str:
    return f"increase({metric}{matchers(*sel)}[{window}])"


def per_minute(metric: str, window: str, *sel: str) -> str:
    """Events per minute, averaged over ``window``: what a panel of rare events (link flaps, tuner
    actions) shows. Not ``increase(...[$__rate_interval])`` per point: consecutive points' ranges
    overlap, so one event would be counted at several points and a sum over the graph over-counts.
    """
    return f"60 * {rate(metric, window, *sel)}"


def on_port(expr: str, labels: tuple[str, ...] = ("host", "netdev", *TOPOLOGY)) -> str:
    """A per-(device, port) expression with netd_port_info's ``labels`` attached."""
    return f"({expr}) * on({PORT_KEYS}) group_left({', '.join(labels)}) netd_port_info"


def on_netdev(expr: str, labels: tuple[str, ...] = ("host", "device", "port", *TOPOLOGY)) -> str:
    """A per-netdev expression with netd_port_info's ``labels`` attached (ports with a netdev only)."""
    return f'({expr}) * on({NETDEV_KEYS}) group_left({", ".join(labels)}) netd_port_info{{netdev!=""}}'


def lossless(expr: str) -> str:
    """Keep only priorities with PFC counters: the lossless class (mlx5 lists PFC-enabled priorities only)."""
    return f'({expr}) and on({NETDEV_KEYS}, priority) netd_pfc_pause_frames_total{{direction="rx"}}'


def port_loss_events(window: str, *sel: str) -> str:
    """Loss indications per second per port, summed over the :data:`LOSS_COUNTERS` the NIC has.

    Each rate gets a distinct ``counter`` label before the ``or``: rate() drops the metric name, and
    without it the ``or`` would keep only the first counter of each port (and a ``__name__=~`` selector
    fails outright on Prometheus 2: "vector cannot contain metrics with the same labelset").
    """
    parts = []
    for m in LOSS_COUNTERS:
        counter = m.removeprefix("netd_rdma_").removesuffix("_total")
        parts.append(f'label_replace({rate(m, window, *sel)}, "counter", "{counter}", "", "")')
    return f"sum by ({PORT_KEYS}) ({' or '.join(parts)})"
