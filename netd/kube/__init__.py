"""The fabric for schedulers: node labels and Kueue's Topology, Volcano HyperNodes, Slurm's
topology.conf (``export``), RoCE health as a node condition and taint (``health``), and the
publisher that keeps them in a cluster (``service``, `netd fabric publish`)."""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "tiers": ("HostTier", "Tiers", "fabric_tiers"),
        "names": ("label_value", "object_name"),
        "objects": ("hypernodes", "kueue_topology", "node_labels", "node_name"),
        "slurm": ("slurm_topology",),
        "export": ("FORMATS", "export_objects", "render"),
        "health": ("HealthTracker", "HostHealth"),
        "client": ("KubeClient",),
        "service": ("Publisher", "RoundResult", "TokenBucket"),
        "gather": ("emulated_snapshot", "emulated_topology", "merge_topologies"),
        "bench": ("bench_export", "rail_optimized"),
        "monitoring": ("monitoring_objects", "render_monitoring"),
    },
)
