"""`netd tune`: a DCQCN recommendation for this host, explained; applying it; rolling it back.

Where the signals come from, in order (as for `netd status`):

1. ``--sysfs-root DIR``: observe that tree directly for ``--seconds`` (a captured host, an emulated
   host's directory such as ``/run/netd/emulated/host0``).
2. A running daemon: its latest recommendation (``GET /v1/tuning``); ``--apply`` asks it to apply
   (``POST /v1/tuning/apply`` with the API token).
3. RDMA devices under /sys: observe them directly.
4. Nothing at all: run the emulated fabric in a temporary directory for a few simulated seconds and
   tune its host 0 (a demonstration; there is nothing to apply to). One line on stderr says so, and a
   progress line follows its phases on a terminal (or with ``--progress``).

A daemon that answers but cannot serve a recommendation (tuning off, not ready) is reported in one
line; netd tune then does not silently build a fabric of its own instead.

``--apply``, ``--rollback`` and ``--recover`` write through the journaled applier (docs/tuning.md);
dry-run, the default, changes nothing. Exit status: 0 when every file is as intended; 1 when a change
was not applied (it failed and was undone, or was refused before any write); 3 when recovery is
needed (a file could not be put back: its intent stays in the journal; run ``--recover``); 2 for
usage, configuration and device errors, as every netd command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cc.tune.recommendation import Recommendation
from cc.tune.tuner import Tuner
from netd.api.auth import load_token
from netd.api.client import daemon_get, daemon_post
from netd.api.progress import Progress, add_progress_flag
from netd.config.settings import Config
from netd.errors import DaemonUnreachable, NetdError, TuningError
from netd.series.tracker import SeriesTracker
from netd.sources.cc_params import discover
from netd.sources.collect import Sampler
from netd.sources.sysfs_io import list_dir
from netd.tuning.applier import Applier, Outcome
from netd.tuning.journal import Journal
from netd.tuning.observe import SignalWindow, host_signals
from netd.tuning.service import params_in_force, safety_bounds

__all__ = ["register"]

EPILOG = """\
examples:
  netd tune                                   explain what the tuner would change here (dry run)
  netd tune --sysfs-root /run/netd/emulated/host0 --seconds 10
  netd tune --apply                           write the recommended NIC parameters (journaled)
  netd tune --rollback                        undo the newest applied change set
  netd tune --recover                         put back a change set left open by a crash or failed undo

exit status: 0 done; 1 not applied (failed and undone, or refused); 3 recovery needed; 2 other errors
"""


def register(sub: Any, common_options: Callable[..., None]) -> None:
    p = sub.add_parser(
        "tune",
        help="DCQCN tuning: explain a recommendation, apply it, or roll back",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common_options(p)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--dry-run", action="store_true", help="decide and explain, change nothing (default)")
    what.add_argument("--apply", action="store_true", help="write the recommended NIC parameters")
    what.add_argument(
        "--rollback",
        action="store_true",
        help="undo the newest applied change set (or, if one is open, put that one back)",
    )
    what.add_argument(
        "--recover",
        action="store_true",
        help="only put back a change set left open in the journal (a crash, a failed undo)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="how long to observe the counters when reading a tree directly (default 5)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON document instead of text")
    add_progress_flag(p)
    p.set_defaults(handler=_cmd_tune)


EXIT_NOT_APPLIED = 1
EXIT_RECOVERY_NEEDED = 3


def exit_status(state: str | None) -> int:
    """0 when every file is as intended, 1 when the change was not applied, 3 when recovery is needed."""
    if state == "recovery-needed":
        return EXIT_RECOVERY_NEEDED
    return EXIT_NOT_APPLIED if state in ("failed", "refused") else 0


def _cmd_tune(args: argparse.Namespace, cfg: Config) -> int:
    if args.rollback or args.recover:
        applier, _, recovered = _local_applier(cfg, cfg.sysfs_root)
        if recovered is not None or args.recover:  # closing an open change set is the rollback
            return _report_outcome(args, recovered, "recover")
        return _report_outcome(args, applier.rollback(source="cli"), "rollback")
    absent = None
    if args.sysfs_root is None:
        try:
            return _via_daemon(args, cfg)
        except DaemonUnreachable as exc:  # nothing listens: only then look elsewhere
            absent = exc
    if args.sysfs_root is not None or list_dir(cfg.sysfs_root / "class" / "infiniband"):
        return _local(args, cfg, cfg.sysfs_root, sleep=True)
    return _emulated(args, cfg, absent)


# -- observing a tree directly --------------------------------------------------------------------
def _local_applier(cfg: Config, root: Path) -> tuple[Applier, list[str], Outcome | None]:
    """The applier of the trees under ``root``, after closing any change set left open."""
    trees, notes = discover(root, cfg.tuning.debugfs(root), cfg.rdma.include, cfg.rdma.exclude)
    if not trees:
        raise NetdError(
            f"no DCQCN parameters found under {root}:\n  " + "\n  ".join(notes or ["no RDMA devices"])
        )
    applier = Applier(trees, Journal(cfg.tuning.journal_dir()), dict(safety_bounds(cfg).bounds))
    recovered = applier.recover()
    if recovered is not None:
        print(f"netd: change set {recovered.txid} was left open; putting it back: {recovered.state}")
        if recovered.state != "recovered":
            print(f"netd: recovery needed: {recovered.error}; `netd tune --recover` when the device answers")
    return applier, notes, recovered


def _local(
    args: argparse.Namespace,
    cfg: Config,
    root: Path,
    sleep: bool,
    advance: Callable[[], object] | None = None,
    progress: Progress | None = None,
) -> int:
    applier, notes, _ = _local_applier(cfg, root)
    collector = Sampler.from_config(cfg, root, emulated=advance is not None)
    tracker, window = SeriesTracker(), SignalWindow(ticks=10_000)
    ticks = max(2, int(args.seconds) + 1)
    progress = progress or Progress("netd tune", force=args.progress)
    try:
        for i in range(ticks):
            progress.update(note=f"observing counters, second {i}/{ticks - 1}", force=True)
            if advance is not None:
                advance()
            elif i and sleep:
                time.sleep(1.0)
            snap = collector.collect()
            if advance is not None:  # simulated seconds: rates per emulated second
                snap = dataclasses.replace(snap, monotonic=float(i))
            window.add(host_signals(tracker.update(snap)))
    finally:
        collector.close()
    values = applier.in_force()
    signals = window.value()
    if signals is None:
        raise NetdError(f"no RDMA port under {root} reported traffic counters; nothing to tune from")
    progress.update(note="simulating the candidate parameter sets", force=True)
    rec = Tuner(safety_bounds(cfg)).observe(signals, params_in_force(next(iter(values.values())), cfg))
    progress.close()
    outcome = None
    if args.apply and rec.nic_changes:
        target = {c.name: int(c.proposed) for c in rec.nic_changes}
        outcome = applier.apply(applier.plan(target), source="cli", reason="; ".join(rec.reasons[:2]))
    _print(args, rec, values, notes, outcome, where=str(root))
    if outcome is not None and not outcome.ok:
        _not_applied(outcome.state, outcome.error)
    return exit_status(None if outcome is None else outcome.state)


def _emulated(args: argparse.Namespace, cfg: Config, absent: DaemonUnreachable | None) -> int:
    from netd.emulated.fabric_host import EmulatedFabric

    if args.apply:
        raise NetdError(
            "no RDMA devices and no daemon: there is nothing to apply to. Start `netd run` (it "
            "runs the emulated fabric) and apply against it, e.g. `netd tune --apply "
            "--sysfs-root <its state dir>/host0`"
        )
    e = cfg.emulator
    # the one line that says why no daemon and no NIC were used; on stderr: stdout may be --json
    print(
        f"netd: {absent or 'no daemon'} and no RDMA devices under {cfg.sysfs_root}; tuning a temporary "
        f"emulated fabric observed for {args.seconds:g} simulated seconds (host 0)",
        file=sys.stderr,
    )
    progress = Progress("netd tune", force=args.progress)
    progress.update(note="building a temporary emulated fabric", force=True)
    with tempfile.TemporaryDirectory(prefix="netd-tune-") as tmp:
        fabric = EmulatedFabric(
            Path(tmp) / "emulated",
            tors=e.tors,
            hosts_per_tor=e.hosts_per_tor,
            ports_per_host=e.ports_per_host,
            link_gbps=e.link_gbps,
            seed=e.seed,
            sim_ms_per_tick=e.sim_ms_per_tick,
        )
        try:
            tmp_cfg = cfg.model_copy(
                update={
                    "tuning": cfg.tuning.model_copy(
                        update={"state_dir": Path(tmp) / "journal", "debugfs_root": None}
                    )
                }
            )
            return _local(
                args,
                tmp_cfg,
                fabric.host_root(0),
                sleep=False,
                advance=lambda: fabric.advance(1.0),
                progress=progress,
            )
        finally:
            progress.close()
            fabric.close()


# -- asking the daemon ----------------------------------------------------------------------------
def _via_daemon(args: argparse.Namespace, cfg: Config) -> int:
    # a daemon that answers with an error is reported (one line, exit 2), not taken for an absent one
    response = daemon_get(
        cfg.listen,
        "/v1/tuning",
        timeout_s=3.0,
        status_hints={
            404: 'the daemon runs without DCQCN tuning ([tuning] mode = "off"); turn it on, or observe a '
            "tree with --sysfs-root",
            503: "the daemon is starting; try again in a few seconds",
        },
    )
    doc = response.json()
    if args.apply:
        applied = daemon_post(
            cfg.listen,
            "/v1/tuning/apply",
            token=load_token(cfg.api.token_file),
            accept=(200, 409),  # 409: the apply ran and failed; its outcome is the body
            status_hints={
                401: "set api.token_file or NETD_API_TOKEN",
                403: "set api.token_file or NETD_API_TOKEN",
            },
        )
        body = applied.json()
        doc["apply"] = body.get("outcome", body.get("detail", body)) if applied.status_code == 409 else body
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        rec = doc.get("recommendation")
        print(f"netd tune: from the daemon at {cfg.listen} (mode {doc['mode']})")
        print(
            rec["explanation"]
            if rec
            else "the daemon has not decided yet (it decides every "
            f"{cfg.tuning.interval:g} s); try again, or observe a tree with --sysfs-root"
        )
        if doc.get("recovery_needed"):
            print(f"netd: {doc['recovery_needed']['message']}")
        if "apply" in doc:
            print(f"apply: {doc['apply'].get('state')} {doc['apply'].get('error') or ''}".rstrip())
    state = doc["apply"].get("state") if isinstance(doc.get("apply"), dict) else None
    if state not in (None, "applied", "nothing", "recovered"):
        _not_applied(str(state), doc["apply"].get("error"))
    return exit_status(state)


# -- output ---------------------------------------------------------------------------------------
def _print(
    args: argparse.Namespace,
    rec: Recommendation,
    values: dict[str, dict[str, int]],
    notes: list[str],
    outcome: Outcome | None,
    where: str,
) -> None:
    if args.json:
        doc = {
            "source": where,
            "recommendation": rec.to_dict(),
            "in_force": values,
            "notes": notes,
            "outcome": None if outcome is None else outcome.to_dict(),
        }
        print(json.dumps(doc, indent=2))
        return
    print(f"netd tune: {where} ({', '.join(values)}); {'apply' if args.apply else 'dry run'}")
    print(rec.explain())
    if rec.switch_changes:
        print("  (switch settings are recommendations for the switch operator; netd does not change them)")
    for note in notes:
        print(f"  note: {note}")
    if outcome is not None:
        _print_outcome(outcome, "apply")
    elif args.apply:
        print("apply: nothing to write (no NIC change recommended)")


def _print_outcome(outcome: Outcome, what: str) -> None:
    print(f"{what}: {outcome.state}" + (f" ({outcome.txid})" if outcome.txid else ""))
    for w in outcome.writes:
        print(f"  {w.device} {w.name}: {w.old} -> {w.new}  [{outcome.result(w)}]  {w.path}")
    if outcome.error:
        print(f"  error: {outcome.error}")


def _not_applied(state: str, error: str | None) -> None:
    """The one line that says a change did not (fully) happen, on stderr."""
    print(f"netd: not applied ({state}): {error or 'see above'}", file=sys.stderr)


def _report_outcome(args: argparse.Namespace, outcome: Outcome | None, what: str) -> int:
    if outcome is None:
        print(f"{what}: nothing (no change set is open)")
        return 0
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        _print_outcome(outcome, what)
    if outcome.state == "nothing" and what == "rollback":
        raise TuningError(outcome.error or "nothing to roll back")
    if not outcome.ok:
        _not_applied(outcome.state, outcome.error)
    return exit_status(outcome.state)
