"""The names of the QoS settings netd reads, compares across the fabric and exports.

One table so that the source (:mod:`netd.sources.qos`), the ``[qos]`` config (``expected``, ``ignore``)
and the audit agree on the words. Per-knob DCQCN parameters are ``dcqcn.<knob>`` (the knob names of
:mod:`netd.vocabulary.dcqcn_knobs`).
"""

from __future__ import annotations

__all__ = ["QOS_SETTINGS", "is_setting"]

QOS_SETTINGS: dict[str, str] = {
    "trust": "what the NIC classifies received packets by: dscp or pcp",
    "dscp_prio": "the DCB APP table's DSCP->priority entries, 'dscp:prio' sorted ('none' when empty)",
    "pfc": "priorities with PFC enabled ('none' when none)",
    "prio_tc": "priority -> traffic class, 8 values",
    "tc_bw": "ETS bandwidth percent per traffic class, 8 values",
    "tc_tsa": "transmission selection per traffic class (ets, strict, ...), 8 values",
    "prio_buffer": "priority -> receive buffer, 8 values",
    "ecn": "priorities where the NIC answers CE marks with CNPs (notification point)",
    "dcqcn": "priorities where the NIC cuts its rate on CNPs (reaction point)",
    "mtu": "the netdev MTU in bytes",
    "roce_mode": "rdma_cm's default RoCE mode: 'RoCE v2' or 'IB/RoCE v1'",
    "gid_index": "the GID index of the port's RoCE v2 IPv4 address",
    "cc_algorithm": "the congestion-control algorithm in force: dcqcn or none",
}


def is_setting(name: str) -> bool:
    return name in QOS_SETTINGS or (name.startswith("dcqcn.") and len(name) > len("dcqcn."))
