"""PFC state: which (link, priority) is paused, and when each upstream learns of it.

A switch decides per ingress (link, priority) from its buffer occupancy: XOFF above ``xoff``, XON
again below ``xon`` (hysteresis). The PAUSE or resume frame crosses the link back to the upstream,
so the upstream's egress queue (or NIC) obeys the decision ``key_delay_steps`` later. A ring of
decisions, written every step while any pause is live, gives each upstream the decision made one
link delay ago; when nothing has been paused for a full ring, the ring is known to be clear and the
whole mechanism costs nothing per step.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from cc.sim.network import Network

__all__ = ["PfcState"]

Bools = NDArray[np.bool_]


class PfcState:
    def __init__(self, net: Network, batch: int) -> None:
        keys = net.K + 1
        self.depth = int(net.key_delay_steps.max()) + 1
        self.paused = np.zeros((batch, keys), dtype=bool)  # the downstream's current decision
        self.ring = np.zeros((self.depth, batch, keys), dtype=bool)
        self.live = 0  # steps until the ring is certainly clear again
        slot = (np.arange(self.depth)[:, None] + net.key_delay_steps[None, :]) % self.depth
        cells = np.arange(batch)[:, None] * keys + np.arange(keys)[None, :]
        self._index = slot[:, None, :] * (batch * keys) + cells[None]

    def seen(self, t: int) -> Bools | None:
        """Keys whose upstream is paused during step ``t`` (None: none anywhere)."""
        if not self.live:
            return None
        current = self.ring[t % self.depth]
        return current.copy() if current.any() else None

    def decide(self, t: int, paused: Bools) -> None:
        """Record step ``t``'s decisions; they reach each upstream one link delay later."""
        engaged = bool(paused.any())
        if engaged or self.live:
            self.ring.reshape(-1)[self._index[t % self.depth]] = paused
            self.live = self.depth if engaged else self.live - 1
        self.paused = paused
