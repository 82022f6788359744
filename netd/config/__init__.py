"""Configuration: one TOML file, overridden by ``NETD_*`` variables, overridden by flags.

``settings`` holds :class:`Config` and :func:`load_config`; every other module is one section
(``[bpf]``, ``[detect]``, ``[nccl]``, ``[tuning]``, ``[topology]``/``[congestion]``/``[scheduler]``/
``[cluster]``, ``[kube]``). Sections live here, not in the features, because every layer reads the config.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "settings": ("DEFAULT_CONFIG_PATH", "Config", "load_config"),
        "files": ("NotARegularFile", "per_user_dir", "read_regular"),
        "types": ("OptionalPath", "SetPath"),
        "bpf": ("BpfConfig",),
        "detect": ("LEVELS", "DetectConfig", "Level"),
        "nccl": ("NcclConfig", "default_socket_path"),
        "service": ("ClusterConfig", "CongestionConfig", "SchedulerConfig", "TopologyConfig"),
        "tuning": ("TuningConfig", "default_journal_dir"),
        "qos": ("QosConfig",),
        "kube": ("KubeConfig",),
    },
)
