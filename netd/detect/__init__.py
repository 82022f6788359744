"""Fabric anomaly detection: detectors as pure state machines over counter deltas, and their engine.

``feed`` turns observations into :class:`DetectInput` values; one module per detector family;
``engine`` runs them and keeps the findings; ``service`` is what the daemon runs each tick and
on the PFC fast path. Thresholds are :mod:`netd.config.detect`.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "engine": ("SUPPRESSES", "DetectionEngine", "default_detectors"),
        "findings": ("AnomalyState", "Candidate", "Evidence", "Finding", "FindingEvent", "Scope", "Severity"),
        "inputs": ("DetectInput", "InputPath", "LinkChange", "PortInput", "PriorityCounters", "port_key"),
        "fast_wait": ("wait_running_fast_path",),
        "service": ("Detection", "PfcReader", "log_line"),
        "wiring": ("build_detection",),
    },
)
