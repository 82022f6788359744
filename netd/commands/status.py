"""`netd status`: where the status document comes from.

In order:

1. ``--sysfs-root DIR`` given: read that tree directly (two samples ``--interval`` apart).
2. A netd daemon answers at the listen address: show what it sees (``GET /v1/ports``), which is
   also how a newcomer sees the emulated fabric that `netd run` started.
3. RDMA devices exist under /sys: read them directly, as in 1.
4. Otherwise: say how to get data (start the daemon), and exit 2.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from netd.api.client import daemon_get
from netd.api.views import status_document
from netd.config.settings import Config
from netd.emulated.fabric_host import emulated_host_of
from netd.errors import DaemonUnreachable, NetdError
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler
from netd.sources.sysfs_io import list_dir

__all__ = ["collect_locally", "fetch_from_daemon", "status_source"]


def fetch_from_daemon(listen: str, timeout_s: float = 2.0) -> dict[str, Any]:
    # any failure, a daemon that has not ticked yet included, means "ask someone else": see status_source
    doc: dict[str, Any] = daemon_get(
        listen,
        "/v1/ports",
        timeout_s=timeout_s,
        status_hints={503: "try again in a second"},
        status_error=DaemonUnreachable,
    ).json()
    return doc


def collect_locally(cfg: Config, root: Path, interval_s: float) -> dict[str, Any]:
    host = emulated_host_of(root)
    collector = Sampler.from_config(cfg, root, host=host, emulated=host is not None)
    try:
        tracker = SeriesTracker()
        tracker.update(collector.collect())
        time.sleep(interval_s)
        return status_document(tracker.update(collector.collect()))
    finally:
        collector.close()


def status_source(cfg: Config, sysfs_root: Path | None, interval_s: float) -> dict[str, Any]:
    if sysfs_root is not None:
        return collect_locally(cfg, sysfs_root, interval_s)
    try:
        return fetch_from_daemon(cfg.listen)
    except DaemonUnreachable as exc:
        reason = str(exc)
    if list_dir(cfg.sysfs_root / "class" / "infiniband"):
        return collect_locally(cfg, cfg.sysfs_root, interval_s)
    raise NetdError(
        f"{reason}, and no RDMA devices in {cfg.sysfs_root}/class/infiniband.\n"
        "Start the daemon first (`make run` or `netd run`): on a host without RDMA NICs it runs the "
        "emulated fabric.\nOr read a captured tree with `netd status --sysfs-root DIR`."
    )
