"""The QoS audit (docs/qos.md): each port's QoS as the NIC applies it (``service``, ``/v1/qos``,
``netd qos``, ``netd_qos_*`` metrics), local inconsistencies (``local``), and the fabric consistency
check against a declared or majority profile (``audit``, ``fabric``, ``/v1/qos/fabric``).
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "audit": ("Audit", "Difference", "Finding", "PortSettings", "audit_ports"),
        "fabric": ("FabricQos", "from_emulated_trees", "from_prometheus"),
        "fixes": ("fix_command",),
        "checks": ("qos_check",),
        "local": ("LOCAL_KINDS", "LocalFinding", "local_findings"),
        "service": ("QosService", "build_source"),
        "metrics": ("QosCollector",),
        "routes": ("fabric_qos_router", "qos_router"),
        "wiring": ("QosParts", "emulated_fabric_qos", "start_qos"),
    },
)
