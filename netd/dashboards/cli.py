"""`netd dashboards`: write (or check) the Grafana dashboards and Prometheus rules."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from netd.config.settings import Config
from netd.dashboards import DEFAULT_JOB, DEFAULT_RUNBOOK, artifacts
from netd.errors import NetdError

__all__ = ["register", "write_artifacts"]

EPILOG = """\
examples:
  netd dashboards --out dashboards            regenerate the repository's committed files
  netd dashboards --out dashboards --check    exit 1 if the committed files are out of date
  netd dashboards --out /etc/netd/grafana --runbook-url https://wiki.example/netd/runbook
                                              files for your Grafana and Prometheus, with runbook
                                              links to where you publish docs/runbook.md

Import the dashboards in Grafana (Dashboards > New > Import, or file provisioning) and load the rule
files with rule_files: in prometheus.yml; see dashboards/README.md.
"""


def write_artifacts(out: Path, files: dict[str, str], check: bool) -> list[str]:
    """Write ``files`` under ``out`` (only those that changed); with ``check``, write nothing.

    Returns the relative paths that differ from what is on disk.
    """
    stale = []
    for rel, text in files.items():
        path = out / rel
        try:
            current = path.read_text() if path.exists() else None
        except OSError as exc:
            raise NetdError(f"cannot read {path}: {exc.strerror or exc}") from exc
        if current == text:
            continue
        stale.append(rel)
        if not check:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            except OSError as exc:
                raise NetdError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return stale


def _cmd(args: argparse.Namespace, cfg: Config | None) -> int:
    files = artifacts(runbook_base=args.runbook_url, job=args.job)
    stale = write_artifacts(args.out, files, args.check)
    if args.check:
        for rel in stale:
            print(f"out of date: {args.out / rel} (run: netd dashboards --out {args.out})")
        if not stale:
            print(f"{len(files)} files in {args.out} are up to date")
        return 1 if stale else 0
    for rel in files:
        print(f"{'wrote' if rel in stale else 'unchanged'} {args.out / rel}")
    return 0


def register(sub: argparse._SubParsersAction, common: Callable[..., None]) -> None:
    p = sub.add_parser(
        "dashboards",
        help="write netd's Grafana dashboards and Prometheus rules (or check them)",
        description="Write netd's three Grafana dashboards (JSON model, `datasource` variable, no data "
        "source "
        "uids) and its Prometheus recording and alerting rules, generated for this version of netd.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("dashboards"),
        metavar="DIR",
        help="directory to write into (default ./dashboards): DIR/*.json, DIR/rules/*.rules.yml",
    )
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 and name the files whose content differs"
    )
    p.add_argument(
        "--runbook-url",
        default=DEFAULT_RUNBOOK,
        metavar="URL",
        help=f"base of every alert's runbook_url; '#section' is appended (default {DEFAULT_RUNBOOK})",
    )
    p.add_argument(
        "--job",
        default=DEFAULT_JOB,
        help=f"Prometheus job name that scrapes netd, for the NetdDown alert (default {DEFAULT_JOB})",
    )
    p.set_defaults(handler=_cmd, needs_config=False)
