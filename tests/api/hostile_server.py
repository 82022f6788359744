"""A netd listener in its own process for the hostile-client tests, so its descriptors and memory
can be read from /proc/<pid> apart from the clients': the real app (create_app, with the NCCL pin
routes and the extender over a synthetic 5000-node cluster), the real Server, the real socket.

``python -m tests.api.hostile_server PORT MAX_CONNECTIONS HEAD_TIMEOUT_S BODY_TIMEOUT_S``; prints
``ready`` once listening. The API token is ``s3cret``.
"""

from __future__ import annotations

import sys

import uvicorn

from netd.api.app import create_app
from netd.api.connections import ConnectionLimits
from netd.api.server import Server, bind
from netd.bench.api import SyntheticCluster
from netd.nccl.pins import PinAuthority
from netd.nccl.routes import nccl_router

TOKEN = "s3cret"


def main(argv: list[str]) -> int:
    port, max_conn, head_s, body_s = int(argv[0]), int(argv[1]), float(argv[2]), float(argv[3])
    view = SyntheticCluster(5000, rails=1)
    pins = nccl_router(token=TOKEN, authority=PinAuthority(window_s=0.5))
    app = create_app(lambda: None, lambda: None, 1.0, view=view, routers=[pins])
    sock = bind("127.0.0.1", port)
    limits = ConnectionLimits(max_connections=max_conn, head_timeout_s=head_s, body_timeout_s=body_s)
    server = Server(uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off"), limits)
    print("ready", flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
