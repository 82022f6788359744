"""What `netd check` says about QoS: per port, which settings could be read and, for the rest, why not
(no DCB support on the interface, no permission, no MLNX_OFED tree, configfs not mounted, ...)."""

from __future__ import annotations

from pathlib import Path

from netd.config.settings import Config
from netd.errors import NetdError
from netd.qos.service import build_source

__all__ = ["qos_check"]


def qos_check(cfg: Config, sysfs_root: Path) -> tuple[list[tuple[str, str, str]], bool]:
    """(status, what, detail) lines and whether the read *failed* (absence is not failure)."""
    if not cfg.qos.enabled:
        return [("info", "qos", "[qos] enabled = false")], False
    try:
        ports = build_source(cfg, sysfs_root).read()
    except NetdError as exc:
        return [("FAIL", "qos", str(exc))], True
    if not ports:
        return [("absent", "qos", f"no RDMA ports under {sysfs_root}: no QoS to read")], False
    lines: list[tuple[str, str, str]] = []
    for p in ports:
        what = f"qos {p.device}/{p.port}"
        read = sorted(p.settings())
        shown = [s for s in read if not s.startswith("dcqcn.")]
        knobs = len(read) - len(shown)
        lines.append(
            (
                "ok",
                what,
                f"read {', '.join(shown) or 'nothing'}" + (f" + {knobs} DCQCN parameters" if knobs else ""),
            )
        )
        reasons: dict[str, list[str]] = {}
        for setting, why in sorted(p.missing.items()):
            reasons.setdefault(why, []).append(setting)
        for why, settings in reasons.items():
            lines.append(("absent", what, f"{', '.join(settings)}: {why}"))
    return lines, False
