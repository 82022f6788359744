"""The driver counter vocabulary: names, widths, overflow, scale, driver detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netd.model.snapshot import CounterGroup, Overflow
from netd.sources import counter_tables as tables
from netd.sources.counter_specs import (
    COUNTER_SETS,
    PMA_EXT_ONLY,
    VOCABULARY,
    CounterSpec,
    default_counter_set,
    describe,
    detect_driver,
)

PMA, HW = CounterGroup.PMA, CounterGroup.HW

# (driver, raw name, vocabulary name, width): the meanings other layers depend on.
HW_MEANINGS = [
    ("mlx5", "np_ecn_marked_roce_packets", "ecn_marked", 64),
    ("mlx5", "np_cnp_sent", "cnp_sent", 64),
    ("mlx5", "rp_cnp_handled", "cnp_handled", 64),
    ("mlx5", "rp_cnp_ignored", "cnp_ignored", 64),
    ("mlx5", "out_of_sequence", "out_of_sequence", 32),
    ("mlx5", "packet_seq_err", "seq_err", 32),
    ("mlx5", "implied_nak_seq_err", "implied_nak_seq_err", 32),
    ("mlx5", "roce_adp_retrans", "retransmits", 32),
    ("mlx5", "local_ack_timeout_err", "timeouts", 32),
    ("mlx5", "rnr_nak_retry_err", "rnr", 32),
    ("mlx5", "out_of_buffer", "out_of_buffer", 32),
    ("mlx5", "duplicate_request", "duplicate_request", 32),
    ("mlx5", "rx_icrc_encapsulated", "icrc_errors", 64),
    ("mlx5", "req_transport_retries_exceeded", "retries_exceeded", 32),
    ("mlx5", "req_cqe_error", "req_cqe_error", 32),
    ("mlx5", "resp_cqe_error", "resp_cqe_error", 32),
    ("mlx5", "rx_write_requests", "rx_write_requests", 32),
    ("mlx5", "vport_np_cnp_sent", "cnp_sent", 64),  # switchdev representor prefix
    ("bnxt_re", "to_retransmits", "timeouts", 64),
    ("bnxt_re", "local_ack_timeout_err", "timeouts", 64),
    ("bnxt_re", "seq_err_naks_rcvd", "seq_err", 64),
    ("bnxt_re", "packet_seq_err", "seq_err", 64),
    ("bnxt_re", "rnr_naks_rcvd", "rnr", 64),
    ("bnxt_re", "missing_resp", "implied_nak_seq_err", 64),
    ("bnxt_re", "max_retry_exceeded", "retries_exceeded", 64),
    ("bnxt_re", "tx_cnp_pkts", "cnp_sent", 64),
    ("bnxt_re", "np_cnp_pkts", "cnp_sent", 64),
    ("bnxt_re", "rx_cnp_pkts", "cnp_handled", 64),
    ("bnxt_re", "rp_cnp_handled", "cnp_handled", 64),
    ("bnxt_re", "rx_ecn_marked_pkts", "ecn_marked", 64),
    ("bnxt_re", "np_ecn_marked_roce_packets", "ecn_marked", 64),
    ("bnxt_re", "oos_drop_count", "out_of_sequence", 64),
    ("bnxt_re", "rx_out_of_buffer", "out_of_buffer", 64),
    ("bnxt_re", "rx_pkts", "rx_packets", 64),
    ("bnxt_re", "tx_bytes", "tx_bytes", 64),
    ("irdma", "cnpSent", "cnp_sent", 64),
    ("irdma", "cnpHandled", "cnp_handled", 64),
    ("irdma", "cnpIgnored", "cnp_ignored", 64),
    ("irdma", "RxECNMrkd", "ecn_marked", 64),
    ("irdma", "RNR received", "rnr", 64),
    ("irdma", "Nak Sequence Error", "seq_err", 64),
    ("irdma", "Nak Sequence Error Implied", "implied_nak_seq_err", 64),
    ("irdma", "RTO", "timeouts", 64),
    ("irdma", "Rcvd Out of order packets", "out_of_sequence", 64),
    ("irdma", "CRC errors", "icrc_errors", 64),
    ("irdma", "RNR sent", "RNR sent", 64),
    ("rxe", "sent_pkts", "tx_packets", 64),
    ("rxe", "rcvd_pkts", "rx_packets", 64),
    ("rxe", "rcvd_seq_err", "seq_err", 64),
    ("rxe", "rcvd_rnr_err", "rnr", 64),
    ("rxe", "out_of_seq_request", "out_of_sequence", 64),
    ("rxe", "completer_retry_err", "retransmits", 64),
    ("rxe", "retry_exceeded_err", "retries_exceeded", 64),
    # Unknown driver: the mlx5 meaning of a shared name, other families' unique names too.
    (None, "np_cnp_sent", "cnp_sent", 64),
    (None, "packet_seq_err", "seq_err", 32),
    (None, "cnpSent", "cnp_sent", 64),
]


@pytest.mark.parametrize(("driver", "raw", "name", "width"), HW_MEANINGS)
def test_hw_counter_meaning(driver: str | None, raw: str, name: str, width: int) -> None:
    assert describe(driver, HW, raw) == CounterSpec(name, width, Overflow.WRAP, 1)


# (raw, vocabulary name, width, overflow, scale) with the extended-width PMA group.
PMA_MEANINGS = [
    ("port_xmit_data", "tx_bytes", 64, Overflow.WRAP, 4),
    ("port_rcv_data", "rx_bytes", 64, Overflow.WRAP, 4),
    ("port_xmit_packets", "tx_packets", 64, Overflow.WRAP, 1),
    ("port_rcv_packets", "rx_packets", 64, Overflow.WRAP, 1),
    ("unicast_rcv_packets", "unicast_rcv_packets", 64, Overflow.WRAP, 1),
    ("port_xmit_wait", "port_xmit_wait", 32, Overflow.SATURATE, 1),
    ("symbol_error", "symbol_error", 16, Overflow.SATURATE, 1),
    ("link_downed", "link_downed", 8, Overflow.SATURATE, 1),
    ("link_error_recovery", "link_error_recovery", 8, Overflow.SATURATE, 1),
    ("port_rcv_errors", "port_rcv_errors", 16, Overflow.SATURATE, 1),
    ("port_xmit_discards", "port_xmit_discards", 16, Overflow.SATURATE, 1),
    ("local_link_integrity_errors", "local_link_integrity_errors", 4, Overflow.SATURATE, 1),
    ("excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors", 4, Overflow.SATURATE, 1),
    ("VL15_dropped", "VL15_dropped", 16, Overflow.SATURATE, 1),
]


@pytest.mark.parametrize(("raw", "name", "width", "overflow", "scale"), PMA_MEANINGS)
@pytest.mark.parametrize("driver", ["mlx5", None])
def test_pma_counter_meaning(
    driver: str | None, raw: str, name: str, width: int, overflow: Overflow, scale: int
) -> None:
    assert describe(driver, PMA, raw) == CounterSpec(name, width, overflow, scale)


@pytest.mark.parametrize("raw", ["port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"])
def test_legacy_pma_data_counters_are_32_bit_and_saturate(raw: str) -> None:
    spec = describe("mlx5", PMA, raw, pma_ext=False)
    assert (spec.width, spec.overflow) == (32, Overflow.SATURATE)
    assert spec.scale == (4 if raw.endswith("_data") else 1)


@pytest.mark.parametrize(
    ("driver", "group", "raw"),
    [
        ("mlx5", HW, "some_future_counter"),
        ("rxe", HW, "np_cnp_sent"),
        ("mlx5", PMA, "np_cnp_sent"),
        (None, HW, "x y z"),
        ("mlx5", CounterGroup.ETHTOOL, "rx_prio3_pause"),
    ],
)
def test_unknown_name_keeps_raw_name_64_bit_wrapping(
    driver: str | None, group: CounterGroup, raw: str
) -> None:
    assert describe(driver, group, raw) == CounterSpec(raw, 64, Overflow.WRAP, 1)


def test_every_mapped_name_is_in_the_vocabulary_or_a_pma_name() -> None:
    all_tables = (
        tables.MLX5,
        tables.BNXT_RE_OLD,
        tables.BNXT_RE_NEW,
        tables.IRDMA_GEN2,
        tables.IRDMA_GEN3,
        tables.RXE,
        tables.PMA_EXT,
    )
    every_file = {n for table in all_tables for n in table.names}
    for table in all_tables:
        assert set(table.vocab) <= every_file, "a vocab entry names a file no driver has"
        for raw, name in table.vocab.items():
            # ... or, for a renamed bnxt_re counter, its new kernel name (one name across generations)
            assert name in VOCABULARY or name in tables.PMA_EXT.names or name in tables.BNXT_RE_NEW.names, raw
    assert all(name in {s.name for s in _mapped()} for name in VOCABULARY)


def _mapped() -> list[CounterSpec]:
    return [
        describe(s.driver, g, n)
        for s in COUNTER_SETS.values()
        for g, ns in ((PMA, s.pma), (HW, s.hw))
        for n in ns
    ]


def test_bnxt_renames_keep_their_meaning() -> None:
    old, new = tables.BNXT_RE_OLD.names, tables.BNXT_RE_NEW.names
    assert len(new) == len(old) + 3
    for before, after in zip(old, new, strict=False):
        assert describe("bnxt_re", HW, before).name == describe("bnxt_re", HW, after).name or before == after


@pytest.mark.parametrize(
    ("key", "driver", "n_pma", "n_hw"),
    [
        ("mlx5", "mlx5", 21, 31),
        ("mlx5_legacy_pma", "mlx5", 17, 31),
        ("bnxt_re_old", "bnxt_re", 0, 92),
        ("bnxt_re_new", "bnxt_re", 0, 95),
        ("irdma_gen2", "irdma", 0, 46),
        ("irdma_gen3", "irdma", 0, 57),
        ("rxe", "rxe", 0, 15),
    ],
)
def test_counter_sets(key: str, driver: str, n_pma: int, n_hw: int) -> None:
    s = COUNTER_SETS[key]
    assert (s.driver, len(s.pma), len(s.hw)) == (driver, n_pma, n_hw)
    assert len(set(s.pma)) == n_pma and len(set(s.hw)) == n_hw  # no duplicates
    assert default_counter_set(driver).driver == driver


def test_counter_set_details() -> None:
    assert PMA_EXT_ONLY == {
        "unicast_rcv_packets",
        "unicast_xmit_packets",
        "multicast_rcv_packets",
        "multicast_xmit_packets",
    }
    assert "RNR sent" in COUNTER_SETS["irdma_gen3"].hw and "iwInRdmaReads" in COUNTER_SETS["irdma_gen2"].hw
    rxe_names = {describe("rxe", HW, n).name for n in COUNTER_SETS["rxe"].hw}
    assert not rxe_names & {"ecn_marked", "cnp_sent", "cnp_handled", "cnp_ignored"}  # rxe has no DCQCN
    assert list(COUNTER_SETS["mlx5"].hw) == sorted(COUNTER_SETS["mlx5"].hw)  # fixture spec order


def _device(tmp_path: Path, name: str, module: str | None = None, hw: tuple[str, ...] = ()) -> Path:
    dev = tmp_path / name
    (dev / "ports" / "1" / "hw_counters").mkdir(parents=True)
    for n in hw:
        (dev / "ports" / "1" / "hw_counters" / n).write_text("0\n")
    if module is not None:
        pci = tmp_path / "pci" / name
        (tmp_path / "drivers" / module).mkdir(parents=True, exist_ok=True)
        pci.mkdir(parents=True)
        os.symlink(tmp_path / "drivers" / module, pci / "driver")
        os.symlink(pci, dev / "device")
    return dev


@pytest.mark.parametrize(
    ("name", "module", "hw", "expected"),
    [
        ("rocep65s0f0", "mlx5_core", (), "mlx5"),  # udev rename: only the link tells
        ("mlx5_bond_0", None, (), "mlx5"),
        ("bnxt_re0", None, (), "bnxt_re"),
        ("roce1", "bnxt_en", (), "bnxt_re"),
        ("rdmap81s0f0", "ice", (), "irdma"),
        ("irdma0", None, (), "irdma"),
        ("rxe0", None, (), "rxe"),
        ("custom0", None, ("cnpSent", "RxECNMrkd"), "irdma"),
        ("custom1", None, ("rcvd_pkts", "sent_pkts"), "rxe"),
        ("custom2", None, ("rx_write_requests",), "mlx5"),
        ("custom3", None, ("active_qps",), "bnxt_re"),
        ("custom4", "some_other_module", ("nothing_known",), None),
    ],
)
def test_detect_driver(
    tmp_path: Path, name: str, module: str | None, hw: tuple[str, ...], expected: str | None
) -> None:
    assert detect_driver(name, _device(tmp_path, name, module, hw)) == expected


def test_detect_driver_uses_given_names_and_tolerates_missing_dirs(tmp_path: Path) -> None:
    assert detect_driver("x", tmp_path / "absent") is None
    assert detect_driver("x", tmp_path / "absent", {"np_cnp_sent", "roce_adp_retrans"}) == "mlx5"
