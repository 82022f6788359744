"""The daemon's tick: sample, observe, detect, score, publish.

``loop`` runs the ticks and swaps in one :class:`PublishedState` (``state``) that every reader
shares without a lock; ``bpf`` starts the eBPF probes. What a run is made of is decided by the
composition roots (:mod:`netd.commands.run`, :mod:`netd.cluster.cli`).
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "loop": ("Daemon", "Emulator"),
        "state": ("PublishedState",),
        "bpf": ("bpf_banner", "bpf_settings", "start_bpf"),
    },
)
