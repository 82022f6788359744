"""Topologies for the adapter's tests, built from PortPlacement values as the topology layer makes them."""

from __future__ import annotations

from netd.model.topology import PortPlacement, Switch, Topology


def fabric(
    hosts: dict[str, list[tuple[str | None, int | None]]], uplinks: dict[str, tuple[str, ...]]
) -> Topology:
    """``hosts``: host -> [(tor, rail) per port]; ``uplinks``: ToR -> spines."""
    ports = [
        PortPlacement(
            host=h, device=f"mlx5_{i}", port=1, netdev=f"eth{i}", state="ACTIVE", rail=rail, tor=tor
        )
        for h, placed in hosts.items()
        for i, (tor, rail) in enumerate(placed)
    ]
    spines = sorted({s for ss in uplinks.values() for s in ss})
    return Topology(
        generated_at=0.0,
        hosts=tuple(sorted(hosts)),
        ports=tuple(ports),
        tors={t: Switch(t, "tor", spines=s) for t, s in uplinks.items()},
        spines={s: Switch(s, "spine") for s in spines},
    )
