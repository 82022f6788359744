"""Configuration findings: one anomaly finding per local QoS contradiction of this host.

The QoS reader (``netd.qos``, a feature layer above this one) finds contradictions inside one host —
PFC without ECN, RoCE on a lossy priority, an MTU its LLDP neighbour cannot carry — on its own slow
clock. The composition root hands them to the engine as plain :class:`ConfigFinding` values on each
tick (``DetectInput.config``); this detector holds the latest set and reports one WARNING candidate
per value on every input path, so the engine opens a finding when a contradiction appears and
resolves it (``cleared``) on the first tick after the fix, like any other finding.

A tick whose input carries no configuration (``None``: no QoS reader, or detection fed by a test)
keeps the held set: silence is not a fix.
"""

from __future__ import annotations

from netd.config.detect import DetectConfig
from netd.detect.findings import Candidate, Scope, Severity
from netd.detect.inputs import DetectInput, InputPath
from netd.model.config_finding import CONFIG_KINDS, ConfigFinding

__all__ = ["ConfigDetector"]


def _candidate(host: str, f: ConfigFinding) -> Candidate:
    scope = Scope(host, f.device, f.port, f.netdev, f.priority, f.subject)
    return Candidate(f.kind, scope, Severity.WARNING, f.message, {"fix": f.fix, "source": "qos"})


class ConfigDetector:
    kinds: tuple[str, ...] = CONFIG_KINDS

    def __init__(self, cfg: DetectConfig) -> None:
        self.cfg = cfg
        self._held: tuple[Candidate, ...] = ()
        self._from: tuple[ConfigFinding, ...] | None = None  # the values _held was built from

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        config = inp.config
        if inp.path is InputPath.TICK and config is not None and config != self._from:
            self._from = config
            self._held = tuple(_candidate(inp.host, f) for f in config)
        return list(self._held)
