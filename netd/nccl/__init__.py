"""The NCCL bridge: the hint table libnccl-tuner-netd.so reads, the policy that fills it, and how
it reaches every rank alike (docs/nccl.md).

``layout`` mirrors the C header; ``conditions`` and ``policy`` turn what netd measures into a
table; ``pins`` is the pin authority (per communicator: first asker pins, all ranks or none);
``socket_server`` answers the plugin at communicator init; ``pin_client`` asks a remote pin
service for multi-node communicators; ``routes`` serves /v1/nccl; ``nccl_env`` recommends the
NCCL environment the tuner cannot change.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "service": ("NcclService", "env_document", "switch_profile"),
        "pins": ("PinAuthority", "PinKey", "PinVerdict"),
        "table": ("NO_HINT", "HintEntry", "HintTable", "pack_table", "unpack_table"),
        "policy": ("CANDIDATES", "Decision", "ModelParams", "PolicyResult", "algorithm_costs", "build_table"),
        "publisher": ("HintPublisher", "host_id"),
        "nccl_env": ("Setting", "recommend", "render"),
    },
)
