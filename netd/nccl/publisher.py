"""This host's current hint table, computed from the daemon's latest state when someone asks.

The policy runs at most once per tick, lazily: a communicator's init or a ``GET /v1/nccl/table``
triggers it; an idle daemon pays nothing. The table's ``generated_at`` is the *snapshot's* wall
time, so a daemon whose loop stalled hands out a table that the plugin judges stale (against the
pin time) rather than one that merely looks fresh.
"""

from __future__ import annotations

import socket
import threading
import zlib
from collections.abc import Callable

from cc.model.params import DcqcnParams
from netd.daemon.state import PublishedState
from netd.nccl.conditions import link_conditions
from netd.nccl.policy import ModelParams, PolicyResult, build_table
from netd.nccl.table import pack_table

__all__ = ["HintPublisher", "host_id"]


def host_id(name: str) -> int:
    """The table header's informative ``producer``: a stable 64-bit id of the host name."""
    data = name.encode()
    return zlib.crc32(data) << 32 | zlib.adler32(data)


class HintPublisher:
    def __init__(
        self,
        state: Callable[[], PublishedState | None],
        valid_for_s: float,
        params: ModelParams | None = None,
        dcqcn: DcqcnParams | None = None,
    ) -> None:
        self._state = state
        self.valid_for_ms = int(valid_for_s * 1000)
        self.params = params or ModelParams()
        self.dcqcn = dcqcn or DcqcnParams()
        self._lock = threading.Lock()
        self._key: tuple[int, float] | None = None
        self._result: PolicyResult | None = None
        self._bytes: bytes | None = None

    def current(self) -> tuple[PolicyResult, bytes] | None:
        """The latest result and its packed bytes, or None before the first tick."""
        st = self._state()
        if st is None:
            return None
        snap = st.observation.snapshot
        key = (st.ticks, snap.monotonic)
        with self._lock:
            if key != self._key or self._result is None or self._bytes is None:
                host = snap.host or socket.gethostname()
                self._result = build_table(
                    link_conditions(st.observation, self.dcqcn),
                    int(snap.timestamp * 1e9),
                    self.valid_for_ms,
                    self.params,
                    host_id(host),
                )
                self._bytes = pack_table(self._result.table)
                self._key = key
            return self._result, self._bytes

    def table_bytes(self) -> bytes | None:
        current = self.current()
        return None if current is None else current[1]
