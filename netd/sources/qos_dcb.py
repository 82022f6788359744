"""A netdev's DCB state (PFC, ETS, APP table, buffers) from iproute2's ``dcb -j``, or from captures of it.

Why ``dcb`` and not pyroute2: pyroute2 (0.9.x) knows the ``RTM_GETDCB`` message number but has no
dcbnl message class, so it cannot decode ``DCB_ATTR_IEEE_*``; iproute2's ``dcb`` (Debian iproute2 ≥ 5.11)
speaks the whole family and prints JSON with ``-j``. The JSON shapes below follow iproute2's
``dcb/dcb_{pfc,ets,app,buffer}.c`` (6.1, Debian 12): ``dcb_print_named_array`` opens a JSON *array*
named after the field and prints one value per priority/TC, so::

    dcb -j pfc show dev X     {"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":[false,...,true,...]}
    dcb -j ets show dev X     {"willing":false,"ets_cap":8,"cbs":false,"tc_bw":[..8],"pg_bw":[..8],
                               "tc_tsa":["ets"|"strict"|"cbs"|"vendor",..8],"prio_tc":[..8],
                               "reco_tc_bw":[..],"reco_tc_tsa":[..],"reco_prio_tc":[..]}
    dcb -j app show dev X     {"dscp_prio":[[26,3],[48,6]], "default_prio":[0], ...}  ({} when empty)
    dcb -j buffer show dev X  {"prio_buffer":[..8],"buffer_size":[..8 bytes],"total_size":bytes}

A device without DCB ops makes ``dcb`` print ``Attribute read: Operation not supported`` and exit 1;
that (and EPERM) is absence with a reason, never an error. :func:`dcb_json` is the writer of these
shapes: the emulated fabric, the lab and the tests render captures with it, and
:class:`CapturedDcbReader` reads them from ``<root>/dcb/<netdev>/<object>.json``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from netd.errors import SourceError
from netd.sources.ethtool_read import invalid_netdev_name
from netd.sources.sysfs_io import read_text

__all__ = [
    "DCB_OBJECTS",
    "CapturedDcbReader",
    "CommandDcbReader",
    "DcbRead",
    "DcbReader",
    "capture_dir",
    "dcb_json",
    "make_dcb_reader",
    "write_capture",
]

_SOURCE = "dcb"
DCB_OBJECTS = ("pfc", "ets", "app", "buffer")
TSA_NAMES = ("strict", "cbs", "ets", "vendor")  # IEEE_8021QAZ_TSA_* order, dcb_ets.c tsa_names[]
_PRIOS = 8


@dataclass(frozen=True, slots=True)
class DcbRead:
    """What ``dcb`` answered for one netdev: object name -> its JSON; and why any object is missing."""

    objects: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)


class DcbReader(Protocol):
    def read(self, netdev: str) -> DcbRead: ...


def _why_absent(stderr: str) -> str | None:
    """The reason ``dcb`` could not read an object when it is absence, not failure (else None)."""
    text = stderr.strip()
    if "Operation not supported" in text:
        return "no DCB support on the interface (EOPNOTSUPP)"
    if "Operation not permitted" in text or "Permission denied" in text:
        return "no permission (dcbnl needs CAP_NET_ADMIN on some drivers)"
    if "No such device" in text or "Cannot find device" in text or "not a valid ifname" in text:
        return "no such interface"
    if "Attribute not found" in text:
        return "the driver does not report this object"
    return None


def _parse(obj: str, text: str, where: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SourceError(_SOURCE, f"{where}: `dcb -j {obj} show` output is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SourceError(_SOURCE, f"{where}: `dcb -j {obj} show` output is not a JSON object")
    return doc


class CommandDcbReader:
    """Runs ``dcb -j <object> show dev <netdev>`` for each object (a netlink round trip each)."""

    def __init__(self, dcb_path: str = "dcb", timeout_s: float = 2.0) -> None:
        self.path = shutil.which(dcb_path) or dcb_path
        self.timeout_s = timeout_s

    def read(self, netdev: str) -> DcbRead:
        why = invalid_netdev_name(netdev)
        if why is not None:
            return DcbRead(missing=dict.fromkeys(DCB_OBJECTS, why))
        objects: dict[str, Mapping[str, Any]] = {}
        missing: dict[str, str] = {}
        for obj in DCB_OBJECTS:
            try:
                run = subprocess.run(
                    [self.path, "-j", obj, "show", "dev", netdev],
                    capture_output=True,
                    text=True,
                    timeout=self.timeout_s,
                )
            except FileNotFoundError:
                return DcbRead(
                    missing=dict.fromkeys(DCB_OBJECTS, f"{self.path} not found (install iproute2)")
                )
            except (subprocess.TimeoutExpired, OSError) as exc:
                raise SourceError(_SOURCE, f"dcb {obj} show dev {netdev}: {exc}") from exc
            if run.returncode != 0:
                reason = _why_absent(run.stderr)
                if reason is None:
                    raise SourceError(_SOURCE, f"dcb {obj} show dev {netdev} failed: {run.stderr.strip()}")
                missing[obj] = reason
                continue
            objects[obj] = _parse(obj, run.stdout, f"dcb {obj} show dev {netdev}")
        return DcbRead(objects, missing)


def capture_dir(root: Path, netdev: str) -> Path:
    return Path(root) / "dcb" / netdev


class CapturedDcbReader:
    """``<root>/dcb/<netdev>/<object>.json`` files holding ``dcb -j <object> show dev <netdev>`` output
    (a captured host, the emulated fabric, the lab). A missing file is that object's absence."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def read(self, netdev: str) -> DcbRead:
        if invalid_netdev_name(netdev) is not None:
            return DcbRead(missing=dict.fromkeys(DCB_OBJECTS, "not a valid interface name"))
        objects: dict[str, Mapping[str, Any]] = {}
        missing: dict[str, str] = {}
        base = capture_dir(self.root, netdev)
        for obj in DCB_OBJECTS:
            path = base / f"{obj}.json"
            text = read_text(path, _SOURCE)
            if text is None:
                missing[obj] = f"no capture {path}"
            else:
                objects[obj] = _parse(obj, text, str(path))
        return DcbRead(objects, missing)


def make_dcb_reader(backend: str, sysfs_root: Path, dcb_path: str = "dcb") -> DcbReader:
    """``command`` (the running kernel), ``files`` (captures under ``sysfs_root``), or ``auto``: the
    command exactly when ``sysfs_root`` is the real ``/sys`` (as :func:`netd.sources.ethtool.make_reader`)."""
    if backend == "auto":
        backend = "command" if Path(sysfs_root).resolve() == Path("/sys") else "files"
    if backend == "command":
        return CommandDcbReader(dcb_path)
    if backend == "files":
        return CapturedDcbReader(sysfs_root)
    raise ValueError(f"dcb backend must be one of auto, command, files; got {backend!r}")


# -- the writer: the exact shapes dcb -j prints -----------------------------------------------------


def _eight(values: Iterable[int], what: str) -> list[int]:
    out = [int(v) for v in values]
    if len(out) != _PRIOS:
        raise ValueError(f"{what}: expected 8 values, got {len(out)}")
    return out


def dcb_json(
    obj: str,
    *,
    pfc: Iterable[int] = (),
    pfc_delay: int = 0,
    prio_tc: Iterable[int] = (0,) * _PRIOS,
    tc_bw: Iterable[int] = (100, 0, 0, 0, 0, 0, 0, 0),
    tc_tsa: Iterable[str] = ("ets",) + ("strict",) * 7,
    dscp_prio: Mapping[int, int] | None = None,
    prio_buffer: Iterable[int] = (0,) * _PRIOS,
    buffer_size: Iterable[int] = (0,) * _PRIOS,
    total_size: int = 0,
) -> str:
    """One line of ``dcb -j <obj> show dev X`` output for the given state (key order as dcb prints it)."""
    doc: dict[str, Any]
    if obj == "pfc":
        enabled = set(pfc)
        doc = {
            "pfc_cap": _PRIOS,
            "macsec_bypass": False,
            "delay": int(pfc_delay),
            "prio_pfc": [p in enabled for p in range(_PRIOS)],
        }
    elif obj == "ets":
        tsa = list(tc_tsa)
        if len(tsa) != _PRIOS or any(t not in TSA_NAMES for t in tsa):
            raise ValueError(f"tc_tsa: expected 8 of {TSA_NAMES}, got {tsa}")
        bw = _eight(tc_bw, "tc_bw")
        doc = {
            "willing": False,
            "ets_cap": _PRIOS,
            "cbs": False,
            "tc_bw": bw,
            "pg_bw": bw,
            "tc_tsa": tsa,
            "prio_tc": _eight(prio_tc, "prio_tc"),
            "reco_tc_bw": [0] * _PRIOS,
            "reco_tc_tsa": ["strict"] * _PRIOS,
            "reco_prio_tc": [0] * _PRIOS,
        }
    elif obj == "app":
        # dcb sorts the table and prints a selector's array only when it has entries.
        doc = {"dscp_prio": [[d, p] for d, p in sorted(dscp_prio.items())]} if dscp_prio else {}
    elif obj == "buffer":
        doc = {
            "prio_buffer": _eight(prio_buffer, "prio_buffer"),
            "buffer_size": _eight(buffer_size, "buffer_size"),
            "total_size": int(total_size),
        }
    else:
        raise ValueError(f"unknown dcb object {obj!r}; one of {DCB_OBJECTS}")
    return json.dumps(doc, separators=(",", ":")) + "\n"


def write_capture(root: Path, netdev: str, obj: str, text: str) -> Path:
    """Replace one capture atomically, so a reader in another process never parses half of one."""
    directory = capture_dir(root, netdev)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{obj}.json"
    tmp = directory / f".{obj}.json.tmp"
    tmp.write_text(text)
    tmp.replace(path)
    return path
