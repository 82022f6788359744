"""NCCL environment recommendations from ports, PFC priorities and GID tables."""

from __future__ import annotations

import dataclasses

import pytest

from netd.model.topology import Gid
from netd.nccl.nccl_env import recommend, render
from netd.sources.gids import read_gids
from tests.nccl.hosts import host_state


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    root = tmp_path_factory.mktemp("env") / "sys"
    state = host_state(root, "hostA")
    gids = {(d, 1): read_gids(root, d, 1) for d in ("mlx5_0", "mlx5_1")}
    return state.observation, gids


def test_recommendations_from_the_sysfs_tree(host):
    obs, gids = host
    doc = recommend(obs, gids, "/run/netd/nccl.sock")
    env = doc["env"]
    assert env["NCCL_TUNER_PLUGIN"] == "netd" and env["NETD_TUNER_SOCKET"] == "/run/netd/nccl.sock"
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"
    # the tree writer puts RoCE v2 GIDs at odd slots, the IPv4-mapped one at slot 3
    v4 = [g for g in gids[("mlx5_0", 1)] if g.gid.startswith("0000:0000:0000:0000:0000:ffff:")]
    assert env["NCCL_IB_GID_INDEX"] == str(v4[0].index)
    assert env["NCCL_IB_SL"] == "3" and env["NCCL_IB_TC"] == str(26 << 2)  # PFC on priority 3
    assert env["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert all(d["reason"] for d in doc["details"])
    assert any("DSCP 26" in n for n in doc["notes"])


def test_gid_index_differing_between_ports_falls_back_to_address_family(host):
    obs, gids = host
    moved = dict(gids)
    moved[("mlx5_1", 1)] = tuple(dataclasses.replace(g, index=g.index + 4) for g in gids[("mlx5_1", 1)])
    doc = recommend(obs, moved, "/s")
    assert "NCCL_IB_GID_INDEX" not in doc["env"]
    assert doc["env"]["NCCL_IB_ADDR_FAMILY"] == "AF_INET" and doc["env"]["NCCL_IB_ROCE_VERSION_NUM"] == "2"
    assert any("differs between ports" in n for n in doc["notes"])


def test_ipv6_only_and_missing_gids(host):
    obs, gids = host
    v6 = {k: (Gid(5, "fd00:0000:0000:0000:0000:0000:0000:0001", "RoCE v2", "x"),) for k in gids}
    assert recommend(obs, v6, "/s")["env"]["NCCL_IB_ADDR_FAMILY"] == "AF_INET6"
    none = recommend(obs, {}, "/s")
    assert "NCCL_IB_GID_INDEX" not in none["env"]
    assert any("no RoCE v2 GID" in n for n in none["notes"])


def test_no_pfc_and_several_priorities(host):
    obs, gids = host

    def with_stats(stats: dict[str, int]):
        netdevs = {
            name: dataclasses.replace(view, sample=dataclasses.replace(view.sample, stats=stats))
            for name, view in obs.netdevs.items()
        }
        return dataclasses.replace(obs, netdevs=netdevs)

    lossy = recommend(with_stats({"rx_packets_phy": 1}), gids, "/s")
    assert "NCCL_IB_TC" not in lossy["env"] and any("no PFC-enabled priority" in n for n in lossy["notes"])
    two = {"rx_prio3_pause": 0, "tx_prio3_pause": 0, "rx_prio4_pause": 0, "tx_prio4_pause": 0}
    both = recommend(with_stats(two), gids, "/s")
    assert "NCCL_IB_TC" not in both["env"] and any("several PFC-enabled" in n for n in both["notes"])


def test_render_shell_and_conf(host):
    obs, gids = host
    doc = recommend(obs, gids, "/run/netd/nccl.sock")
    shell = render(doc, "shell")
    assert "export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\n" in shell and "export NETD_TUNER_SOCKET=" in shell
    conf = render(doc, "conf")
    assert "NCCL_IB_TC=104\n" in conf and "NETD_TUNER_SOCKET" not in conf and "export" not in conf
