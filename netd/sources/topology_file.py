"""The static topology file (YAML): what LLDP cannot see from a host.

A host hears its ToR over LLDP, but not the ToR's uplinks to the spines, and not a ToR whose LLDP is
off. The file fills those gaps; see docs/service.md for the format::

    version: 1
    rails: device_index          # NIC i of every host is on rail i (default); or "none"
    spines:                      # optional: names (a list) or name -> {mgmt_address}
      - spine-1
    tors:
      leaf-r0: {spines: [spine-1, spine-2], rail: 0, mgmt_address: 10.0.0.11}
    hosts:                       # optional: host ports LLDP does not see (key: netdev, device or device/port)
      gpu-01:
        mlx5_0: {tor: leaf-r0, tor_port: Ethernet0, rail: 0}

Spines and ToRs that are named but not declared are declared implicitly (with no attributes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from netd.errors import SourceError
from netd.model.snapshot import frozen_map
from netd.model.topology import StaticFabric, StaticPort, Switch
from netd.sources.sysfs_io import read_regular_file

__all__ = ["parse_topology_file", "read_topology_file"]

_SOURCE = "topology-file"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Spine(_Strict):
    mgmt_address: str | None = None


class _Tor(_Strict):
    spines: tuple[str, ...] = ()
    rail: int | None = Field(None, ge=0)
    mgmt_address: str | None = None

    @field_validator("spines", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class _Port(_Strict):
    tor: str | None = None
    tor_port: str | None = None
    rail: int | None = Field(None, ge=0)


class _File(_Strict):
    version: Literal[1] = 1
    rails: Literal["device_index", "none"] = "device_index"
    spines: dict[str, _Spine | None] = {}
    tors: dict[str, _Tor | None] = {}
    hosts: dict[str, dict[str, _Port]] = {}

    @field_validator("spines", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        return dict.fromkeys(v) if isinstance(v, list) else v


def _describe(err: ValidationError, origin: str) -> str:
    problems = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            problems.append(f"unknown key `{where}`")
        else:
            problems.append(f"`{where}`: {e['msg']} (got {e.get('input')!r})")
    return f"{origin}: " + "; ".join(problems)


def parse_topology_file(text: str, origin: str = "topology file") -> StaticFabric:
    """Parse and validate the YAML text; every problem names the key and the bad value."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SourceError(_SOURCE, f"{origin} is not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SourceError(
            _SOURCE, f"{origin}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        raise SourceError(_SOURCE, _describe(exc, origin)) from exc
    tors: dict[str, Switch] = {}
    for name, tor in parsed.tors.items():
        t = tor or _Tor()
        tors[name] = Switch(name, "tor", spines=tuple(t.spines), rail=t.rail, mgmt_address=t.mgmt_address)
    ports: dict[str, dict[str, StaticPort]] = {}
    for host, entries in parsed.hosts.items():
        ports[host] = {key: StaticPort(p.tor, p.tor_port, p.rail) for key, p in entries.items()}
        for p in entries.values():
            if p.tor and p.tor not in tors:
                tors[p.tor] = Switch(p.tor, "tor")
    spines = {
        name: Switch(name, "spine", mgmt_address=(s.mgmt_address if s else None))
        for name, s in parsed.spines.items()
    }
    for switch in tors.values():
        for name in switch.spines:
            spines.setdefault(name, Switch(name, "spine"))
    return StaticFabric(
        tors=frozen_map(tors),
        spines=frozen_map(spines),
        ports=frozen_map({h: frozen_map(p) for h, p in ports.items()}),
        rails_by=parsed.rails,
        path=origin,
    )


def read_topology_file(path: Path) -> StaticFabric:
    return parse_topology_file(read_regular_file(path, _SOURCE), origin=str(path))
