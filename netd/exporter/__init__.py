"""Prometheus exposition of the core: :class:`NetdCollector` builds every family at scrape time
from the published state, one module of families per subject (ports, ethtool, eBPF, congestion,
anomalies). Features export their own families from their ``metrics.py``.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "collector": ("NetdCollector",),
    },
)
