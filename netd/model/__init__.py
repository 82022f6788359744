"""Values: the frozen records every layer passes on (a tick's Snapshot, BPF records, the Topology).

Standard library only, no I/O. Sources build them; everything above reads them.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "snapshot": (
            "PortIdentity",
            "Counter",
            "CounterGroup",
            "EthtoolSample",
            "Overflow",
            "PortSample",
            "Snapshot",
            "SourceStatus",
            "frozen_map",
        ),
        "bpf": (
            "BpfSample",
            "FlowRecord",
            "MapFill",
            "PfcCounts",
            "ProbeState",
            "ProgramStats",
            "RoceClassCount",
            "TcpEndpoint",
        ),
        "config_finding": ("CONFIG_KINDS", "ConfigFinding"),
        "topology": (
            "Gid",
            "HostInterface",
            "LldpNeighbor",
            "PortPlacement",
            "SourceNote",
            "StaticFabric",
            "StaticPort",
            "Switch",
            "Topology",
            "join_names",
        ),
    },
)
