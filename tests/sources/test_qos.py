"""The QoS source over trees written by the real tree writers: every value, and every absence with its
reason."""

from __future__ import annotations

from pathlib import Path

from cc.model.params import DcqcnParams
from netd.emulated.cc_params import render as render_cc_params
from netd.emulated.qos_state import render_qos
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.sources.qos import QosSource
from netd.sources.qos_dcb import CapturedDcbReader, write_capture
from netd.vocabulary.qos_settings import QOS_SETTINGS, is_setting


def _host(root: Path) -> SysfsTree:
    tree = SysfsTree(root)
    tree.add_device(DeviceSpec(name="mlx5_0", netdev="ens1f0np0", pci="0000:41:00.0"))
    return tree


def test_a_fully_configured_port(tmp_path: Path) -> None:
    with _host(tmp_path) as _:
        render_qos(tmp_path, [("mlx5_0", "ens1f0np0")])
        render_cc_params(tmp_path, "0000:41:00.0", DcqcnParams())
        (port,) = QosSource(tmp_path, CapturedDcbReader(tmp_path)).read()
    assert port.missing == {}
    s = port.settings()
    assert {k: s[k] for k in QOS_SETTINGS} == {
        "trust": "dscp",
        "dscp_prio": "26:3 48:6",
        "pfc": "3",
        "prio_tc": "0,0,0,1,0,0,2,0",
        "tc_bw": "50,50,0,0,0,0,0,0",
        "tc_tsa": "ets,ets,strict,strict,strict,strict,strict,strict",
        "prio_buffer": "0,0,0,1,0,0,0,0",
        "ecn": "3",
        "dcqcn": "3",
        "mtu": "4200",
        "roce_mode": "RoCE v2",
        "gid_index": "3",  # the tree writer's slots: 0/1 link-local v1/v2, 2/3 IPv4-mapped v1/v2
        "cc_algorithm": "dcqcn",
    }
    assert s["dcqcn.rp_ai_rate"] == "5" and s["dcqcn.np_cnp_dscp"] == "48"
    assert all(is_setting(k) for k in s)


def test_each_absence_carries_its_reason(tmp_path: Path) -> None:
    with _host(tmp_path) as _:
        (port,) = QosSource(tmp_path, CapturedDcbReader(tmp_path)).read()
    assert port.pfc is None and port.trust is None and port.roce_mode is None and port.ecn is None
    assert port.mtu == 4200
    assert set(port.missing) == {"pfc", "ets", "app", "buffer", "roce_mode", "ecn", "dcqcn", "dcqcn_params"}
    assert "MLNX_OFED" in port.missing["ecn"]
    assert "rdma_cm/mlx5_0" in port.missing["roce_mode"]
    assert "pfc" not in port.settings()  # absent, never a default


def test_dcqcn_off_on_every_priority_is_algorithm_none(tmp_path: Path) -> None:
    with _host(tmp_path) as _:
        render_qos(tmp_path, [("mlx5_0", "ens1f0np0")], ("dcqcn_off",))
        (port,) = QosSource(tmp_path, CapturedDcbReader(tmp_path)).read()
    assert port.dcqcn == () and port.settings()["dcqcn"] == "none" and port.cc_algorithm == "none"


def test_ofed_trust_file_wins_over_the_app_table(tmp_path: Path) -> None:
    with _host(tmp_path) as _:
        render_qos(tmp_path, [("mlx5_0", "ens1f0np0")])
        (tmp_path / "class" / "net" / "ens1f0np0" / "qos").mkdir()
        (tmp_path / "class" / "net" / "ens1f0np0" / "qos" / "trust").write_text("pcp\n")
        (port,) = QosSource(tmp_path, CapturedDcbReader(tmp_path)).read()
    assert port.trust == "pcp" and port.dscp_prio == ((26, 3), (48, 6))


def test_a_corrupt_capture_is_an_error_on_that_port_only(tmp_path: Path) -> None:
    with SysfsTree(tmp_path) as tree:
        for fn in range(2):
            tree.add_device(DeviceSpec(name=f"mlx5_{fn}", netdev=f"ens1f{fn}np{fn}", pci=f"0000:41:00.{fn}"))
        render_qos(tmp_path, [("mlx5_0", "ens1f0np0"), ("mlx5_1", "ens1f1np1")])
        write_capture(tmp_path, "ens1f0np0", "pfc", '{"prio_pfc": [true, false]}\n')
        source = QosSource(tmp_path, CapturedDcbReader(tmp_path))
        bad, good = source.read()
    assert len(source.errors) == 1 and "prio_pfc" in source.errors[0]
    assert (
        bad.pfc is None
        and bad.trust is None
        and bad.missing["pfc"].startswith("error: dcb: pfc of ens1f0np0")
    )
    assert bad.mtu == 4200 and bad.ecn == (3,)  # the port's other settings are still read
    assert good.pfc == (3,) and good.missing == {}


def test_excluded_devices_are_not_read(tmp_path: Path) -> None:
    with _host(tmp_path) as _:
        assert QosSource(tmp_path, CapturedDcbReader(tmp_path), exclude=("mlx5_*",)).read() == ()


def test_netd_check_says_what_was_read_and_why_the_rest_was_not(tmp_path: Path) -> None:
    from netd.config.settings import load_config
    from netd.qos.checks import qos_check

    with _host(tmp_path) as _:
        write_capture(
            tmp_path,
            "ens1f0np0",
            "pfc",
            '{"pfc_cap":8,"macsec_bypass":false,"delay":0,"prio_pfc":'
            "[false,false,false,true,false,false,false,false]}\n",
        )
        lines, failed = qos_check(load_config(environ={}), tmp_path)
    assert not failed
    assert lines[0] == ("ok", "qos mlx5_0/1", "read gid_index, mtu, pfc")
    absent = {detail for status, _, detail in lines if status == "absent"}
    assert f"app: no capture {tmp_path}/dcb/ens1f0np0/app.json" in absent
    assert any(d.startswith("dcqcn, ecn: no ") and "MLNX_OFED" in d for d in absent)
    empty, _ = qos_check(load_config(environ={}), tmp_path / "nothing")
    assert empty == [("absent", "qos", f"no RDMA ports under {tmp_path / 'nothing'}: no QoS to read")]


def test_a_hostile_netdev_name_in_the_gid_table_reads_nothing_outside_class_net(tmp_path: Path) -> None:
    with _host(tmp_path) as tree:
        render_qos(tmp_path, [("mlx5_0", "ens1f0np0")])
        ndevs = tree.port_dir("mlx5_0", 1) / "gid_attrs" / "ndevs"
        for slot in ndevs.iterdir():
            slot.write_text("../../..\n")
        (port,) = QosSource(tmp_path, CapturedDcbReader(tmp_path)).read()
    assert port.netdev == "../../.." and port.mtu is None and port.pfc is None
    assert "not a valid Linux interface name" in port.missing["dcb"]
