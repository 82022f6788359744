"""The log line of a finding's lifecycle step: logfmt for people and for log pipelines (Loki, journald).

One line per step (``event=anomaly_opened id=… kind=… severity=… host=… …``), at a level that follows
the severity, so ``journalctl -p err`` shows critical findings and nothing milder.
"""

from __future__ import annotations

import logging
from typing import Any

from netd.detect.findings import FindingEvent, Severity

__all__ = ["log_level", "log_line"]


def _quote(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\\'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def log_line(event: FindingEvent) -> str:
    """One logfmt line per lifecycle step: ``event=anomaly_opened id=… kind=… severity=… …``."""
    f = event.finding
    fields: dict[str, Any] = {
        "event": f"anomaly_{event.action}",
        "id": f.id,
        "kind": f.kind,
        "severity": f.severity.value,
        **f.scope.as_dict(),
    }
    if event.action == "resolved":
        fields.update(duration_s=round(f.duration_s, 3), resolution=f.resolution)
    else:
        fields["explanation"] = f.explanation
    return " ".join(f"{k}={_quote(v)}" for k, v in fields.items() if v is not None)


def log_level(event: FindingEvent) -> int:
    """INFO for an informational finding, ERROR for a critical one (but its resolution), else WARNING."""
    sev = event.finding.peak_severity if event.action == "resolved" else event.finding.severity
    if sev is Severity.INFO:
        return logging.INFO
    if sev is Severity.CRITICAL and event.action != "resolved":
        return logging.ERROR
    return logging.WARNING
