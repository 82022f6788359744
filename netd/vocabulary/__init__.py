"""Names: what netd calls things, and how vendors' names map onto them.

Prometheus metric families of the RDMA counters, ethtool statistic names (PFC, pause, storms,
PHY health) and DCQCN knob names. Pure tables and parsers, no I/O.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "metric_names": (
            "ERROR_VOCABULARY",
            "PMA_ERROR_KINDS",
            "RDMA_COUNTERS",
            "TICK_COUNTERS",
            "RdmaMetric",
        ),
        "ethtool_names": ("PFC_DIRECTIONS", "PRIORITIES", "EthtoolSignals", "parse_signals"),
        "dcqcn_knobs": ("KNOBS", "OFED_ENABLE_DIRS", "Knob", "by_name", "tunable_names"),
        "qos_settings": ("QOS_SETTINGS", "is_setting"),
    },
)
