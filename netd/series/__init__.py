"""Series: a tick's readings against the previous tick's.

``tracker`` turns snapshots into deltas and rates (wraps, resets, saturation); ``port_signals``
derives the per-port figures people read (ECN/s, CNP/s, pause fraction).
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "tracker": ("DeltaKind", "NetdevView", "Observation", "PortView", "SeriesTracker", "counter_delta"),
        "port_signals": ("ERROR_VOCABULARY", "PortSignals", "PriorityPause"),
    },
)
