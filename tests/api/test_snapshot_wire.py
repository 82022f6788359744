"""A snapshot across netd fabric's process boundary (netd.api.snapshot_wire): what the listener decodes is
what the view built, its parts are decoded only when read, and the extender's workers answer from the
encoded scores exactly as from the report itself."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import msgspec
import pytest

from netd.api.extender_worker import node_index, score_table
from netd.api.service_view import ClusterSnapshot
from netd.api.snapshot_wire import decode_snapshot, encode_snapshot
from netd.bench.synthetic import SyntheticCluster
from netd.congestion.scheduling import NodeIndex, UnknownPolicy
from tests.api.test_extender import NAMES, cluster


def _across(
    snap: ClusterSnapshot, previous: ClusterSnapshot | None = None, same: bool = False
) -> ClusterSnapshot:
    """Through msgpack and a bytearray, as the frame arrives."""
    meta, payload = encode_snapshot(snap, same)
    return decode_snapshot(msgspec.msgpack.decode(msgspec.msgpack.encode(meta)), bytearray(payload), previous)


def test_the_decoded_topology_and_report_are_the_ones_built_and_decoded_only_when_read():
    view = SyntheticCluster(6, rails=2)
    view.refresh()  # levels and `since` from a second update
    snap = view.current()
    assert snap is not None and snap.congestion is not None
    got = _across(snap)
    assert not got.at_hand()
    assert (got.view, got.timestamp, got.emulated, got.note) == (snap.view, snap.timestamp, True, snap.note)
    assert got.topology == snap.topology
    assert got.congestion == snap.congestion  # every field of every port, ToR and spine
    assert got.at_hand()
    assert got.congestion is got.congestion  # decoded once


def test_a_report_with_down_stormed_and_unreported_ports_survives_the_trip():
    snap = cluster().current()  # a down port, a PFC storm, signals the NIC does not report (None)
    got = _across(snap)
    assert got.topology is None and got.congestion == snap.congestion
    assert any(not p.up for p in got.congestion.ports) and any(p.stormed for p in got.congestion.ports)  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["lowest", "neutral", "reject"])
def test_the_workers_answer_from_the_encoded_scores_as_from_the_report(mode):
    snap = cluster().current()
    got = _across(snap)
    assert got.scores is not None and got.scores.port_count == len(snap.congestion.ports)  # type: ignore[union-attr]
    policy = UnknownPolicy(mode, neutral_score=6)
    here = NodeIndex(snap.congestion, policy)  # the listener's index of the report, built in-process
    there = node_index(*score_table(got.scores, policy))
    assert there.filter(NAMES) == here.filter(NAMES)
    assert there.prioritize(NAMES) == here.prioritize(NAMES)
    assert there.prioritize(NAMES, {"gpu-03": 1}, 0.3) == here.prioritize(NAMES, {"gpu-03": 1}, 0.3)
    assert not got.at_hand()  # the scores never needed the report decoded


def test_a_refresh_that_kept_the_last_good_view_sends_only_its_note():
    snap = cluster().current()
    first = _across(snap)
    meta, payload = encode_snapshot(snap.with_note("Prometheus slow; serving the last good view"), True)
    assert payload == b""
    kept = decode_snapshot(meta, payload, first)
    assert kept.note == "Prometheus slow; serving the last good view"
    assert kept.congestion is first.congestion and kept.scores is first.scores
    with pytest.raises(ValueError, match="came first"):
        decode_snapshot(meta, payload, None)


def test_no_report_and_no_topology():
    got = _across(ClusterSnapshot("fabric", 1.0, False, None, None, "nothing yet"))
    assert (
        got.congestion is None and got.topology is None and got.scores is None and got.note == "nothing yet"
    )


def test_a_snapshot_is_immutable():
    snap = cluster().current()
    with pytest.raises(AttributeError, match="immutable"):
        snap.note = "changed"  # type: ignore[misc]


def test_a_snapshot_holding_something_unencodable_is_refused_by_name():
    report = cluster().current().congestion
    assert report is not None
    port = dataclasses.replace(report.ports[0], labels=MappingProxyType({"host": object()}))  # type: ignore[dict-item]
    odd = ClusterSnapshot("fabric", 1.0, False, None, dataclasses.replace(report, ports=(port,)))
    with pytest.raises(TypeError, match="cannot carry a object"):
        encode_snapshot(odd)
