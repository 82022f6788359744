"""The switch's shared packet buffer and its dynamic thresholds.

Commodity switch ASICs (Broadcom Trident/Tomahawk, NVIDIA Spectrum) do not give each port a fixed
slice: a switch has one shared pool (12-64 MB on current parts), and a queue may grow while it holds
less than ``alpha`` times the pool's free space (Choudhury and Hahne, "Dynamic queue length
thresholds for shared-memory packet switches", IEEE/ACM ToN 1998). For a lossless priority the queue
is the ingress priority group: crossing the threshold sends XOFF, and the PFC headroom above it is
reserved per ingress outside the pool. SONiC's lossless profiles set ``dynamic_th`` 0, i.e.
``alpha = 2**0 = 1`` (sonic-buildimage ``pg_lossless_*_profile``; its dynamic-buffer design). With N
ingresses congested at once each gets ``alpha B / (1 + N alpha)``, so a 32:1 incast fills a 32 MB
switch to ~31 MB instead of 32 fixed 4 MB thresholds (128 MB, more than any switch has).

The static ``xoff_bytes`` of the parameters still caps a lone ingress; XON keeps its ratio to XOFF,
so the hysteresis scales with the threshold. Lossy queues are egress queues: they tail-drop above
the same dynamic share of their switch's free pool (or ``lossy_buffer_bytes``, whichever is lower).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from cc.sim.network import Network

__all__ = ["SharedBuffer"]

Floats = NDArray[np.float64]


class SharedBuffer:
    """One pool per switch; ``free`` from the bytes every ingress holds, thresholds from ``free``."""

    def __init__(self, net: Network, batch: int) -> None:
        config = net.config
        self.pool, self.alpha = config.switch_buffer_bytes, config.dynamic_threshold
        switches = max(1, net.topology.n_nodes - net.topology.n_ports)
        self.n_switches = switches
        ingress, egress = net.key_ingress_switch, net.key_egress_switch
        self.counted = np.flatnonzero(ingress >= 0)  # keys whose bytes sit in a switch's pool
        self.counted_switch = ingress[self.counted]
        rows = np.arange(batch)[:, None] * switches
        self._bins = (rows + self.counted_switch[None, :]).ravel()
        self._batch = batch
        # keys outside any switch read a column of +inf: no dynamic limit there
        self.ingress_col = np.where(ingress >= 0, ingress, switches)
        self._egress_col = np.where(egress >= 0, egress, switches)

    def _share(self, occupancy: Floats) -> Floats:
        """``alpha`` x each switch's free pool, ``(batch, switches + 1)``, the last column inf."""
        held = occupancy[:, self.counted].ravel()
        used = np.bincount(self._bins, held, minlength=self._batch * self.n_switches)
        free = np.maximum(self.pool - used.reshape(self._batch, self.n_switches), 0.0)
        share = np.empty((self._batch, self.n_switches + 1))
        share[:, :-1] = self.alpha * free
        share[:, -1] = np.inf
        return share

    def ingress_limit(self, occupancy: Floats) -> Floats:
        """The dynamic threshold of each ingress key, ``(batch, keys)``, given what every ingress holds."""
        return self._share(occupancy).take(self.ingress_col, axis=1)

    def egress_limit(self, occupancy: Floats) -> Floats:
        """The same for the switch each egress key leaves from."""
        return self._share(occupancy).take(self._egress_col, axis=1)

    def lower_bound(self, total_bytes: float) -> float:
        """A threshold no key falls below while the bytes held anywhere total at most ``total_bytes``."""
        return self.alpha * max(self.pool - total_bytes, 0.0)
