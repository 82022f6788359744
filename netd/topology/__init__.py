"""Topology: this host's RDMA ports placed under ToRs, spines and rails.

``build`` joins LLDP neighbours, netlink links, GIDs and an optional file into a
:class:`~netd.model.topology.Topology`; ``service`` refreshes it when its inputs change.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "build": ("build_topology", "natural_key", "rail_index"),
        "service": ("TopologyInputs", "TopologyService"),
    },
)
