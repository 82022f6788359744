"""Each RoCE port's QoS as the NIC applies it: DCB (trust, DSCP→priority, PFC, ETS, buffers), ECN and
DCQCN enablement per priority, MTU, RoCE mode and GID index, the congestion-control algorithm and its
DCQCN parameters.

Where each value comes from (roots injected; nothing here reads the global config):

* ``dcb -j {pfc,ets,app,buffer} show`` (or captures of it): :mod:`netd.sources.qos_dcb`.
* trust: MLNX_OFED's ``class/net/<netdev>/qos/trust`` when present; else the APP table, because
  upstream mlx5 switches the port to DSCP trust when the first DSCP APP entry is added and back to PCP
  when the last is deleted (mlx5e_dcbnl_ieee_setapp/delapp), so "has DSCP entries" *is* the trust state.
* ECN (notification point) and DCQCN (reaction point) per priority: MLNX_OFED's
  ``class/net/<netdev>/ecn/roce_np/enable/<p>`` and ``roce_rp/enable/<p>`` (reference §5); upstream
  kernels have no per-priority switch, so these are absent there.
* MTU: ``class/net/<netdev>/mtu``. RoCE mode: configfs ``rdma_cm/<dev>/ports/<p>/default_roce_mode``
  (what ``cma_roce_mode`` sets). GID index: the first RoCE v2 GID of an IPv4 address (the index NCCL and
  perftest must use).
* DCQCN parameters: :mod:`netd.sources.cc_params` (debugfs or OFED), per RDMA device.

A value that cannot be read is absent and ``missing`` says why; nothing is guessed. A port whose ``dcb``
answer is an error (not an absence: EIO, a corrupt capture) gets its DCB settings marked with the error
and the read goes on; :attr:`QosSource.errors` lists them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netd.errors import NetdError, SourceError
from netd.sources.cc_params import ParamTree, discover
from netd.sources.ethtool_read import invalid_netdev_name
from netd.sources.gids import read_gids
from netd.sources.qos_dcb import DCB_OBJECTS, DcbReader
from netd.sources.sysfs_io import list_dir, read_text

__all__ = ["PortQos", "QosSource", "port_qos_from_dcb"]

_SOURCE = "qos"
_V4_MAPPED = "0000:0000:0000:0000:0000:ffff:"


def _prios(values: tuple[int, ...] | None) -> str | None:
    if values is None:
        return None
    return ",".join(str(p) for p in sorted(values)) or "none"


def _row(values: tuple[Any, ...] | None) -> str | None:
    return None if values is None else ",".join(str(v) for v in values)


@dataclass(frozen=True, slots=True)
class PortQos:
    """One port's QoS. ``None`` is "could not be read" (``missing`` says why), never a default."""

    device: str
    port: int
    netdev: str | None
    trust: str | None = None  # "dscp" or "pcp"
    dscp_prio: tuple[tuple[int, int], ...] | None = None  # APP table (dscp, priority), sorted
    pfc: tuple[int, ...] | None = None  # priorities with PFC on
    pfc_delay: int | None = None  # bit times of headroom (dcb pfc delay)
    prio_tc: tuple[int, ...] | None = None  # 8: priority -> traffic class
    tc_bw: tuple[int, ...] | None = None  # 8: percent per TC
    tc_tsa: tuple[str, ...] | None = None  # 8: "ets", "strict", ...
    prio_buffer: tuple[int, ...] | None = None  # 8: priority -> receive buffer
    buffer_size: tuple[int, ...] | None = None  # 8: bytes per buffer
    ecn: tuple[int, ...] | None = None  # priorities where the NIC answers CE marks with CNPs
    dcqcn: tuple[int, ...] | None = None  # priorities where the NIC cuts its rate on CNPs
    mtu: int | None = None
    roce_mode: str | None = None  # "RoCE v2" or "IB/RoCE v1" (rdma_cm default)
    gid_index: int | None = None
    cc_algorithm: str | None = None  # "dcqcn" or "none"
    dcqcn_params: Mapping[str, int] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)  # setting -> why it is absent

    def settings(self) -> dict[str, str]:
        """Every present setting as one canonical text (what the fabric compares and exports)."""
        values: dict[str, str | None] = {
            "trust": self.trust,
            "dscp_prio": None
            if self.dscp_prio is None
            else (" ".join(f"{d}:{p}" for d, p in self.dscp_prio) or "none"),
            "pfc": _prios(self.pfc),
            "prio_tc": _row(self.prio_tc),
            "tc_bw": _row(self.tc_bw),
            "tc_tsa": _row(self.tc_tsa),
            "prio_buffer": _row(self.prio_buffer),
            "ecn": _prios(self.ecn),
            "dcqcn": _prios(self.dcqcn),
            "mtu": None if self.mtu is None else str(self.mtu),
            "roce_mode": self.roce_mode,
            "gid_index": None if self.gid_index is None else str(self.gid_index),
            "cc_algorithm": self.cc_algorithm,
        }
        out = {k: v for k, v in values.items() if v is not None}
        out.update({f"dcqcn.{k}": str(v) for k, v in sorted(self.dcqcn_params.items())})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "port": self.port,
            "netdev": self.netdev,
            "settings": self.settings(),
            "pfc_delay": self.pfc_delay,
            "buffer_size": None if self.buffer_size is None else list(self.buffer_size),
            "missing": dict(self.missing),
        }


def _ints(doc: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    values = doc.get(key)
    if not isinstance(values, list) or len(values) != 8 or not all(isinstance(v, int) for v in values):
        raise SourceError("dcb", f"{where}: {key!r} is not 8 integers: {values!r}")
    return tuple(values)


def port_qos_from_dcb(objects: Mapping[str, Mapping[str, Any]], netdev: str) -> dict[str, Any]:
    """The PortQos fields ``dcb -j`` output gives (absent objects give nothing)."""
    out: dict[str, Any] = {}
    pfc = objects.get("pfc")
    if pfc is not None:
        flags = pfc.get("prio_pfc")
        if not isinstance(flags, list) or len(flags) != 8 or not all(isinstance(f, bool) for f in flags):
            raise SourceError("dcb", f"pfc of {netdev}: 'prio_pfc' is not 8 booleans: {flags!r}")
        out["pfc"] = tuple(p for p, on in enumerate(flags) if on)
        delay = pfc.get("delay")
        out["pfc_delay"] = delay if isinstance(delay, int) else None
    ets = objects.get("ets")
    if ets is not None:
        out["prio_tc"] = _ints(ets, "prio_tc", f"ets of {netdev}")
        out["tc_bw"] = _ints(ets, "tc_bw", f"ets of {netdev}")
        tsa = ets.get("tc_tsa")
        if not isinstance(tsa, list) or len(tsa) != 8:
            raise SourceError("dcb", f"ets of {netdev}: 'tc_tsa' is not 8 names: {tsa!r}")
        out["tc_tsa"] = tuple(str(t) for t in tsa)
    app = objects.get("app")
    if app is not None:
        pairs = app.get("dscp_prio", [])
        try:
            table = tuple(sorted((int(d), int(p)) for d, p in pairs))
        except (TypeError, ValueError):
            raise SourceError("dcb", f"app of {netdev}: 'dscp_prio' is not [dscp, prio] pairs") from None
        out["dscp_prio"] = table
        out["trust"] = "dscp" if table else "pcp"
    buf = objects.get("buffer")
    if buf is not None:
        out["prio_buffer"] = _ints(buf, "prio_buffer", f"buffer of {netdev}")
        out["buffer_size"] = _ints(buf, "buffer_size", f"buffer of {netdev}")
    return out


class QosSource:
    """Reads every RDMA port's QoS under ``sysfs_root`` (``debugfs_root``/``configfs_root`` default to
    ``<sysfs_root>/kernel/debug`` and ``<sysfs_root>/kernel/config``, where they are mounted on a host)."""

    def __init__(
        self,
        sysfs_root: Path,
        dcb: DcbReader,
        *,
        debugfs_root: Path | None = None,
        configfs_root: Path | None = None,
        include: tuple[str, ...] = ("*",),
        exclude: tuple[str, ...] = (),
    ) -> None:
        self.sysfs_root = Path(sysfs_root)
        self.dcb = dcb
        self.debugfs_root = debugfs_root or self.sysfs_root / "kernel" / "debug"
        self.configfs_root = configfs_root or self.sysfs_root / "kernel" / "config"
        self.include, self.exclude = include, exclude
        self.errors: list[str] = []  # failures (not absences) of the last read, one per port

    def _wanted(self, device: str) -> bool:
        return any(fnmatch.fnmatch(device, p) for p in self.include) and not any(
            fnmatch.fnmatch(device, p) for p in self.exclude
        )

    def read(self) -> tuple[PortQos, ...]:
        """Every port; the errors of this read (not absences) are in :attr:`errors` afterwards."""
        self.errors = []
        trees, _ = discover(self.sysfs_root, self.debugfs_root, self.include, self.exclude)
        params = {t.device: t for t in trees}
        out = []
        for device in list_dir(self.sysfs_root / "class" / "infiniband", _SOURCE):
            if not self._wanted(device):
                continue
            ports = list_dir(self.sysfs_root / "class" / "infiniband" / device / "ports", _SOURCE)
            for port in sorted(int(p) for p in ports if p.isdigit()):
                out.append(self.read_port(device, port, params.get(device)))
        return tuple(out)

    def read_port(self, device: str, port: int, tree: ParamTree | None) -> PortQos:
        missing: dict[str, str] = {}
        gids = read_gids(self.sysfs_root, device, port)
        netdev = next((g.netdev for g in gids if g.netdev), None) or self._first_netdev(device)
        fields: dict[str, Any] = {}
        bad_name = None if netdev is None else invalid_netdev_name(netdev)
        if netdev is None:
            missing["dcb"] = "the RDMA port has no netdev (not RoCE)"
        elif bad_name is not None:  # a hostile tree must not steer reads out of class/net/
            missing["dcb"] = bad_name
        else:
            try:
                read = self.dcb.read(netdev)
                fields.update(port_qos_from_dcb(read.objects, netdev))
            except SourceError as exc:
                # One port's bad dcb answer must not hide the other ports or this port's other settings.
                self.errors.append(str(exc))
                missing.update(dict.fromkeys(DCB_OBJECTS, f"error: {exc}"))
            else:
                missing.update(read.missing)
            fields.update(self._netdev_files(netdev, missing))
        v4 = [g.index for g in gids if g.gid.startswith(_V4_MAPPED)]
        fields["gid_index"] = v4[0] if v4 else None
        if not v4:
            missing["gid_index"] = "no RoCE v2 GID of an IPv4 address"
        mode_file = self.configfs_root / "rdma_cm" / device / "ports" / str(port) / "default_roce_mode"
        fields["roce_mode"] = read_text(mode_file, _SOURCE)
        if fields["roce_mode"] is None:
            missing["roce_mode"] = f"no {mode_file} (configfs not mounted, or rdma_cm/{device} not created)"
        params: dict[str, int] = {}
        if tree is not None:
            try:
                params = tree.read()
            except NetdError as exc:
                missing["dcqcn_params"] = str(exc)
        else:
            missing["dcqcn_params"] = "no DCQCN parameter tree (debugfs cc_params or OFED ecn/)"
        dcqcn = fields.get("dcqcn")
        if dcqcn is not None:
            fields["cc_algorithm"] = "dcqcn" if dcqcn else "none"
        elif tree is not None:
            fields["cc_algorithm"] = "dcqcn"  # upstream: firmware DCQCN, no per-priority switch exposed
        return PortQos(device, port, netdev, dcqcn_params=params, missing=missing, **fields)

    def _first_netdev(self, device: str) -> str | None:
        nets = list_dir(self.sysfs_root / "class" / "infiniband" / device / "device" / "net", _SOURCE)
        return nets[0] if nets else None

    def _netdev_files(self, netdev: str, missing: dict[str, str]) -> dict[str, Any]:
        net = self.sysfs_root / "class" / "net" / netdev
        out: dict[str, Any] = {}
        mtu = read_text(net / "mtu", _SOURCE)
        out["mtu"] = int(mtu) if mtu and mtu.isdigit() else None
        trust = read_text(net / "qos" / "trust", _SOURCE)  # MLNX_OFED only
        if trust in ("pcp", "dscp"):
            out["trust"] = trust
        if (net / "ecn" / "roce_np").is_dir():
            try:
                enabled = ParamTree("", "ofed", net / "ecn", None, netdev).enabled_priorities() or {}
            except NetdError as exc:
                missing["ecn"] = missing["dcqcn"] = str(exc)
            else:
                out["ecn"], out["dcqcn"] = enabled.get("roce_np", ()), enabled.get("roce_rp", ())
        else:
            missing["ecn"] = missing["dcqcn"] = (
                f"no {net}/ecn/roce_np (per-priority ECN is MLNX_OFED/DOCA only)"
            )
        return out
