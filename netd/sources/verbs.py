"""Port attributes through verbs (pyverbs), where rdma-core is present.

Optional: it gives the same facts as sysfs (state, speed, width, link layer,
GID table) through ``ibv_query_port``/``ibv_query_gid_table``, so the two can
be checked against each other. Debian's ``python3-pyverbs`` provides it. A
host without RDMA makes ``get_device_list()`` raise ``PyverbsRDMAError``
("Failed to get devices list"); that is "no devices", reported once in the
log, never an error on every tick.

The device boundary is :class:`VerbsDevice`; the default lister opens each
device with pyverbs, and tests pass a small stand-in. Turning the raw verbs
numbers into names is this module's job and is the same for both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["VerbsDevice", "VerbsGid", "VerbsPort", "VerbsSource", "port_from_attrs"]

log = logging.getLogger(__name__)

# enum ibv_port_state, with the names the kernel's sysfs `state` file prints.
_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
# Physical port states as sysfs `phys_state` prints them (IBA PortInfo PortPhysicalState).
_PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}
# ibv_port_attr.active_speed -> (name, Gb/s per lane) as sysfs `rate` computes it (FDR 14, EDR 25).
_SPEEDS = {
    1: ("SDR", 2.5),
    2: ("DDR", 5.0),
    4: ("QDR", 10.0),
    8: ("FDR10", 10.0),
    16: ("FDR", 14.0),
    32: ("EDR", 25.0),
    64: ("HDR", 50.0),
    128: ("NDR", 100.0),
    256: ("XDR", 200.0),
}
# ibv_port_attr.active_width -> lanes.
_WIDTHS = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
_LINK_LAYERS = {1: "InfiniBand", 2: "Ethernet"}  # 0 = unspecified: old IB-only drivers
# ibv_gid_entry.gid_type (IBV_GID_TYPE_IB, _ROCE_V1, _ROCE_V2) -> the sysfs gid_attrs/types text,
# where the kernel prints IB and RoCE v1 alike ("IB/RoCE v1": one enum value in the kernel).
_GID_TYPES = {0: "IB/RoCE v1", 1: "IB/RoCE v1", 2: "RoCE v2"}
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


class PortAttrs(Protocol):
    """The fields of pyverbs ``PortAttr`` that netd uses (raw verbs numbers)."""

    state: int
    phys_state: int
    active_speed: int
    active_width: int
    link_layer: int
    gid_tbl_len: int


class VerbsDevice(Protocol):
    """One open verbs device."""

    name: str

    def port_numbers(self) -> Sequence[int]: ...
    def query_port(self, port: int) -> PortAttrs: ...
    def gids(self, port: int) -> Sequence[tuple[int, str, int]]:  # (index, gid text, ibv gid type)
        ...
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class VerbsGid:
    index: int
    gid: str  # "fe80:0000:...", as sysfs prints it
    type: str  # "IB/RoCE v1" or "RoCE v2"


@dataclass(frozen=True, slots=True)
class VerbsPort:
    device: str
    port: int
    state: str  # "ACTIVE", as sysfs `state` names it
    phys_state: str | None  # "LinkUp"
    active_speed: str | None  # "NDR"
    active_width: str | None  # "2X"
    rate_gbps: float | None  # lanes x lane rate: agrees with sysfs `rate`
    link_layer: str | None  # "Ethernet" or "InfiniBand"
    gid_tbl_len: int
    gids: tuple[VerbsGid, ...] = ()


def port_from_attrs(
    device: str, port: int, attrs: PortAttrs, gids: Sequence[tuple[int, str, int]]
) -> VerbsPort:
    """Name the raw verbs numbers of one port."""
    speed = _SPEEDS.get(attrs.active_speed)
    lanes = _WIDTHS.get(attrs.active_width)
    return VerbsPort(
        device=device,
        port=port,
        state=_STATES.get(attrs.state, f"UNKNOWN({attrs.state})"),
        phys_state=_PHYS_STATES.get(attrs.phys_state),
        active_speed=speed[0] if speed else None,
        active_width=f"{lanes}X" if lanes else None,
        rate_gbps=speed[1] * lanes if speed and lanes else None,
        link_layer=_LINK_LAYERS.get(attrs.link_layer),
        gid_tbl_len=attrs.gid_tbl_len,
        gids=tuple(
            VerbsGid(index, gid, _GID_TYPES.get(gid_type, f"type {gid_type}"))
            for index, gid, gid_type in sorted(gids)
            if gid != _ZERO_GID  # unused slots read as the all-zero GID
        ),
    )


class _PyverbsDevice:
    """A pyverbs ``Context`` behind the :class:`VerbsDevice` protocol."""

    def __init__(self, name: str) -> None:
        from pyverbs.device import Context

        self.name = name
        self._ctx = Context(name=name)
        self._ports = range(1, self._ctx.query_device().phys_port_cnt + 1)
        self._table: list[object] | None = None

    def port_numbers(self) -> Sequence[int]:
        return self._ports

    def query_port(self, port: int) -> PortAttrs:
        attrs: PortAttrs = self._ctx.query_port(port)
        return attrs

    def gids(self, port: int) -> Sequence[tuple[int, str, int]]:
        if self._table is None:
            total = sum(self.query_port(p).gid_tbl_len for p in self._ports)
            self._table = list(self._ctx.query_gid_table(total))  # valid entries only
        out = []
        for e in self._table:
            if e.port_num == port:  # type: ignore[attr-defined]
                text = e.gid_str() if callable(e.gid_str) else e.gid_str  # type: ignore[attr-defined]
                out.append((e.gid_index, str(text), e.gid_type))  # type: ignore[attr-defined]
        return out

    def close(self) -> None:
        self._ctx.close()


def _pyverbs_devices() -> list[VerbsDevice]:
    """Open every verbs device; ImportError when pyverbs is missing; [] when there are none."""
    from pyverbs.device import get_device_list
    from pyverbs.pyverbs_error import PyverbsRDMAError

    try:
        found = get_device_list()
    except PyverbsRDMAError:  # ibv_get_device_list() returned NULL: no RDMA stack or no devices
        return []
    return [_PyverbsDevice(d.name.decode() if isinstance(d.name, bytes) else str(d.name)) for d in found]


class VerbsSource:
    """Reads every port of every verbs device; quiet and empty where there are none."""

    def __init__(self, device_lister: Callable[[], Sequence[VerbsDevice]] | None = None) -> None:
        self._lister = device_lister or _pyverbs_devices
        self._reported: str | None = None

    def available(self) -> tuple[bool, str]:
        """(True, what was found) or (False, why not)."""
        try:
            devices = self._lister()
        except ImportError as exc:
            return self._report(False, f"pyverbs not importable ({exc}); install python3-pyverbs")
        except Exception as exc:  # pyverbs errors opening a device: say so, do not raise
            return self._report(False, f"verbs device list failed: {exc}")
        names = [d.name for d in devices]
        for d in devices:
            d.close()
        if not names:
            return self._report(False, "no RDMA devices (verbs found none)")
        return self._report(True, f"{len(names)} RDMA device(s): {', '.join(names)}")

    def read(self) -> tuple[VerbsPort, ...]:
        """Every port's attributes; () when verbs is unavailable. A failing device is skipped."""
        try:
            devices = self._lister()
        except Exception:  # ImportError or the device list failing: available() says why
            return ()
        out: list[VerbsPort] = []
        for dev in devices:
            try:
                out.extend(
                    [port_from_attrs(dev.name, p, dev.query_port(p), dev.gids(p)) for p in dev.port_numbers()]
                )
            except Exception as exc:  # a device removed mid-query: skip it this time
                log.warning("verbs: %s: %s", dev.name, exc)
            finally:
                dev.close()
        return tuple(out)

    def _report(self, ok: bool, reason: str) -> tuple[bool, str]:
        if reason != self._reported:  # log each new situation once, not every call
            log.info("verbs source: %s", reason)
            self._reported = reason
        return ok, reason
