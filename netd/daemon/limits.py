"""The descriptor budget at start: what netd needs from RLIMIT_NOFILE, checked before the first tick.

netd keeps a bounded number of descriptors whatever the number of ports (sysfs_io, Budget): 24 for
RDMA counter directories (files are opened by name under them), 16 for replayed ethtool captures
(the fast path reads those 13 times a second), plus the listener, its clients, netlink and ethtool
sockets, BPF maps and programs. :data:`NOFILE_NEEDED` leaves room for those and for a burst
of HTTP clients; a soft limit below it is raised towards it (up to the hard limit), and a hard limit
below :data:`NOFILE_MINIMUM` refuses to start rather than fail reads at random later.
"""

from __future__ import annotations

import resource

from netd.errors import ConfigError

__all__ = ["NOFILE_MINIMUM", "NOFILE_NEEDED", "ensure_nofile"]

NOFILE_NEEDED = 256
NOFILE_MINIMUM = 64


def ensure_nofile(needed: int = NOFILE_NEEDED, minimum: int = NOFILE_MINIMUM) -> str | None:
    """Raise the soft RLIMIT_NOFILE towards ``needed``; a warning line when it stays below, None when
    it is enough. Raises :class:`ConfigError` when even ``minimum`` is not available."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    if soft >= needed:
        return None
    if soft < minimum:
        raise ConfigError(
            f"RLIMIT_NOFILE is {soft} (hard {hard}): netd needs at least {minimum} open files, "
            f"{needed} recommended (raise it with `ulimit -n {needed}` or LimitNOFILE={needed})"
        )
    return (
        f"warning: RLIMIT_NOFILE is {soft} (hard {hard}); netd keeps about 50 descriptors but needs up "
        f"to {needed} with many API clients (`ulimit -n {needed}` or LimitNOFILE={needed})"
    )
