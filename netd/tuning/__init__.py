"""DCQCN tuning on the host: the service that runs :mod:`cc.tune` against this host's NICs, the
journaled applier that is the only writer of NIC parameters (with its file layer, write-ahead
journal, per-NIC locks and fault injection), its routes, metrics, command and benchmark
(docs/tuning.md).
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "service": ("ACTIONS", "TuningService", "params_in_force", "safety_bounds"),
        "applier": ("STATES", "Applier", "Outcome"),
        "journal": ("Journal", "Write", "recovery_message"),
        "files": ("Files",),
        "faults": ("Fault", "FaultyFiles"),
        "locks": ("device_locks",),
        "wiring": ("TuningParts", "start_tuning"),
    },
)
