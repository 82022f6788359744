"""DCQCN tuning on the host: the service that runs :mod:`cc.tune` against this host's NICs, the
journaled applier that is the only writer of NIC parameters, its routes, metrics and command
(docs/tuning.md).
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "service": ("ACTIONS", "TuningService", "params_in_force", "safety_bounds"),
        "applier": ("Applier", "Outcome"),
        "journal": ("Journal", "Write"),
        "wiring": ("TuningParts", "start_tuning"),
    },
)
