"""LLDP neighbours from a running lldpd, through ``lldpcli -f json show neighbors details``.

lldpd's JSON "simplifies" its output: a list of one element becomes the element itself, and a keyed
object (``{"tor1": {...}}``) stands for a named entry. So ``interface`` is an object with one netdev
key when there is one neighbour and a list of such objects when there are several, ``mgmt-ip`` is a
string or a list, and a chassis with no System Name has its fields directly under ``chassis``. The
parser accepts every one of these shapes (and lldpcli's ``json0`` format, which never simplifies).

The same parser reads a file holding that output (a captured host, the emulated fabric's
``<root>/lldp.json``), so captures and live hosts go through one code path.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from netd.errors import SourceError
from netd.model.topology import LldpNeighbor
from netd.sources.sysfs_io import read_regular_file

__all__ = ["LldpcliSource", "parse_lldpcli_json", "read_lldp_file"]

_SOURCE = "lldpd"


def _items(node: Any) -> list[Any]:
    """lldpd's "one or many": a list stays a list, anything else is a list of one."""
    if node is None:
        return []
    return node if isinstance(node, list) else [node]


def _value(node: Any) -> str | None:
    """A scalar that json0 wraps as [{"value": x}] and json gives as x."""
    for item in _items(node):
        if isinstance(item, dict):
            item = item.get("value")
        if item is not None and str(item) != "":
            return str(item)
    return None


def _values(node: Any) -> tuple[str, ...]:
    out = []
    for item in _items(node):
        value = item.get("value") if isinstance(item, dict) else item
        if value is not None and str(value) != "":
            out.append(str(value))
    return tuple(out)


def _named(node: Any) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """Entries of a keyed section: ``{"name": {...}}`` (json), ``[{"name": .., ...}]`` (json0), or bare."""
    for item in _items(node):
        if not isinstance(item, dict):
            continue
        if "via" in item or ("name" in item and "id" in item):  # json0: the name is a field
            yield _value(item.get("name")), item
        elif "id" in item or "descr" in item:  # a chassis with no name: fields directly
            yield None, item
        else:
            for name, body in item.items():
                if isinstance(body, dict):
                    yield name, body


def _typed_id(node: Any) -> tuple[str | None, str | None]:
    for item in _items(node):
        if isinstance(item, dict):
            return (str(item["type"]) if "type" in item else None), _value(item.get("value"))
        return None, str(item)
    return None, None


def _neighbor(interface: str, body: dict[str, Any], source: str) -> LldpNeighbor | None:
    chassis = next(_named(body.get("chassis")), None)
    port = next(iter(_items(body.get("port"))), None)
    if chassis is None and port is None:
        return None
    name, ch = chassis if chassis is not None else (None, {})
    if name is None:
        name = _value(ch.get("name"))
    _, chassis_id = _typed_id(ch.get("id"))
    port_id_type, port_id = _typed_id(port.get("id")) if isinstance(port, dict) else (None, None)
    ttl = _value(port.get("ttl")) if isinstance(port, dict) else None
    # display.c prints the 802.3 MFS TLV as port "mfs" (details only), and only when the frame had one
    mfs = _value(port.get("mfs")) if isinstance(port, dict) else None
    return LldpNeighbor(
        interface=interface,
        chassis_name=name,
        chassis_id=chassis_id,
        port_id=port_id,
        port_id_type=port_id_type,
        port_descr=_value(port.get("descr")) if isinstance(port, dict) else None,
        mgmt_addresses=_values(ch.get("mgmt-ip")),
        system_descr=_value(ch.get("descr")),
        ttl_s=int(ttl) if ttl is not None and ttl.isdigit() else None,
        source=source,
        max_frame_size=int(mfs) if mfs is not None and mfs.isdigit() else None,
    )


def parse_lldpcli_json(text: str, source: str = _SOURCE) -> tuple[LldpNeighbor, ...]:
    """Neighbours from ``lldpcli -f json|json0 show neighbors [details]`` output."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(source, f"lldpcli output is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or "lldp" not in doc:
        raise SourceError(source, 'lldpcli output has no "lldp" object')
    out: list[LldpNeighbor] = []
    for lldp in _items(doc["lldp"]):
        if not isinstance(lldp, dict):
            continue
        for interface, body in _named(lldp.get("interface")):
            if interface is None:
                continue
            n = _neighbor(interface, body, source)
            if n is not None:
                out.append(n)
    return tuple(out)


def read_lldp_file(path: Path) -> tuple[LldpNeighbor, ...]:
    """A file holding lldpcli's JSON output (the emulated fabric writes ``<root>/lldp.json``)."""
    return parse_lldpcli_json(read_regular_file(path, "lldp-file"), source="lldp-file")


class LldpcliSource:
    """Asks a running lldpd for its neighbours. ``socket`` is lldpd's control socket (``-u``)."""

    def __init__(self, lldpcli: str = "lldpcli", socket: Path | None = None, timeout_s: float = 5.0) -> None:
        self.lldpcli = lldpcli
        self.socket = socket
        self.timeout_s = timeout_s

    def command(self) -> list[str]:
        cmd = [self.lldpcli]
        if self.socket is not None:
            cmd += ["-u", str(self.socket)]
        return [*cmd, "-f", "json", "show", "neighbors", "details"]

    def read(self) -> tuple[LldpNeighbor, ...]:
        try:
            done = subprocess.run(
                self.command(), capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
        except FileNotFoundError as exc:
            raise SourceError(_SOURCE, f"{self.lldpcli} not found (install lldpd)") from exc
        except subprocess.TimeoutExpired as exc:
            raise SourceError(_SOURCE, f"lldpcli did not answer within {self.timeout_s:g} s") from exc
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit status {done.returncode}"
            raise SourceError(_SOURCE, f"lldpcli failed (is lldpd running?): {why}")
        return parse_lldpcli_json(done.stdout)

    def available(self) -> bool:
        """True when lldpcli reaches a running lldpd (used by the ``auto`` choice)."""
        try:
            self.read()
        except SourceError:
            return False
        return True
