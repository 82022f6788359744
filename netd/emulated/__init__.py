"""The emulated fabric: a DCQCN fabric from :mod:`cc.sim`, rendered as sysfs and ethtool trees that
netd's real sources read, on hosts without an RDMA NIC (docs/emulated-fabric.md).

``fabric_host`` holds the fabric and its trees, ``child`` runs it in a process of its own,
``faults``/``fault_kinds``/``traces`` inject labelled faults for the detector benchmark.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "fabric_host": (
            "MARKER_FILE",
            "EmulatedFabric",
            "FabricHook",
            "default_state_dir",
            "emulated_host_of",
            "host_name",
            "host_root",
            "rate_text",
        ),
        "child": ("EmulatorProcess", "main"),
        "traces": ("ScheduledWorkload", "Trace", "fault_trace", "healthy_trace"),
        "faults": ("Fault", "FaultLayer", "Label", "SliceDeltas"),
    },
)
