"""The warning printed when the listener is reachable from the network with no API token configured.

Reads stay open on whatever address the operator chose (docs/architecture.md, Safety rules), and
with no token the mutating endpoints refuse every request, so nothing is unsafe; but an operator who
exposes the service should know that reads are unauthenticated and that mutations are off until a
token is set.
"""

from __future__ import annotations

import ipaddress

__all__ = ["exposure_warning", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'; False for wildcards (0.0.0.0, ::) and anything else."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def exposure_warning(host: str, port: int, token_configured: bool) -> str | None:
    if is_loopback(host) or token_configured:
        return None
    return (
        f"WARNING: listening on {host}:{port}, which is not loopback, and no API token is configured: "
        "metrics, topology, congestion and the scheduler extender are readable by anyone who can reach "
        "this address, and mutating endpoints are disabled (set api.token_file or NETD_API_TOKEN)."
    )
