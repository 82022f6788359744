"""The `ethtool -S` name set of an mlx5 netdev, in driver order.

Used to render realistic captures for the emulated fabric and the collection
benchmark. The order and the per-priority groups follow
``drivers/net/ethernet/mellanox/mlx5/core/en_stats.c`` (see
shared/reference/rdma-counters-dcqcn.md §3 and §8): PFC pause names exist only
for priorities with PFC enabled, which is why the name count changes when an
operator enables PFC on another priority.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["mlx5_ethtool_names"]

_HEAD = (
    "rx_out_of_buffer rx_if_down_packets rx_vport_rdma_unicast_packets rx_vport_rdma_unicast_bytes "
    "tx_vport_rdma_unicast_packets tx_vport_rdma_unicast_bytes tx_packets_phy rx_packets_phy "
    "rx_crc_errors_phy tx_bytes_phy rx_bytes_phy rx_symbol_err_phy rx_pause_ctrl_phy tx_pause_ctrl_phy "
    "rx_discards_phy tx_discards_phy tx_errors_phy link_down_events_phy rx_pcs_symbol_err_phy "
    "rx_corrected_bits_phy rx_buffer_passed_thres_phy rx_pci_signal_integrity tx_pci_signal_integrity "
    "outbound_pci_buffer_overflow outbound_pci_stalled_rd outbound_pci_stalled_wr "
    "outbound_pci_stalled_rd_events outbound_pci_stalled_wr_events"
).split()

_PRIO_TRAFFIC = (
    "rx_prio{p}_bytes",
    "rx_prio{p}_packets",
    "rx_prio{p}_discards",
    "tx_prio{p}_bytes",
    "tx_prio{p}_packets",
)
_PRIO_PFC = (
    "rx_prio{p}_pause",
    "rx_prio{p}_pause_duration",
    "tx_prio{p}_pause",
    "tx_prio{p}_pause_duration",
    "rx_prio{p}_pause_transition",
)
_STORM = ("tx_pause_storm_warning_events", "tx_pause_storm_error_events")
_GLOBAL_PAUSE = (
    "rx_global_pause",
    "rx_global_pause_duration",
    "tx_global_pause",
    "tx_global_pause_duration",
    "rx_global_pause_transition",
)
_PRIO_BUFFER = ("rx_prio{p}_buf_discard", "rx_prio{p}_cong_discard", "rx_prio{p}_marked")
# A taste of the per-ring software counters that make real captures long.
_RING = (
    "rx{r}_packets",
    "rx{r}_bytes",
    "rx{r}_csum_complete",
    "tx{r}_packets",
    "tx{r}_bytes",
    "ch{r}_poll",
    "ch{r}_arm",
    "ch{r}_events",
)


def mlx5_ethtool_names(
    pfc_priorities: Iterable[int] = (3,),
    rings: int = 8,
    *,
    global_pause: bool = False,
    storm_trailing_space: bool = False,
) -> list[str]:
    """All stat names of one mlx5 netdev with PFC enabled on ``pfc_priorities``.

    ``global_pause``: 802.3x pause configured instead of (or beside) PFC. ``storm_trailing_space``:
    older kernels printed the storm names with a trailing space (fixed upstream later).
    """
    prios = sorted(set(pfc_priorities))
    names = list(_HEAD)
    names += [n.format(p=p) for p in range(8) for n in _PRIO_TRAFFIC]
    names += [n.format(p=p) for p in prios for n in _PRIO_PFC]
    if global_pause:
        names += _GLOBAL_PAUSE
    # The stall (storm) counters depend on device caps (PCAM pfcc_mask, stall_detect), not on PFC state.
    names += [name + (" " if storm_trailing_space else "") for name in _STORM]
    names += [n.format(p=p) for p in range(8) for n in _PRIO_BUFFER]
    names += [n.format(r=r) for r in range(rings) for n in _RING]
    return names
