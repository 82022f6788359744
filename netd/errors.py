"""netd's exception tree.

Every error netd raises on purpose derives from :class:`NetdError`, so a caller
(the CLI, the daemon loop) can catch one type and print a clear message::

    NetdError
    ├── ConfigError          a config file or NETD_* variable is invalid (names key, value, what is allowed)
    ├── SourceError          a counter source failed in a way that is not "absent"
    │   └── EthtoolError     an ETHTOOL_* ioctl failed (interface, command, errno)
    ├── DaemonUnreachable    `netd status` could not reach a running daemon
    ├── BenchError           a benchmark could not be set up
    ├── LabError             `netd lab` could not build, run or remove the namespace fabric
    ├── HintTableError       an NCCL hint table is malformed (netd.nccl; the message says how)
    ├── TuningError          a DCQCN parameter could not be read, written or verified (netd.tuning)
    └── KubeError            the Kubernetes API refused or could not be reached (netd.kube)

"Absent" is not an error: a missing file, a counter the driver does not have, a
permission the daemon lacks are reported as ``None`` (see netd.sources.sysfs_io).
"""

from __future__ import annotations

__all__ = [
    "BenchError",
    "ConfigError",
    "DaemonUnreachable",
    "EthtoolError",
    "HintTableError",
    "KubeError",
    "LabError",
    "NetdError",
    "SourceError",
    "TuningError",
]


class NetdError(Exception):
    """Base class of every error netd raises deliberately."""


class ConfigError(NetdError):
    """Invalid configuration: the message names the key, the bad value and what is allowed."""


class SourceError(NetdError):
    """A source failed for a reason other than absence (e.g. EIO, ENOMEM, a corrupt value stream)."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")
        self.source = source


class EthtoolError(SourceError):
    """An ethtool ioctl failed on an interface."""

    def __init__(self, netdev: str, command: str, errno_: int, message: str) -> None:
        super().__init__("ethtool", f"{netdev}: {command} failed: {message} (errno {errno_})")
        self.netdev = netdev
        self.command = command
        self.errno = errno_


class DaemonUnreachable(NetdError):
    """No netd daemon answered at the given address."""


class BenchError(NetdError):
    """A benchmark could not be prepared or run."""


class LabError(NetdError):
    """The lab fabric could not be built, run or removed (the message says what to do)."""


class HintTableError(NetdError):
    """An NCCL hint table (netd_hints.h layout) is malformed: truncated, corrupt or out of range."""


class TuningError(NetdError):
    """A DCQCN parameter write, read-back or rollback failed (the message names the file and value)."""


class KubeError(NetdError):
    """A Kubernetes API call failed (the message names the method, path, status and the API's reason)."""
