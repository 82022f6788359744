"""Counter sources: one module per thing netd reads (RDMA sysfs, ethtool, verbs, netlink, eBPF,
LLDP, the DCQCN parameter trees, Prometheus). Each takes its root as an argument and returns
frozen values from :mod:`netd.model`; :class:`Sampler` (``collect``) runs them all once per tick.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "collect": ("Sampler",),
        "rdma": ("RdmaSysfs", "parse_counter", "parse_rate", "parse_state", "rate_problem"),
        "ethtool": (
            "CapturedStatsReader",
            "EthtoolSource",
            "IoctlStatsReader",
            "StatsRead",
            "StatsReader",
            "format_ethtool_text",
            "invalid_netdev_name",
            "make_reader",
            "parse_ethtool_text",
        ),
        "verbs": ("VerbsDevice", "VerbsGid", "VerbsPort", "VerbsSource", "port_from_attrs"),
        "gids": ("ZERO_GID", "read_gids"),
        "lldpcli": ("LldpcliSource", "parse_lldpcli_json", "read_lldp_file"),
        "lldp_frames": ("ETH_P_LLDP", "LldpFrameListener", "parse_lldp_frame"),
        "netlink_events": ("LinkEvent", "LinkMonitor"),
        "netlink_links": ("NetlinkLinks", "interfaces_from_messages"),
        "prometheus": ("PrometheusClient", "Sample", "promql_string"),
        "cc_params": ("ParamTree", "discover", "read_value"),
        "topology_file": ("parse_topology_file", "read_topology_file"),
        "sysfs_io": ("ABSENT_ERRNOS", "PreadCache", "list_dir", "read_text", "stat_identity"),
        "procfs": ("ProcStat", "proc_stat"),
        "qos": ("PortQos", "QosSource", "port_qos_from_dcb"),
        "qos_dcb": (
            "DCB_OBJECTS",
            "CapturedDcbReader",
            "CommandDcbReader",
            "DcbRead",
            "DcbReader",
            "capture_dir",
            "dcb_json",
            "make_dcb_reader",
            "write_capture",
        ),
        "bpf": ("PFC_SLOTS", "BpfSettings", "BpfSource", "FakeBpfSource", "UnavailableBpfSource"),
    },
)
