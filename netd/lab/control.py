"""The lab daemon's control socket: one JSON object per line each way, over ``<lab>/labd.sock``.

Requests: ``{"op": "ping"}``, ``{"op": "stats", "hist": bool, "qdisc": bool, "ports": [ids] | null}``
(``hist``: queue histograms and ingress contributions; ``qdisc``: the TBFs' own counters, drops),
``{"op": "configure", "ports": [ids] | null, "kmin": ..., "kmax": ..., "pmax": ..., "xoff": ...,
"xon": ..., "mark": bool}``, ``{"op": "shape", "ports": [ids], "mbps": rate | null}`` (a switch port's
egress rate; null restores it), ``{"op": "publish"}`` (render host counters now). Answers carry
``"ok": true`` or ``"ok": false, "error": "..."``.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from netd.errors import LabError

__all__ = ["SOCKET_NAME", "LabClient"]

SOCKET_NAME = "labd.sock"


class LabClient:
    def __init__(self, state_dir: Path, timeout_s: float = 5.0) -> None:
        self.path = state_dir / SOCKET_NAME
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout_s)
            try:
                s.connect(str(self.path))
            except OSError as exc:
                s.close()
                raise LabError(
                    f"the lab daemon does not answer on {self.path} ({exc.strerror or exc}); "
                    "see `netd lab status`, or `netd lab down` and `up` again"
                ) from None
            self._sock = s
        return self._sock

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        s = self._connect()
        try:
            s.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            while b"\n" not in self._buf:
                chunk = s.recv(1 << 16)
                if not chunk:
                    raise LabError("the lab daemon closed the control connection")
                self._buf += chunk
        except OSError as exc:
            self.close()
            raise LabError(f"lab daemon request {op!r} failed: {exc}") from None
        line, _, self._buf = self._buf.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise LabError(f"lab daemon: {answer.get('error', 'request failed')}")
        return answer

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.request("ping")
                return
            except LabError:
                self.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""

    def __enter__(self) -> LabClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
