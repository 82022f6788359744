"""Building the daemon's detection for `netd run` (the composition root calls :func:`build_detection`):
which PFC reader the fast path gets, netlink link events where the kernel knows the netdevs, and the
start-up warnings about a fast-path cadence that would take no sample between ticks."""

from __future__ import annotations

import logging
from pathlib import Path

from netd.config.detect import DetectConfig
from netd.config.settings import Config
from netd.detect.fast_wait import before_tick
from netd.detect.service import Detection, pfc_reader
from netd.errors import SourceError
from netd.sources.collect import Sampler
from netd.sources.netlink_events import LinkMonitor

__all__ = ["build_detection", "fast_path_gaps"]

log = logging.getLogger("netd.anomalies")


def build_detection(
    cfg: Config, collector: Sampler, emulated: bool, longest_tick_s: float | None = None
) -> Detection | None:
    """Detection for the daemon: the fast path reads through the collector's own ethtool source (same
    thread, same descriptors); netlink link events only on a real /sys (emulated and captured hosts
    have netdev names the kernel does not know). ``longest_tick_s``: the longest time between two
    ticks (the calm cadence's, netd.daemon.cadence); default ``interval``."""
    d = cfg.detect
    if not d.enabled:
        return None
    longest = max(cfg.interval, longest_tick_s or 0.0)
    if d.max_gap < 3 * longest:  # a slow daemon (interval = 10 s) must still judge its own ticks
        d = d.model_copy(update={"max_gap": 3 * longest})
    source = collector.ethtool
    reader = probe = None
    if d.fast_interval > 0 and source is not None:
        reader, probe = pfc_reader(source), pfc_reader(source, recheck_names=False)
        for problem in fast_path_gaps(d, cfg.interval):
            log.warning("%s", problem)
    links = None
    if d.netlink and not emulated and cfg.sysfs_root.resolve() == Path("/sys"):
        links = LinkMonitor(cfg.sysfs_root)
        try:
            links.start()
        except SourceError as exc:
            log.warning("%s; carrier losses will be seen through counters only", exc)
            links = None
    return Detection(d, collector.host, reader, links, pfc_probe=probe, tick_interval_s=cfg.interval)


def fast_path_gaps(d: DetectConfig, tick_s: float) -> list[str]:
    """What in ``[detect]`` leaves the fast path without a sample between two ticks: the loop takes a
    sample only when it falls at least half an interval before the next tick (the last slot is the
    tick's), so an interval shorter than the tick's but over two thirds of it takes none, and the PFC
    detectors see one sample a tick, whatever the configuration says. (An interval no shorter than
    the tick's asks for nothing the ticks do not give.)"""
    most = round(tick_s * 2 / 3, 3)
    out = []
    for key, value in (("fast_interval", d.fast_interval), ("fast_calm_interval", d.fast_calm_interval)):
        # the first slot after a tick, one interval on: taken only if it falls before the next tick
        samples = before_tick(value, tick_s, value)
        if tick_s > value and not samples and (key == "fast_interval" or value > d.fast_interval):
            out.append(
                f"[detect] {key} = {value:g} s takes no fast-path sample between ticks every {tick_s:g} s "
                f"(a sample must fall at least half an interval before the next tick); use at most {most:g} s"
            )
    return out
