"""RdmaSysfs against real temporary trees written by SysfsTree (no mocks)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.model.snapshot import CounterGroup, Overflow, PortSample
from netd.sources.counter_specs import COUNTER_SETS, describe
from netd.sources.counter_tables import PMA_EXT
from netd.sources.rdma import RdmaSysfs, parse_counter, parse_rate, parse_state

MLX5_0 = DeviceSpec("mlx5_0", netdev="ens1f0np0", pci="0000:41:00.0")
MLX5_1 = DeviceSpec("mlx5_1", netdev="ens1f1np1", pci="0000:41:00.1")


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[SysfsTree]:
    with SysfsTree(tmp_path) as t:
        yield t


@pytest.fixture
def source(tree: SysfsTree) -> Iterator[RdmaSysfs]:
    src = RdmaSysfs(tree.root, max_open=1000)  # every file kept: descriptor reuse is observable
    yield src
    src.close()


def _port(samples: tuple[PortSample, ...], device: str, port: int = 1) -> PortSample:
    found = [s for s in samples if s.key == (device, port)]
    assert len(found) == 1, f"{device}/{port} in {[s.key for s in samples]}"
    return found[0]


def _distinct_values(tree: SysfsTree, device: str, port: int = 1) -> dict[str, int]:
    """Different values, each within its register (a 4-bit PMA counter cannot read 1000)."""

    def fit(name: str, value: int) -> int:
        return min(value, (1 << PMA_EXT.width_of(name)) - 1) if name in PMA_EXT.names else value

    values = {name: fit(name, 1000 + i) for i, name in enumerate(tree.counter_names(device, port))}
    tree.set_counters(device, port, values)
    return values


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "value", "reason"),
    [
        (b"0\n", 0, None),
        (b"123456789\n", 123456789, None),
        (b"%d\n" % (2**64 - 1), 2**64 - 1, None),
        (b"42", 42, None),
        (b"17\n45\n", 17, None),  # in-place rewrite seen mid-way: the first line is the value
        (b"%d\n" % 2**64, None, "out of range"),
        (b"", None, "empty"),
        (b"\n", None, "empty"),
        (b"N/A (no PMA)\n", None, "not available: N/A (no PMA)"),
        (b"-5\n", None, "negative"),
        (b"abc\n", None, "not a number"),
        (b"+5\n", None, "not a number"),
        (b"1_000\n", None, "not a number"),
        (b"0x10\n", None, "not a number"),
        (b"\xff\xfe\n", None, "not a number"),
    ],
)
def test_parse_counter(data: bytes, value: int | None, reason: str | None) -> None:
    got_value, got_reason = parse_counter(data)
    assert got_value == value
    assert (got_reason is None) if reason is None else (got_reason is not None and reason in got_reason)


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("4: ACTIVE", "ACTIVE"),
        ("1: DOWN", "DOWN"),
        ("5: LinkUp", "LinkUp"),
        ("7: Phy Test", "Phy Test"),
        ("ACTIVE", "ACTIVE"),
        ("", None),
        (None, None),
    ],
)
def test_parse_state(text: str | None, state: str | None) -> None:
    assert parse_state(text) == state


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("200 Gb/sec (2X NDR)", 200.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("56 Gb/sec (4X FDR)", 56.0),
        ("garbage", None),
        ("", None),
        (None, None),
        # float() accepts these; a speed cannot be any of them
        ("inf Gb/sec", None),
        ("nan Gb/sec", None),
        ("-1 Gb/sec", None),
    ],
)
def test_parse_rate(text: str | None, rate: float | None) -> None:
    assert parse_rate(text) == rate


# -- complete and partial trees --------------------------------------------------------------


def test_complete_mlx5_tree(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    tree.add_device(MLX5_1)
    values = _distinct_values(tree, "mlx5_0")
    samples = source.read()
    assert [s.key for s in samples] == [("mlx5_0", 1), ("mlx5_1", 1)]
    p = _port(samples, "mlx5_0")
    assert (p.netdev, p.driver, p.link_layer, p.state, p.phys_state, p.rate_gbps, p.up) == (
        "ens1f0np0",
        "mlx5",
        "Ethernet",
        "ACTIVE",
        "LinkUp",
        200.0,
        True,
    )
    assert p.gid_types == ("IB/RoCE v1", "RoCE v2")
    assert p.read_errors == ()
    assert set(p.counters) == set(COUNTER_SETS["mlx5"].pma) | set(COUNTER_SETS["mlx5"].hw)
    for raw, counter in p.counters.items():
        group = CounterGroup.PMA if raw in COUNTER_SETS["mlx5"].pma else CounterGroup.HW
        spec = describe("mlx5", group, raw)
        assert (counter.name, counter.group, counter.width, counter.overflow) == (
            spec.name,
            group,
            spec.width,
            spec.overflow,
        )
        assert counter.value == values[raw] * spec.scale
    by_name = p.by_name()
    assert by_name["rx_bytes"].value == 4 * values["port_rcv_data"]  # 4-byte words -> bytes
    assert by_name["tx_bytes"].value == 4 * values["port_xmit_data"]
    assert by_name["ecn_marked"].raw_name == "np_ecn_marked_roce_packets"
    assert by_name["cnp_sent"].value == values["np_cnp_sent"]
    assert by_name["retransmits"].raw_name == "roce_adp_retrans"
    assert by_name["timeouts"].raw_name == "local_ack_timeout_err"
    assert by_name["seq_err"].raw_name == "packet_seq_err"
    assert by_name["out_of_sequence"].width == 32 and by_name["cnp_handled"].width == 64
    assert _port(samples, "mlx5_1").netdev == "ens1f1np1"
    assert source.files_read == 2 * (21 + 31)
    assert source.devices() == ["mlx5_0", "mlx5_1"]


@pytest.mark.parametrize(
    ("counter_set", "hw_level", "n_counters", "present", "absent"),
    [
        ("pma_only", "port", 21, {"rx_bytes", "symbol_error"}, {"ecn_marked", "cnp_sent"}),
        ("hw_only", "port", 31, {"ecn_marked", "cnp_sent"}, {"rx_bytes", "symbol_error"}),
        ("none", "port", 0, set(), {"rx_bytes", "ecn_marked"}),
        # hw_counters registered on the device (mlx5 switchdev): the single port's counters
        ("full", "device", 52, {"rx_bytes", "ecn_marked"}, set()),
    ],
)
def test_partial_trees(
    tree: SysfsTree,
    source: RdmaSysfs,
    counter_set: str,
    hw_level: str,
    n_counters: int,
    present: set[str],
    absent: set[str],
) -> None:
    tree.add_device(DeviceSpec("mlx5_0", counter_set=counter_set, hw_level=hw_level))
    p = _port(source.read(), "mlx5_0")
    assert len(p.counters) == n_counters and source.files_read == n_counters
    assert present <= set(p.by_name()) and not absent & set(p.by_name())
    assert (p.state, p.read_errors) == ("ACTIVE", ())


def test_device_level_hw_counters_are_not_shared_by_several_ports(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(DeviceSpec("mlx5_0", ports=2, hw_level="device"))
    samples = source.read()
    assert [len(s.counters) for s in samples] == [21, 21]


BNXT_OLD = DeviceSpec("bnxt_re0", "bnxt_re", "p0", "0000:61:00.0", counter_set="bnxt_re_old")
BNXT_NEW = DeviceSpec("bnxt_re1", "bnxt_re", "p1", "0000:61:00.1", counter_set="bnxt_re_new")
IRDMA_3 = DeviceSpec("irdma0", "irdma", "ens801f0", "0000:51:00.0", counter_set="irdma_gen3")
IRDMA_2 = DeviceSpec("irdma1", "irdma", "ens801f1", "0000:51:00.1", counter_set="irdma_gen2")
RXE = DeviceSpec("rxe0", driver="rxe", netdev="eth0", rate="10 Gb/sec (4X QDR)")
DCQCN = {"cnp_sent", "cnp_handled", "ecn_marked"}
VENDORS = [
    # (spec, driver, vocabulary names present, vocabulary names absent: absent, not zero)
    (
        BNXT_OLD,
        "bnxt_re",
        DCQCN | {"timeouts", "seq_err", "rnr", "rx_bytes", "tx_packets"},
        {"symbol_error", "retransmits"},
    ),
    (BNXT_NEW, "bnxt_re", DCQCN | {"timeouts", "seq_err", "rnr", "req_cqe_error"}, {"symbol_error"}),
    (
        IRDMA_3,
        "irdma",
        DCQCN | {"rnr", "seq_err", "timeouts", "icrc_errors", "rx_packets"},
        {"rx_bytes", "symbol_error"},
    ),
    (IRDMA_2, "irdma", DCQCN | {"cnp_ignored"}, {"rnr", "timeouts"}),
    (
        RXE,
        "rxe",
        {"rx_packets", "tx_packets", "seq_err", "retransmits", "out_of_sequence"},
        DCQCN | {"cnp_ignored", "rx_bytes"},
    ),
]


@pytest.mark.parametrize(("spec", "driver", "present", "absent"), VENDORS, ids=[v[0].name for v in VENDORS])
def test_vendor_variants(
    tree: SysfsTree, source: RdmaSysfs, spec: DeviceSpec, driver: str, present: set[str], absent: set[str]
) -> None:
    tree.add_device(spec)
    values = _distinct_values(tree, spec.name)
    p = _port(source.read(), spec.name)
    assert (p.driver, p.netdev, p.read_errors) == (driver, spec.netdev, ())
    assert set(p.counters) == set(COUNTER_SETS[spec.counter_set if spec.counter_set != "full" else "rxe"].hw)
    by_name = p.by_name()
    assert present <= set(by_name), present - set(by_name)
    assert not absent & set(by_name)
    for c in by_name.values():
        assert c.value == values[c.raw_name] and c.group is CounterGroup.HW and c.width == 64


def test_irdma_names_with_spaces(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(DeviceSpec("irdma0", driver="irdma", pci="0000:51:00.0", netdev="ens801f0"))
    tree.set_counters("irdma0", 1, {"RNR received": 11, "Nak Sequence Error Implied": 12})
    p = _port(source.read(), "irdma0")
    assert p.counters["RNR received"].name == "rnr" and p.counters["RNR received"].value == 11
    assert p.by_name()["implied_nak_seq_err"].value == 12


@pytest.mark.parametrize("name", ["rocep65s0f0", "mlx5_bond_0", "rdmap65s0f0"])
def test_device_naming(tree: SysfsTree, source: RdmaSysfs, name: str) -> None:
    tree.add_device(DeviceSpec(name))
    p = _port(source.read(), name)
    assert p.driver == "mlx5"  # from device/driver -> mlx5_core, whatever the name
    assert "cnp_sent" in p.by_name()


# -- hostile values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("abc\n", "not a number"),
        ("", "empty"),
        ("\n", "empty"),
        ("N/A (no PMA)\n", "not available"),
        ("-5\n", "negative"),
        (f"{2**64}\n", "out of range"),
        ("12 34\n", "not a number"),
    ],
)
@pytest.mark.parametrize(
    ("group", "raw", "vocab"),
    [("counters", "port_rcv_data", "rx_bytes"), ("hw_counters", "np_cnp_sent", "cnp_sent")],
)
def test_hostile_values_are_absent_with_a_reason(
    tree: SysfsTree, source: RdmaSysfs, text: str, reason: str, group: str, raw: str, vocab: str
) -> None:
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"np_ecn_marked_roce_packets": 9})
    tree.set_raw("mlx5_0", 1, group, raw, text)
    p = _port(source.read(), "mlx5_0")
    assert raw not in p.counters and vocab not in p.by_name()
    assert len(p.read_errors) == 1 and p.read_errors[0].startswith(f"{group}/{raw}: ")
    assert reason in p.read_errors[0]
    assert len(p.counters) == 51 and p.by_name()["ecn_marked"].value == 9  # the others are intact


@pytest.mark.parametrize(
    ("text", "reason"), [("inf", "not finite"), ("nan", "not finite"), ("-100", "negative")]
)
def test_hostile_rate_is_absent_with_a_reason(
    tree: SysfsTree, source: RdmaSysfs, text: str, reason: str
) -> None:
    tree.add_device(MLX5_0)
    (tree.port_dir("mlx5_0", 1) / "rate").write_text(f"{text} Gb/sec (4X HDR)\n")
    p = _port(source.read(), "mlx5_0")
    assert p.rate_gbps is None
    assert p.read_errors == (f"rate: {reason}",)
    assert len(p.counters) == 52  # the counters are intact


@pytest.mark.parametrize("max_open", [0, 1000])
def test_an_attribute_longer_than_a_counter_is_read_whole(tree: SysfsTree, max_open: int) -> None:
    """The attributes are read in the counters' batch, 64 bytes at a time; a longer one is read again."""
    tree.add_device(MLX5_0)
    long_state = "x" * 100
    (tree.port_dir("mlx5_0", 1) / "state").write_text(f"4: {long_state}\n")
    (tree.port_dir("mlx5_0", 1) / "rate").write_text("200 Gb/sec (2X NDR)" + " " * 80 + "\n")
    src = RdmaSysfs(tree.root, max_open=max_open)
    try:
        for _ in range(2):  # the first read and one with descriptors kept
            p = _port(src.read(), "mlx5_0")
            assert (p.state, p.rate_gbps, p.read_errors) == (long_state, 200.0, ())
    finally:
        src.close()


@pytest.mark.parametrize("max_open", [0, 1000])
def test_a_counter_read_as_last_time_keeps_its_reading_and_a_failure_is_named_every_time(
    tree: SysfsTree, max_open: int
) -> None:
    """Only files whose text changed are parsed again (the rest keep their very Counter), but a file
    that failed is judged, and named, at every read, and one longer than a read is read whole every
    time, so a change beyond the first 64 bytes is seen."""
    tree.add_device(MLX5_0)
    src = RdmaSysfs(tree.root, max_open=max_open)
    hw = CounterGroup.HW
    try:
        first = _port(src.read(), "mlx5_0")
        tree.set_raw("mlx5_0", 1, hw, "np_cnp_sent", "12\n")
        tree.set_raw("mlx5_0", 1, hw, "rp_cnp_handled", "garbage\n")
        second = _port(src.read(), "mlx5_0")
        assert second.counters["np_cnp_sent"].value == 12
        assert second.counters["out_of_buffer"] is first.counters["out_of_buffer"]  # same text
        for _ in range(2):  # the same bad text: named again, never a stale value
            p = _port(src.read(), "mlx5_0")
            assert "rp_cnp_handled" not in p.counters
            assert [e for e in p.read_errors if e.startswith("hw_counters/rp_cnp_handled")]
        tree.set_raw("mlx5_0", 1, hw, "rp_cnp_handled", "7\n")
        assert _port(src.read(), "mlx5_0").counters["rp_cnp_handled"].value == 7
        padded = "0" * 70  # 70 leading zeros: a valid reading longer than one 64-byte read
        for value in (5, 6, 6, 9):  # the first 64 bytes never change
            tree.set_raw("mlx5_0", 1, hw, "out_of_buffer", f"{padded}{value}\n")
            p = _port(src.read(), "mlx5_0")
            assert (p.counters["out_of_buffer"].value, p.read_errors) == (value, ())
    finally:
        src.close()


def _replace_with_dangling_symlink(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.parent / "no-such-file")


def _replace_with_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("replace", [_replace_with_dangling_symlink, _replace_with_directory])
def test_unreadable_counter_files_are_absent(tree: SysfsTree, source: RdmaSysfs, replace) -> None:  # type: ignore[no-untyped-def]
    tree.add_device(MLX5_0)
    replace(tree.port_dir("mlx5_0", 1) / "hw_counters" / "rp_cnp_handled")
    p = _port(source.read(), "mlx5_0")
    assert "cnp_handled" not in p.by_name() and len(p.counters) == 51
    assert len(p.read_errors) == 1 and p.read_errors[0].startswith("hw_counters/rp_cnp_handled: ")
    assert source.read()  # and again next tick, still without raising


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file anyway")
def test_permission_denied_is_absent(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    (tree.port_dir("mlx5_0", 1) / "counters" / "symbol_error").chmod(0)
    p = _port(source.read(), "mlx5_0")
    assert "symbol_error" not in p.counters
    assert p.read_errors == ("counters/symbol_error: unreadable",)


def test_a_bad_device_does_not_hide_the_others(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    tree.add_device(MLX5_1)
    link_layer = tree.port_dir("mlx5_0", 1) / "link_layer"
    link_layer.unlink()
    link_layer.mkdir()  # EISDIR is not "absent" under the errno policy: a real error
    samples = source.read()
    assert [s.device for s in samples] == ["mlx5_1"]
    assert len(source.errors) == 1 and source.errors[0].startswith("mlx5_0: ")


# -- widths and duplicates -------------------------------------------------------------------


def test_legacy_pma_saturates_and_a_wider_reading_widens(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(DeviceSpec("mlx5_0", counter_set="mlx5_legacy_pma"))
    tree.set_counters(
        "mlx5_0", 1, {"port_rcv_data": 2**32 - 1, "port_xmit_data": 2**32 + 5, "symbol_error": 65535}
    )
    p = _port(source.read(), "mlx5_0")
    rx, tx, sym = p.counters["port_rcv_data"], p.counters["port_xmit_data"], p.counters["symbol_error"]
    assert (rx.width, rx.overflow, rx.saturated, rx.value) == (32, Overflow.SATURATE, True, 4 * (2**32 - 1))
    # More than 32 bits cannot come from a 32-bit register: a "noietf" 64-bit PMA.
    assert (tx.width, tx.overflow, tx.saturated) == (64, Overflow.WRAP, False)
    assert (sym.width, sym.saturated) == (16, True)


def test_a_name_in_both_groups_keeps_both_readings(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"port_xmit_wait": 3})
    tree.set_raw("mlx5_0", 1, CounterGroup.HW, "port_xmit_wait", "7\n")
    p = _port(source.read(), "mlx5_0")
    assert p.counters["port_xmit_wait"].value == 3 and p.counters["port_xmit_wait"].group is CounterGroup.PMA
    assert p.counters["hw_counters/port_xmit_wait"].value == 7


# -- over time -------------------------------------------------------------------------------


def test_descriptors_are_reused_across_ticks(tree: SysfsTree) -> None:
    tree.add_device(MLX5_0)
    source = RdmaSysfs(tree.root, max_open=100)  # room for every file
    source.read(0.0)
    opens = source.opens
    assert opens == 52 + 3  # counters + state, phys_state, rate
    for tick in range(1, 4):
        tree.set_counters("mlx5_0", 1, {"np_cnp_sent": tick * 10})
        p = _port(source.read(float(tick)), "mlx5_0")
        assert p.by_name()["cnp_sent"].value == tick * 10
    assert source.opens == opens
    source.close()


def test_descriptors_beyond_the_budget_are_opened_and_closed(tree: SysfsTree) -> None:
    for spec in (MLX5_0, MLX5_1):
        tree.add_device(spec)
    source = RdmaSysfs(tree.root, max_open=20, max_dirs=0)  # files by full path past the budget
    for tick in range(3):
        tree.set_counters("mlx5_1", 1, {"np_cnp_sent": tick * 7})
        samples = source.read(float(tick))
        assert _port(samples, "mlx5_1").by_name()["cnp_sent"].value == tick * 7  # read past the budget
        assert len(_port(samples, "mlx5_1").counters) == 52
    assert source.open_descriptors == 20
    assert source.opens == 20 + 3 * (2 * 55 - 20)  # the kept ones once, the others every tick
    source.close()
    assert source.open_descriptors == 0


def test_files_past_the_budget_are_opened_through_kept_directories(tree: SysfsTree) -> None:
    for spec in (MLX5_0, MLX5_1):
        tree.add_device(spec)
    source = RdmaSysfs(tree.root, max_open=0, max_dirs=1)
    for tick in range(3):
        tree.set_counters("mlx5_0", 1, {"np_cnp_sent": tick * 3})
        tree.set_counters("mlx5_1", 1, {"np_cnp_sent": tick * 7})
        tree.set_port_state("mlx5_1", 1, "4: ACTIVE", "5: LinkUp")
        samples = source.read(float(tick))
        assert _port(samples, "mlx5_0").by_name()["cnp_sent"].value == tick * 3  # via a kept directory
        assert _port(samples, "mlx5_1").by_name()["cnp_sent"].value == tick * 7  # by full path
        assert [len(p.counters) for p in samples] == [52, 52]
        assert [(p.state, p.rate_gbps) for p in samples] == [("ACTIVE", 200.0)] * 2
    # mlx5_0's port directory serves its counters/, hw_counters/ and attributes: one descriptor a port
    assert source.open_descriptors == 1
    assert source.opens == 1 + 3 * 2 * 55  # the directory once, every file every tick
    source.close()
    assert source.open_descriptors == 0


def test_a_counter_going_backwards_is_reported_as_is(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"out_of_sequence": 2**32 - 2})
    assert _port(source.read(), "mlx5_0").counters["out_of_sequence"].value == 2**32 - 2
    tree.set_counters("mlx5_0", 1, {"out_of_sequence": 3})  # 32-bit q-counter wrapped (or reset)
    c = _port(source.read(), "mlx5_0").counters["out_of_sequence"]
    assert (c.value, c.width, c.overflow) == (3, 32, Overflow.WRAP)


def test_port_state_changes_are_seen_through_kept_descriptors(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    assert _port(source.read(), "mlx5_0").up
    tree.set_port_state("mlx5_0", 1, "1: DOWN", "3: Disabled")
    p = _port(source.read(), "mlx5_0")
    assert (p.state, p.phys_state, p.up) == ("DOWN", "Disabled", False)


def test_device_vanishes_and_returns(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    tree.add_device(MLX5_1)
    tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 100})
    assert _port(source.read(0.0), "mlx5_0").by_name()["cnp_sent"].value == 100
    opens = source.opens
    tree.remove_device("mlx5_0")
    assert [s.device for s in source.read(1.0)] == ["mlx5_1"]
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 5})
    p = _port(source.read(2.0), "mlx5_0")
    assert p.by_name()["cnp_sent"].value == 5 and p.netdev == "ens1f0np0"
    assert source.opens == opens + 52 + 3  # the returning device got new descriptors


def test_device_vanishing_mid_read_is_skipped_that_tick(
    tree: SysfsTree, source: RdmaSysfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree.add_device(MLX5_0)
    tree.add_device(MLX5_1)
    source.read(0.0)  # descriptors now open: they would still serve the removed files' old values
    read_port = RdmaSysfs._read_port

    def unplug_then_read(
        self: RdmaSysfs, device: str, driver: str | None, port: object, slow: bool
    ) -> PortSample:
        if device == "mlx5_0" and "mlx5_0" in tree.devices():
            tree.remove_device("mlx5_0")  # hot unplug between the stat and the reads
        return read_port(self, device, driver, port, slow)  # type: ignore[arg-type]

    monkeypatch.setattr(RdmaSysfs, "_read_port", unplug_then_read)
    assert [s.device for s in source.read(1.0)] == ["mlx5_1"]
    assert source.errors == ()
    monkeypatch.undo()
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"rp_cnp_handled": 77})
    assert _port(source.read(2.0), "mlx5_0").by_name()["cnp_handled"].value == 77


def test_listing_is_cached_until_the_rescan_interval(tree: SysfsTree) -> None:
    tree.add_device(MLX5_0)
    src = RdmaSysfs(tree.root, rescan_interval_s=30.0)
    try:
        src.read(0.0)
        tree.set_raw("mlx5_0", 1, "hw_counters", "new_counter", "5\n")
        assert "new_counter" not in _port(src.read(29.0), "mlx5_0").counters
        assert src.files_read == 52
        p = _port(src.read(30.0), "mlx5_0")
        assert p.counters["new_counter"].value == 5 and src.files_read == 53
    finally:
        src.close()


# -- selection and netdev mapping ------------------------------------------------------------


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (("*",), (), ["mlx5_0", "mlx5_1", "rxe0"]),
        (("mlx5_*",), (), ["mlx5_0", "mlx5_1"]),
        (("*",), ("rxe*",), ["mlx5_0", "mlx5_1"]),
        (("mlx5_*", "rxe0"), ("mlx5_1",), ["mlx5_0", "rxe0"]),
        (("nothing*",), (), []),
    ],
)
def test_include_exclude(
    tree: SysfsTree, include: tuple[str, ...], exclude: tuple[str, ...], expected: list[str]
) -> None:
    for spec in (MLX5_0, MLX5_1, DeviceSpec("rxe0", driver="rxe", netdev="eth0")):
        tree.add_device(spec)
    src = RdmaSysfs(tree.root, include=include, exclude=exclude)
    try:
        assert src.devices() == expected
        assert [s.device for s in src.read()] == expected
    finally:
        src.close()


def test_no_infiniband_class_at_all(tmp_path: Path) -> None:
    src = RdmaSysfs(tmp_path)
    assert (src.read(), src.devices(), src.files_read) == ((), [], 0)


def test_netdev_from_gid_ndevs_first(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(DeviceSpec("mlx5_bond_0"))
    # RoCE LAG: the GIDs belong to the bond, the PCI function's netdev is a slave.
    for i in range(4):
        (tree.port_dir("mlx5_bond_0", 1) / "gid_attrs" / "ndevs" / str(i)).write_text("bond0\n")
    assert _port(source.read(), "mlx5_bond_0").netdev == "bond0"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (DeviceSpec("mlx5_0", gids=0), {1: "ens1f0np0"}),  # device/net/<single entry>
        (DeviceSpec("mlx4_0", ports=2, netdev="eth1", gids=0), {1: "eth1", 2: "eth1p2"}),  # dev_port
        (DeviceSpec("rxe0", driver="rxe", netdev="enp0s3", gids=0), {1: "enp0s3"}),  # rxe `parent`
        (DeviceSpec("mlx5_0", netdev=None), {1: None}),
    ],
)
def test_netdev_fallbacks(
    tree: SysfsTree, source: RdmaSysfs, spec: DeviceSpec, expected: dict[int, str | None]
) -> None:
    tree.add_device(spec)
    samples = source.read()
    assert {s.port: s.netdev for s in samples} == expected
    if spec.gids == 0 or spec.netdev is None:
        assert all(s.gid_types == () for s in samples)


def test_replayed_file_replaced_by_rename_reads_its_new_value(tree: SysfsTree, source: RdmaSysfs) -> None:
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 10})
    assert _port(source.read(0.0), "mlx5_0").by_name()["cnp_sent"].value == 10
    path = tree.port_dir("mlx5_0", 1) / "hw_counters" / "np_cnp_sent"
    tmp = path.with_name(".np_cnp_sent.new")
    tmp.write_text("25\n")
    os.replace(tmp, path)  # a replayer swapping files: the kept descriptor reads the old inode
    p = _port(source.read(1.0), "mlx5_0")
    assert p.by_name()["cnp_sent"].value == 25 and p.read_errors == ()


def test_replayed_file_that_vanished_is_an_error_not_a_frozen_value(
    tree: SysfsTree, source: RdmaSysfs
) -> None:
    tree.add_device(MLX5_0)
    tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 10})
    assert _port(source.read(0.0), "mlx5_0").by_name()["cnp_sent"].value == 10
    (tree.port_dir("mlx5_0", 1) / "hw_counters" / "np_cnp_sent").unlink()
    for tick in (1.0, 2.0):
        p = _port(source.read(tick), "mlx5_0")
        assert "cnp_sent" not in p.by_name()
        assert p.read_errors == ("hw_counters/np_cnp_sent: unreadable",)


def test_the_directory_budget_covers_a_port_each(tree: SysfsTree) -> None:
    """Under the default budget (no file kept open, 24 directories) each port keeps one directory
    descriptor, for its counters/, hw_counters/ and attributes: 16 ports fit it."""
    specs = [DeviceSpec(f"mlx5_{i}", netdev=f"ens{i}np0", pci=f"0000:{0x41 + i:02x}:00.0") for i in range(16)]
    for spec in specs:
        tree.add_device(spec)
    source = RdmaSysfs(tree.root)
    for tick in range(2):
        assert [len(p.counters) for p in source.read(float(tick))] == [52] * 16
    assert source.open_descriptors == 16
    assert source.opens == 16 + 2 * 16 * 55  # the directories once, every file every tick
    source.close()
