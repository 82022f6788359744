"""The fabric consistency check: every port's QoS against the expected profile, one finding per host.

The expected value of a setting is the one ``[qos] expected`` declares; otherwise the strict majority
of the ports in the same scope (the host's ToR, or the whole fabric) that report the setting. A setting
with no strict majority (2 ports say "3", 2 say "4") has no expected value: that is reported as
undecided, never guessed. Only settings a port *reports* are compared: a value netd could not read is
shown in that host's document with the reason, not called drift.

Cost: one pass to count values per (scope, setting), one pass to compare — linear in ports × settings;
``netd bench qos`` measures it at 4096 hosts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from netd.qos.fixes import fix_command

__all__ = ["Audit", "Difference", "Finding", "PortSettings", "audit_ports"]

Scope = Literal["tor", "fabric"]
_FABRIC = "(fabric)"


@dataclass(frozen=True, slots=True)
class PortSettings:
    """One port's settings (canonical texts) and where the port sits."""

    host: str
    tor: str | None
    device: str
    port: int
    netdev: str | None
    settings: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Difference:
    device: str
    netdev: str | None
    setting: str
    expected: str
    actual: str
    basis: str  # "config" or "majority of tor leaf1 (7/8 ports)"
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "netdev": self.netdev,
            "setting": self.setting,
            "expected": self.expected,
            "actual": self.actual,
            "basis": self.basis,
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """A host whose QoS differs from the fabric's, with every difference on every port."""

    host: str
    tor: str | None
    differences: tuple[Difference, ...]

    def summary(self) -> str:
        parts = [
            f"{d.netdev or d.device} {d.setting} {d.actual!r} (expected {d.expected!r})"
            for d in self.differences
        ]
        return f"{self.host}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "tor": self.tor,
            "summary": self.summary(),
            "differences": [d.to_dict() for d in self.differences],
        }


@dataclass(frozen=True, slots=True)
class Audit:
    hosts: int
    ports: int
    scope: str
    expected: Mapping[str, Mapping[str, str]]  # scope group -> setting -> expected value
    findings: tuple[Finding, ...]
    undecided: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts,
            "ports": self.ports,
            "scope": self.scope,
            "expected": {g: dict(v) for g, v in self.expected.items()},
            "findings": [f.to_dict() for f in self.findings],
            "undecided": list(self.undecided),
        }


def _group(p: PortSettings, scope: Scope) -> str:
    return (p.tor or "(no tor)") if scope == "tor" else _FABRIC


def _expected(
    ports: Sequence[PortSettings], declared: Mapping[str, str], scope: Scope, ignore: frozenset[str]
) -> tuple[dict[str, dict[str, tuple[str, str]]], list[str]]:
    counts: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for p in ports:
        by_setting = counts[_group(p, scope)]
        for name, value in p.settings.items():
            if name not in ignore:
                by_setting[name][value] += 1
    expected: dict[str, dict[str, tuple[str, str]]] = {}
    undecided: list[str] = []
    for group, by_setting in sorted(counts.items()):
        chosen: dict[str, tuple[str, str]] = {}
        for name, values in sorted(by_setting.items()):
            if name in declared:
                chosen[name] = (declared[name], "config")
                continue
            total = sum(values.values())
            value, n = values.most_common(1)[0]
            if 2 * n > total:
                where = "the fabric" if group == _FABRIC else f"tor {group}"
                chosen[name] = (value, f"majority of {where} ({n}/{total} ports)")
            else:
                shown = ", ".join(f"{c} x {v!r}" for v, c in values.most_common(4))
                undecided.append(f"{group}: no majority for {name} ({shown})")
        expected[group] = chosen
    return expected, undecided


def audit_ports(
    ports: Iterable[PortSettings],
    declared: Mapping[str, str] | None = None,
    scope: Scope = "tor",
    ignore: Iterable[str] = (),
) -> Audit:
    """Compare every port with its scope's expected profile; one :class:`Finding` per host that differs."""
    ports = list(ports)
    declared = dict(declared or {})
    skip = frozenset(ignore)
    expected, undecided = _expected(ports, declared, scope, skip)
    by_host: dict[str, list[Difference]] = defaultdict(list)
    tor_of: dict[str, str | None] = {}
    for p in ports:
        want = expected.get(_group(p, scope), {})
        for name, actual in p.settings.items():
            target = want.get(name)
            if target is None or actual == target[0]:
                continue
            value, basis = target
            by_host[p.host].append(
                Difference(
                    p.device,
                    p.netdev,
                    name,
                    value,
                    actual,
                    basis,
                    fix_command(name, value, p.device, p.netdev, p.port),
                )
            )
            tor_of[p.host] = p.tor
    findings = tuple(Finding(h, tor_of[h], tuple(d)) for h, d in sorted(by_host.items()))
    return Audit(
        hosts=len({p.host for p in ports}),
        ports=len(ports),
        scope=scope,
        expected={g: {k: v for k, (v, _) in s.items()} for g, s in expected.items()},
        findings=findings,
        undecided=tuple(undecided),
    )
