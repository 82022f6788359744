"""The cluster view behind ``netd fabric`` (config ``[cluster]``): every host's metrics read back
from Prometheus (``view``), scored and served with the same routes as ``netd run`` (``app``),
plus the scheduler extender and the NCCL pin service for multi-node communicators.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "view": ("FabricView",),
        "peers": ("GroupPeers", "kube_label_name"),
        "stats": ("FabricStats", "FabricSummary"),
        "remote": ("RemoteFabricView",),
        "app": ("create_fabric_app",),
        "metrics": ("FabricCollector",),
    },
)
