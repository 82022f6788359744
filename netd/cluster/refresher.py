"""netd fabric's view process: ``python -m netd.cluster.refresher FD``, started by the listener
(netd.cluster.remote.RemoteFabricView) with its end of a socket pair. It reads its setup from the
socket (``{"cluster": ..., "congestion": ..., "log_level": ...}``: the configuration's two sections),
refreshes a :class:`~netd.cluster.view.FabricView` every ``cluster.refresh_interval`` and sends each
result, until the listener closes the socket."""

from __future__ import annotations

import logging
import signal
import socket
import sys
from typing import Any

from netd.cluster.remote import publish, read_setup
from netd.cluster.view import FabricView
from netd.config.service import ClusterConfig, CongestionConfig
from netd.congestion.host import scorer_from_config

__all__ = ["main", "setup"]


def setup(cluster: ClusterConfig, congestion: CongestionConfig) -> dict[str, Any]:
    """What the listener sends a new view process."""
    return {
        "cluster": cluster.model_dump(mode="json"),
        "congestion": congestion.model_dump(mode="json"),
        "log_level": logging.getLogger().getEffectiveLevel(),
    }


def main(fd: int) -> int:
    # Ctrl-C reaches the whole process group; the listener decides when this process stops (it
    # leaves when its socket closes), so an interrupt prints no traceback here
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    try:
        given = read_setup(sock)
    except (EOFError, OSError):
        return 0  # the listener went before it said anything
    logging.basicConfig(
        level=given["log_level"], format="%(asctime)s %(levelname)s %(name)s (fabric view): %(message)s"
    )
    cfg = ClusterConfig.model_validate(given["cluster"])
    view = FabricView(cfg, scorer_from_config(CongestionConfig.model_validate(given["congestion"])))
    try:
        publish(view, sock, cfg.refresh_interval)
    finally:
        view.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
