"""The Prometheus names of netd's counters, in one table (docs/metrics.md).

Base units, ``_total`` for counters, and priority/direction as labels. A
vocabulary name that is not listed here is exported generically
(``netd_rdma_driver_stat_total{kind="<raw name>"}``) so nothing a driver offers
is lost, without one metric name per driver-specific file.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ERROR_VOCABULARY", "PMA_ERROR_KINDS", "RDMA_COUNTERS", "TICK_COUNTERS", "RdmaMetric"]


class RdmaMetric(NamedTuple):
    name: str  # without the `_total` suffix, which the exposition adds
    help: str
    kind: str | None = None  # value of the `kind` label when several vocabulary names share a metric


RDMA_COUNTERS: dict[str, RdmaMetric] = {
    "rx_bytes": RdmaMetric("netd_rdma_rx_bytes", "RDMA bytes received (PMA port_rcv_data x 4)."),
    "tx_bytes": RdmaMetric("netd_rdma_tx_bytes", "RDMA bytes transmitted (PMA port_xmit_data x 4)."),
    "rx_packets": RdmaMetric("netd_rdma_rx_packets", "RDMA packets received."),
    "tx_packets": RdmaMetric("netd_rdma_tx_packets", "RDMA packets transmitted."),
    "ecn_marked": RdmaMetric(
        "netd_rdma_ecn_marked_packets", "RoCEv2 packets received with ECN CE by the notification point."
    ),
    "cnp_sent": RdmaMetric(
        "netd_rdma_cnp_sent", "Congestion notification packets sent (notification point)."
    ),
    "cnp_handled": RdmaMetric(
        "netd_rdma_cnp_handled", "CNPs received and acted on by the reaction point (rate cuts)."
    ),
    "cnp_ignored": RdmaMetric(
        "netd_rdma_cnp_ignored", "CNPs received but ignored (DCQCN disabled on that priority); should be 0."
    ),
    "out_of_sequence": RdmaMetric(
        "netd_rdma_out_of_sequence", "Packets received with an unexpected PSN (loss or reordering)."
    ),
    "seq_err": RdmaMetric(
        "netd_rdma_packet_seq_errors", "NAK-sequence-error packets received by the requester."
    ),
    "implied_nak_seq_err": RdmaMetric(
        "netd_rdma_implied_nak_seq_errors", "Implied NAK sequence errors seen by the requester."
    ),
    "retransmits": RdmaMetric("netd_rdma_retransmits", "Transport retransmissions (adaptive or timeout)."),
    "timeouts": RdmaMetric(
        "netd_rdma_local_ack_timeouts", "Requester ACK timer expiries (timeout retransmits)."
    ),
    "rnr": RdmaMetric("netd_rdma_rnr_naks", "Receiver-not-ready NAKs received."),
    "out_of_buffer": RdmaMetric(
        "netd_rdma_out_of_buffer_drops", "Packets dropped because the receive queue had no posted WQE."
    ),
    "duplicate_request": RdmaMetric(
        "netd_rdma_duplicate_requests", "Duplicate (retransmitted) requests received."
    ),
    "icrc_errors": RdmaMetric("netd_rdma_icrc_errors", "RoCE packets received with ICRC errors."),
    "retries_exceeded": RdmaMetric(
        "netd_rdma_retries_exceeded", "QPs moved to error after exhausting transport or RNR retries."
    ),
    "req_cqe_error": RdmaMetric("netd_rdma_cqe_errors", "Completions in error.", "requester"),
    "resp_cqe_error": RdmaMetric("netd_rdma_cqe_errors", "Completions in error.", "responder"),
}

# IB PMA PortCounters error fields: one metric with a `kind` label.
PMA_ERROR_KINDS = frozenset(
    {
        "symbol_error",
        "link_error_recovery",
        "link_downed",
        "port_rcv_errors",
        "port_rcv_remote_physical_errors",
        "port_rcv_switch_relay_errors",
        "port_xmit_discards",
        "port_xmit_constraint_errors",
        "port_rcv_constraint_errors",
        "local_link_integrity_errors",
        "excessive_buffer_overrun_errors",
        "VL15_dropped",
    }
)

# Loss and error events that should be zero in a lossless fabric: a port's ``errors_per_s``
# (netd.series.port_signals) and the congestion score's loss component.
ERROR_VOCABULARY = (
    frozenset({"out_of_sequence", "seq_err", "implied_nak_seq_err", "rnr", "out_of_buffer"})
    | frozenset({"icrc_errors", "retries_exceeded"})
    | PMA_ERROR_KINDS
)

# The vocabulary names some per-tick consumer reads: the port signals and congestion components
# (netd.series.port_signals, netd.congestion.host), the detectors (loss, link, counter stalls, the CNP
# baseline, congestion spreading) and the NCCL hints built on them. Every other RDMA counter (unicast
# and multicast packet counts, completion and access errors, request counts, slow-restart counts and
# whatever a driver adds without a netd name) only feeds exported totals, so the RDMA source reads it at
# the slow cadence, ``[rdma] slow_interval`` (docs/metrics.md, Read cadence). A consumer that starts
# reading another name adds it here; tests/test_read_cadence.py checks the consumers it knows.
TICK_COUNTERS = (
    frozenset({"rx_bytes", "tx_bytes", "rx_packets", "tx_packets"})  # rates, stalls, spreading
    | frozenset({"ecn_marked", "cnp_sent", "cnp_handled", "cnp_ignored"})  # CE fraction, CNPs, baseline
    | frozenset({"retransmits", "timeouts"})  # retransmits per second, loss
    | ERROR_VOCABULARY
)
