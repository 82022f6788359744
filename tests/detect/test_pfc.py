"""PFC storm (SONiC watchdog semantics) and NIC pause storm: table-driven sample sequences."""

from __future__ import annotations

import pytest

from netd.detect.pfc import KIND_PAUSE_STORM, KIND_PFC_STORM, PfcStormDetector
from tests.detect.helpers import cfg, pfc, port, prio, stormed, tick

# (what, per-sample priority counters at 0.1 s, index of the sample after which a storm is expected
#  to be active, or None for never)
STORM_CASES = [
    ("two stormed samples reach the 200 ms detection time", [stormed(), stormed()], 1),
    ("one stormed sample is not enough", [stormed()], None),
    ("paused 80% is the threshold", [stormed(fraction=0.8), stormed(fraction=0.8)], 1),
    ("paused 79% is not a storm", [stormed(fraction=0.79), stormed(fraction=0.79)] * 3, None),
    ("transmit progress means congestion, not a storm", [stormed(tx=5), stormed(tx=5)] * 3, None),
    (
        "no new pause frames: nothing is refreshing the pause",
        [stormed(frames=0), stormed(frames=0)] * 2,
        None,
    ),
    ("an interruption restarts the countdown", [stormed(), stormed(tx=10), stormed(), stormed()], 3),
    (
        "an unknown sample (a reset) neither charges nor clears",
        [stormed(), prio(3, rx_pause_us=None, rx_pause_frames=None, tx_packets=None), stormed()],
        2,
    ),
    (
        "a storm starting mid-sample: the partial sample transmitted, so only full ones count",
        [stormed(fraction=0.5, tx=900), stormed(), stormed()],
        2,
    ),
]


@pytest.mark.parametrize(("what", "samples", "stormed_from"), STORM_CASES, ids=[c[0] for c in STORM_CASES])
def test_storm_detection(what: str, samples: list, stormed_from: int | None) -> None:
    d = PfcStormDetector(cfg())
    active = []
    for i, pc in enumerate(samples):
        found = d.evaluate(pfc(0.1 * (i + 1), port(priorities=(pc,))))
        active.append(any(c.kind == KIND_PFC_STORM for c in found))
    expected = [stormed_from is not None and i >= stormed_from for i in range(len(samples))]
    assert active == expected


# The onset sample's pause counts towards the countdown (netd, not SONiC: docs/detection.md). With a
# 150 ms detection time and 100 ms samples, one full sample is not enough; the pause of the partial
# sample before it decides. (what, samples, index from which a storm is active, or None)
QUIET = prio(3, rx_pause_frames=0, rx_pause_us=0, tx_packets=900)
UNKNOWN = prio(3, rx_pause_us=None, rx_pause_frames=None, tx_packets=None)
LEAD_CASES = [
    ("50 ms of onset pause + 100 ms stormed reach 150 ms", [stormed(fraction=0.5, tx=900), stormed()], 1),
    ("40 ms of onset pause + 100 ms do not", [stormed(fraction=0.4, tx=900), stormed()], None),
    ("a fully paused sample that transmitted is an interruption, no lead", [stormed(tx=10), stormed()], None),
    ("a pause-free sample drops the lead", [stormed(fraction=0.5, tx=900), QUIET, stormed()], None),
    ("pause time without new pause frames is no onset", [stormed(fraction=0.5, frames=0), stormed()], None),
    ("an unknown sample keeps the lead", [stormed(fraction=0.5, tx=900), UNKNOWN, stormed()], 2),
]


@pytest.mark.parametrize(("what", "samples", "stormed_from"), LEAD_CASES, ids=[c[0] for c in LEAD_CASES])
def test_onset_pause_is_charged(what: str, samples: list, stormed_from: int | None) -> None:
    d = PfcStormDetector(cfg(pfc_detection_time=0.15))
    active = [
        any(c.kind == KIND_PFC_STORM for c in d.evaluate(pfc(0.1 * (i + 1), port(priorities=(pc,)))))
        for i, pc in enumerate(samples)
    ]
    assert active == [stormed_from is not None and i >= stormed_from for i in range(len(samples))]


def test_the_storming_side_charges_its_onset_too() -> None:
    d = PfcStormDetector(cfg(pfc_detection_time=0.15))
    onset = prio(3, tx_pause_frames=600, tx_pause_us=6e4)  # 60 ms of the 100 ms sample: below 80 %
    full = prio(3, tx_pause_frames=1190, tx_pause_us=1e5)
    assert not d.evaluate(pfc(0.1, port(priorities=(onset,))))
    assert [c.kind for c in d.evaluate(pfc(0.2, port(priorities=(full,))))] == [KIND_PAUSE_STORM]


def test_confirm_in_only_after_a_fresh_onset() -> None:
    """How long until a sample could confirm: after an onset only (sustained partial pause, the
    daily state of a congested priority, must not pull the fast path faster)."""
    d = PfcStormDetector(cfg(pfc_detection_time=0.15))
    assert d.confirm_in() is None
    d.evaluate(pfc(0.1, port(priorities=(QUIET,))))
    assert d.confirm_in() is None and d.at_rest()
    d.evaluate(pfc(0.2, port(priorities=(stormed(fraction=0.3, tx=900),))))
    assert d.confirm_in() == pytest.approx(0.12) and not d.at_rest()  # 150 - 30 ms
    d.evaluate(pfc(0.3, port(priorities=(stormed(fraction=0.3, tx=900),))))
    assert d.confirm_in() is None  # still partial: congestion, not a fresh onset
    d.evaluate(pfc(0.4, port(priorities=(stormed(),))))
    assert d.confirm_in() == pytest.approx(0.02)  # 30 ms lead + 100 ms charged
    d.evaluate(pfc(0.5, port(priorities=(stormed(),))))
    assert d.confirm_in() is None  # stormed


def test_storm_scope_evidence_and_restoration() -> None:
    d = PfcStormDetector(cfg(pfc_restoration_time=0.4))
    t = 0.0
    for _ in range(3):
        t += 0.1
        found = d.evaluate(pfc(t, port(priorities=(stormed(),))))
    (c,) = found
    assert (c.scope.device, c.scope.port, c.scope.priority, c.scope.netdev) == ("mlx5_0", 1, 3, "mlx5_0_net")
    assert c.evidence["rx_pause_fraction"] == 1.0 and c.evidence["tx_packets"] == 0
    assert "stuck receiver" in c.explanation and "tx_prio3_pause" in c.explanation
    quiet = prio(3, rx_pause_frames=0, rx_pause_us=0, tx_packets=5000)
    restored_after = None
    for i in range(1, 8):
        t += 0.1
        if not d.evaluate(pfc(t, port(priorities=(quiet,)))):
            restored_after = i
            break
    assert restored_after == 4  # 4 x 100 ms of restoration time


def test_a_long_sample_counts_its_real_elapsed_time() -> None:
    """Charged by real elapsed time: a single 1 s tick sample fully stormed is 1 s of storm."""
    d = PfcStormDetector(cfg())
    assert d.evaluate(pfc(1.0, port(priorities=(stormed(dt=1.0),)), dt=1.0))


def test_samples_after_a_gap_are_not_judged() -> None:
    d = PfcStormDetector(cfg(max_gap=5.0))
    assert not d.evaluate(pfc(10.0, port(priorities=(stormed(dt=10.0),)), dt=10.0))


def test_ticks_prune_ports_that_disappeared_but_pfc_samples_missing_a_port_carry() -> None:
    d = PfcStormDetector(cfg())
    for t in (0.1, 0.2):
        d.evaluate(pfc(t, port(priorities=(stormed(),))))
    assert d.evaluate(pfc(0.3))  # the netdev read failed: the storm is carried
    assert d.evaluate(tick(1.0, port()))  # the port is still there
    assert not d.evaluate(tick(2.0))  # gone


PAUSE_CASES = [
    ("this NIC keeps pausing its peer", [prio(3, tx_pause_frames=1190, tx_pause_us=1e5)] * 2, {}, "critical"),
    ("pausing 50% is not a storm", [prio(3, tx_pause_frames=600, tx_pause_us=5e4)] * 4, {}, None),
    ("a storm-prevention warning event", [prio(3)], {"storm_warning_events": 1.0}, "warning"),
    ("a storm-prevention error event", [prio(3)], {"storm_error_events": 1.0}, "critical"),
]


@pytest.mark.parametrize(
    ("what", "samples", "events", "severity"), PAUSE_CASES, ids=[c[0] for c in PAUSE_CASES]
)
def test_pause_storm(what: str, samples: list, events: dict, severity: str | None) -> None:
    d = PfcStormDetector(cfg())
    found = []
    for i, pc in enumerate(samples):
        found = d.evaluate(pfc(0.1 * (i + 1), port(priorities=(pc,), **events)))
    pause = [c for c in found if c.kind == KIND_PAUSE_STORM]
    assert [c.severity.value for c in pause] == ([severity] if severity else [])
    if severity:
        assert pause[0].scope.priority is None and "stuck receiver" in pause[0].explanation


def test_storm_events_are_held_then_expire() -> None:
    d = PfcStormDetector(cfg(pause_storm_event_hold=1.0))
    assert d.evaluate(pfc(0.1, port(priorities=(prio(3),), storm_error_events=1.0)))
    assert d.evaluate(pfc(0.6, port(priorities=(prio(3),), storm_error_events=0.0), dt=0.5))
    assert not d.evaluate(pfc(1.2, port(priorities=(prio(3),), storm_error_events=0.0), dt=0.6))
