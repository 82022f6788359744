"""The raw counter names each RDMA driver exposes in sysfs, and what they mean.

Data only; :mod:`netd.sources.counter_specs` turns these tables into
:class:`~netd.sources.counter_specs.CounterSpec` values. Names and their order
are the ones the kernel prints (sources cited per table), so the same tables
build realistic fake trees (:mod:`netd.emulated.sysfs_tree`).

A table lists every file of one counter group (``names``), the files that
mean something netd knows (``vocab``: raw name -> netd vocabulary name), the
register width most files have (``width``) and the exceptions (``widths``).
A raw name absent from ``vocab`` keeps its raw name as vocabulary name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

__all__ = [
    "BNXT_RE_NEW",
    "BNXT_RE_OLD",
    "IRDMA_GEN2",
    "IRDMA_GEN3",
    "MLX5",
    "PMA_EXT",
    "PMA_LEGACY",
    "RXE",
    "CounterTable",
]

_V = TypeVar("_V")


@dataclass(frozen=True)
class CounterTable:
    """Every counter file of one driver generation, in the driver's order."""

    names: tuple[str, ...]
    vocab: Mapping[str, str]
    width: int = 64
    widths: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def width_of(self, raw_name: str) -> int:
        return self.widths.get(raw_name, self.width)


def _ro(d: dict[str, _V]) -> Mapping[str, _V]:
    return MappingProxyType(d)


def _words(text: str) -> tuple[str, ...]:
    """File names without spaces, written as a block of text (keeps long tables readable)."""
    return tuple(text.split())


# --- IB PMA PortCounters: ports/<p>/counters (drivers/infiniband/core/sysfs.c) ------------------
# The twelve error counters have the IB PortCounters widths; all PMA counters below 64 bits
# saturate at all-ones (IBA PortCounters semantics), which the vocabulary module encodes.
_PMA_ERRORS: dict[str, int] = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
}
_PMA_DATA = _words("port_xmit_data port_rcv_data port_xmit_packets port_xmit_wait port_rcv_packets")
_PMA_EXT_ONLY = _words(
    "unicast_rcv_packets unicast_xmit_packets multicast_rcv_packets multicast_xmit_packets"
)
_PMA_VOCAB = _ro(
    {
        # port_{xmit,rcv}_data count 4-byte words (scale 4, set in vocabulary.py); on mlx5 RoCE
        # they are the vport RDMA octets >> 2, i.e. RDMA traffic only (mlx5/mad.c).
        "port_xmit_data": "tx_bytes",
        "port_rcv_data": "rx_bytes",
        "port_xmit_packets": "tx_packets",
        "port_rcv_packets": "rx_packets",
    }
)

# With the extended-width capability (mlx5) the kernel uses pma_attrs_ext: 64-bit data counters
# from PortCountersExtended, plus unicast/multicast packets; port_xmit_wait stays 32-bit.
PMA_EXT = CounterTable(
    names=(*_PMA_ERRORS, *_PMA_DATA, *_PMA_EXT_ONLY),
    vocab=_PMA_VOCAB,
    widths=_ro({**_PMA_ERRORS, "port_xmit_wait": 32}),
)
# Without it (pma_attrs): the legacy 32-bit PortCounters data/packet counters, which saturate
# after 2**32 * 4 bytes (~0.34 s at 400 Gb/s), and no unicast/multicast files.
PMA_LEGACY = CounterTable(
    names=(*_PMA_ERRORS, *_PMA_DATA),
    vocab=_PMA_VOCAB,
    widths=_ro({**_PMA_ERRORS, **dict.fromkeys(_PMA_DATA, 32)}),
)

# --- mlx5: ports/<p>/hw_counters (drivers/infiniband/hw/mlx5/counters.c) ------------------------
# Q-counters are 32-bit in hardware (be32 read into u64) and wrap mod 2**32; the congestion
# counters (QUERY_CONG_STATISTICS) and the PPCNT ICRC counter are 64-bit.
MLX5 = CounterTable(
    names=_words(
        """
        duplicate_request implied_nak_seq_err local_ack_timeout_err np_cnp_sent
        np_ecn_marked_roce_packets out_of_buffer out_of_sequence packet_seq_err
        req_cqe_error req_cqe_flush_error req_remote_access_errors req_remote_invalid_request
        req_rnr_retries_exceeded req_transport_retries_exceeded resp_cqe_error
        resp_cqe_flush_error resp_local_length_error resp_remote_access_errors
        rnr_nak_retry_err roce_adp_retrans roce_adp_retrans_to roce_slow_restart
        roce_slow_restart_cnps roce_slow_restart_trans rp_cnp_handled rp_cnp_ignored
        rx_atomic_requests rx_dct_connect rx_icrc_encapsulated rx_read_requests
        rx_write_requests
        """
    ),
    vocab=_ro(
        {
            "np_ecn_marked_roce_packets": "ecn_marked",
            "np_cnp_sent": "cnp_sent",
            "rp_cnp_handled": "cnp_handled",
            "rp_cnp_ignored": "cnp_ignored",
            "out_of_sequence": "out_of_sequence",
            "packet_seq_err": "seq_err",
            "implied_nak_seq_err": "implied_nak_seq_err",
            "roce_adp_retrans": "retransmits",
            "local_ack_timeout_err": "timeouts",
            "rnr_nak_retry_err": "rnr",
            "out_of_buffer": "out_of_buffer",
            "duplicate_request": "duplicate_request",
            "rx_icrc_encapsulated": "icrc_errors",
            "req_transport_retries_exceeded": "retries_exceeded",
            "req_cqe_error": "req_cqe_error",
            "resp_cqe_error": "resp_cqe_error",
        }
    ),
    width=32,
    widths=_ro(
        dict.fromkeys(
            _words(
                "np_cnp_sent np_ecn_marked_roce_packets rp_cnp_handled rp_cnp_ignored rx_icrc_encapsulated"
            ),
            64,
        )
    ),
)

# --- bnxt_re: ports/<p>/hw_counters (drivers/infiniband/hw/bnxt_re/hw_counters.c), all 64-bit ---
_BNXT_OLD_NAMES = _words(
    """
    active_pds active_ahs active_qps active_rc_qps active_ud_qps active_srqs active_cqs active_mrs
    active_mws watermark_pds watermark_ahs watermark_qps watermark_rc_qps watermark_ud_qps
    watermark_srqs watermark_cqs watermark_mrs watermark_mws resize_cq_cnt rx_pkts rx_bytes tx_pkts
    tx_bytes recoverable_errors tx_roce_errors tx_roce_discards rx_roce_errors rx_roce_discards
    to_retransmits seq_err_naks_rcvd max_retry_exceeded rnr_naks_rcvd missing_resp unrecoverable_err
    bad_resp_err local_qp_op_err local_protection_err mem_mgmt_op_err remote_invalid_req_err
    remote_access_err remote_op_err dup_req res_exceed_max res_length_mismatch res_exceeds_wqe
    res_opcode_err res_rx_invalid_rkey res_rx_domain_err res_rx_no_perm res_rx_range_err
    res_tx_invalid_rkey res_tx_domain_err res_tx_no_perm res_tx_range_err res_irrq_oflow
    res_unsup_opcode res_unaligned_atomic res_rem_inv_err res_mem_err res_srq_err res_cmp_err
    res_invalid_dup_rkey res_wqe_format_err res_cq_load_err res_srq_load_err res_tx_pci_err
    res_rx_pci_err oos_drop_count tx_atomic_req tx_read_req tx_read_resp tx_write_req tx_send_req
    tx_roce_only_pkts tx_roce_only_bytes rx_atomic_req rx_read_req rx_read_resp rx_write_req
    rx_send_req rx_roce_only_pkts rx_roce_only_bytes rx_roce_good_pkts rx_roce_good_bytes
    rx_out_of_buffer tx_cnp_pkts rx_cnp_pkts rx_ecn_marked_pkts pacing_reschedule pacing_complete
    pacing_alerts db_fifo_register
    """
)
# rdma-next 2025 ("RDMA/bnxt_re: RoCE related hardware counters update") renamed these to the
# mlx5 names "for compatibility with open-source monitoring agents" and appended three counters.
# The rename shows what the old names meant: to_retransmits is the ACK-timeout retransmit count.
_BNXT_RENAMES = {
    "to_retransmits": "local_ack_timeout_err",
    "seq_err_naks_rcvd": "packet_seq_err",
    "rnr_naks_rcvd": "rnr_nak_retry_err",
    "missing_resp": "implied_nak_seq_err",
    "remote_invalid_req_err": "req_remote_invalid_request",
    "remote_access_err": "req_remote_access_errors",
    "dup_req": "duplicate_request",
    "res_length_mismatch": "resp_local_length_error",
    "oos_drop_count": "out_of_sequence",
    "rx_atomic_req": "rx_atomic_requests",
    "rx_read_req": "rx_read_requests",
    "rx_write_req": "rx_write_requests",
    "rx_out_of_buffer": "out_of_buffer",
    "tx_cnp_pkts": "np_cnp_pkts",
    "rx_cnp_pkts": "rp_cnp_handled",
    "rx_ecn_marked_pkts": "np_ecn_marked_roce_packets",
}
_BNXT_VOCAB_OLD = {
    "rx_pkts": "rx_packets",
    "tx_pkts": "tx_packets",
    "rx_bytes": "rx_bytes",
    "tx_bytes": "tx_bytes",
    "to_retransmits": "timeouts",
    "seq_err_naks_rcvd": "seq_err",
    "max_retry_exceeded": "retries_exceeded",
    "rnr_naks_rcvd": "rnr",
    "missing_resp": "implied_nak_seq_err",
    "dup_req": "duplicate_request",
    "oos_drop_count": "out_of_sequence",
    "rx_out_of_buffer": "out_of_buffer",
    "tx_cnp_pkts": "cnp_sent",
    "rx_cnp_pkts": "cnp_handled",
    "rx_ecn_marked_pkts": "ecn_marked",
}
# A renamed counter keeps one name across kernel generations: the new (mlx5) name when netd
# has no shared meaning for it (rx_read_req -> "rx_read_requests").
BNXT_RE_OLD = CounterTable(names=_BNXT_OLD_NAMES, vocab=_ro({**_BNXT_RENAMES, **_BNXT_VOCAB_OLD}))
BNXT_RE_NEW = CounterTable(
    names=(
        *(_BNXT_RENAMES.get(n, n) for n in _BNXT_OLD_NAMES),
        "req_cqe_error",
        "resp_cqe_error",
        "resp_remote_access_errors",
    ),
    vocab=_ro(
        {
            **{_BNXT_RENAMES.get(raw, raw): name for raw, name in BNXT_RE_OLD.vocab.items()},
            "req_cqe_error": "req_cqe_error",
            "resp_cqe_error": "resp_cqe_error",
        }
    ),
)

# --- irdma (Intel E810/E2000): ports/<p>/hw_counters (drivers/infiniband/hw/irdma/verbs.c) -------
# No counters/ (no PMA). The hardware keeps some counters in 32 bits, but irdma_update_stats()
# accumulates every delta (with roll-over) into a u64, so every file is a 64-bit counter.
_IRDMA_IP = tuple(
    f"ip{v}{name}"
    for v in (4, 6)
    for name in _words(
        """
        InDiscards InTruncatedPkts OutNoRoutes InOctets InPkts InReasmRqd InMcastOctets InMcastPkts
        OutOctets OutPkts OutSegRqd OutMcastOctets OutMcastPkts
        """
    )
)
_IRDMA_VERBS = _words(
    "InRdmaReads InRdmaSends InRdmaWrites OutRdmaReads OutRdmaSends OutRdmaWrites RdmaBnd RdmaInv"
)
_IRDMA_TCP = _words("RetransSegs InOptErrors InProtoErrors InSegs OutSegs")
_IRDMA_GEN2_COMMON = _words("rxVlanErrors cnpHandled cnpIgnored cnpSent RxUDP TxUDP RxECNMrkd")
_IRDMA_VOCAB = {
    "cnpHandled": "cnp_handled",
    "cnpIgnored": "cnp_ignored",
    "cnpSent": "cnp_sent",
    "RxECNMrkd": "ecn_marked",
    # In RoCEv2 mode every packet the RDMA engine moves is UDP; bytes are split ip4/ip6 and stay raw.
    "RxUDP": "rx_packets",
    "TxUDP": "tx_packets",
    # gen3 (E2000) names contain spaces: the file names do too.
    "RNR received": "rnr",
    "Nak Sequence Error": "seq_err",
    "Nak Sequence Error Implied": "implied_nak_seq_err",
    "RTO": "timeouts",
    "Rcvd Out of order packets": "out_of_sequence",
    "CRC errors": "icrc_errors",
}
# Kernels before the gen3 series prefixed the verbs counters with "iw" and TCP ones with "tcp".
IRDMA_GEN2 = CounterTable(
    names=(
        *_IRDMA_IP,
        *(f"iw{n}" for n in _IRDMA_VERBS),
        *(f"tcp{n}" for n in _IRDMA_TCP),
        *_IRDMA_GEN2_COMMON,
    ),
    vocab=_ro(_IRDMA_VOCAB),
)
IRDMA_GEN3 = CounterTable(
    names=(
        *_IRDMA_IP,
        *_IRDMA_VERBS,
        *_IRDMA_TCP,
        *_IRDMA_GEN2_COMMON,
        # gen3: names with spaces, so one per line
        "RNR sent",
        "RNR received",
        "ord limit count",
        "ird limit count",
        "Rx atomics",
        "Tx atomics",
        "Nak Sequence Error",
        "Nak Sequence Error Implied",
        "RTO",
        "Rcvd Out of order packets",
        "CRC errors",
    ),
    vocab=_ro(_IRDMA_VOCAB),
)

# --- rxe / soft-RoCE: ports/1/hw_counters (drivers/infiniband/sw/rxe/rxe_hw_counters.c) ---------
# 64-bit atomics. No ECN/CNP counters: rxe does not implement DCQCN. No counters/ either.
RXE = CounterTable(
    names=_words(
        """
        sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_rnr_err send_rnr_err rcvd_seq_err
        ack_deferred retry_exceeded_err retry_rnr_exceeded_err completer_retry_err send_err link_downed
        rdma_sends rdma_recvs
        """
    ),
    vocab=_ro(
        {
            "sent_pkts": "tx_packets",
            "rcvd_pkts": "rx_packets",
            "duplicate_request": "duplicate_request",
            "out_of_seq_request": "out_of_sequence",
            "rcvd_rnr_err": "rnr",
            "rcvd_seq_err": "seq_err",
            "retry_exceeded_err": "retries_exceeded",
            # rxe_comp.c counts COMP_RETRY each time the completer makes the requester resend
            # (after an ACK timeout or a NAK-sequence error): retransmission rounds.
            "completer_retry_err": "retransmits",
            "link_downed": "link_downed",
        }
    ),
)
