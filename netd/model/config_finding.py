"""A configuration inconsistency of one host, as a plain value (model layer: any module may import it).

``netd.qos`` finds them (PFC without ECN, RoCE on a lossy priority, an MTU the neighbour's frames cannot
carry); the composition root hands them to the detector engine (``netd.detect.config``), which opens a
finding per value and withdraws it when the value is gone. The detector never imports ``netd.qos``: this
record is the whole interface between the two (docs/architecture.md, Layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CONFIG_KINDS", "ConfigFinding"]

# Every kind a configuration finding can have: the detector's kinds, exported at 0 from the start.
CONFIG_KINDS = ("pfc_without_ecn", "roce_on_lossy_priority", "mtu_mismatch")


@dataclass(frozen=True, slots=True)
class ConfigFinding:
    """One contradiction on one port. ``subject`` tells two findings of a kind on one port (and
    priority) apart: the DSCP seen on a lossy priority, the member interface a neighbour was heard on."""

    kind: str  # one of CONFIG_KINDS
    device: str
    port: int
    netdev: str | None
    priority: int | None  # None when the contradiction is not about one priority (MTU)
    message: str  # one line: what is wrong and what it does to RoCE traffic
    fix: str  # the command that removes it (netd prints it; it never runs it)
    subject: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "device": self.device,
            "port": self.port,
            "netdev": self.netdev,
            "priority": self.priority,
            "subject": self.subject,
            "message": self.message,
            "fix": self.fix,
        }
