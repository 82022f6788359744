"""tc clsact attachment of netd's packet programs, in any network namespace, with crash recovery.

A cls_bpf filter outlives the process that added it (the kernel holds the program), so a daemon that
was killed leaves its filters behind. netd therefore

* recognises its own filters by name (``netd_*``, the C function name) and priority, and replaces
  one left on a hook it attaches the same program to, and
* records what it attached in a state file (owner pid and start time, one entry per hook); at start,
  a state file whose owner is gone is *stale*: every hook it lists is cleaned, configured or not. A
  state file whose owner still runs means another netd owns the probes: netd refuses to fight it.

Filters return TC_ACT_UNSPEC (observe only) and sit at fixed priorities, so other filters on the same
hook keep working. The clsact qdisc is removed on detach only if netd created it and nothing else
uses it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from netd.config.files import read_regular
from netd.errors import SourceError
from netd.sources.procfs import proc_stat

__all__ = [
    "PARENTS",
    "Attachment",
    "Interface",
    "TcAttacher",
    "add_bpf_filter",
    "ensure_clsact",
    "owner_alive",
    "read_owner",
    "resolve",
]

log = logging.getLogger(__name__)

PARENTS = {"ingress": 0xFFFFFFF2, "egress": 0xFFFFFFF3}  # TC_H_CLSACT minor ingress/egress
NAME_PREFIX = "netd_"
EEXIST, ENOENT, EINVAL = 17, 2, 22


@dataclass(frozen=True)
class Interface:
    """A network interface by name, optionally inside a named network namespace (/run/netns/NAME)."""

    name: str
    netns: str | None = None

    @classmethod
    def parse(cls, spec: str) -> Interface:
        """``IFNAME`` or ``NETNS/IFNAME`` (neither name can contain '/'); the configuration validated
        the names, the kernel says whether they exist."""
        netns, _, name = spec.rpartition("/")
        return cls(name, netns or None)

    def __str__(self) -> str:
        return f"{self.netns}/{self.name}" if self.netns else self.name


@dataclass(frozen=True)
class Attachment:
    iface: Interface
    ifindex: int
    hook: str  # "ingress" or "egress"
    program: str
    prio: int
    created_clsact: bool


@contextmanager
def _route(netns: str | None) -> Iterator[IPRoute]:
    try:
        ipr = IPRoute(netns=netns) if netns else IPRoute()
    except (OSError, NetlinkError) as exc:
        raise SourceError("bpf", f"cannot open network namespace {netns!r}: {exc}") from exc
    try:
        yield ipr
    finally:
        ipr.close()


def _ifindex(ipr: IPRoute, iface: Interface) -> int:
    found = ipr.link_lookup(ifname=iface.name)
    if not found:
        where = f" in network namespace {iface.netns}" if iface.netns else ""
        raise SourceError("bpf", f"no interface {iface.name}{where}")
    return int(found[0])


def _netd_filters(ipr: IPRoute, ifindex: int, hook: str) -> list[tuple[int, int, str]]:
    """(prio, handle, name) of netd's filters on one hook."""
    out = []
    try:
        filters = ipr.get_filters(index=ifindex, parent=PARENTS[hook])
    except NetlinkError as exc:
        if exc.code in (ENOENT, EINVAL):  # no clsact qdisc: no filters
            return []
        raise
    for f in filters:
        options = f.get_attr("TCA_OPTIONS")
        name = options.get_attr("TCA_BPF_NAME") if options else None
        if f.get_attr("TCA_KIND") == "bpf" and name and name.startswith(NAME_PREFIX):
            out.append((f["info"] >> 16, f["handle"], name))
    return out


def ensure_clsact(ipr: Any, ifindex: int) -> bool:
    """Add the clsact qdisc unless one is there; True when this call added it (so it may remove it)."""
    try:
        ipr.tc("add", "clsact", ifindex)
    except NetlinkError as exc:
        if exc.code != EEXIST:
            raise
        return False
    return True


def add_bpf_filter(
    ipr: Any, ifindex: int, prog_fd: int, name: str | bytes, parent: int | str, prio: int
) -> None:
    """Attach a loaded tc program as a direct-action cls_bpf filter (raises NetlinkError)."""
    ipr.tc(
        "add-filter",
        "bpf",
        ifindex,
        ":1",
        fd=prog_fd,
        name=name,
        parent=parent,
        classid=1,
        direct_action=True,
        prio=prio,
    )


def _remove_clsact_if_unused(ipr: IPRoute, ifindex: int) -> None:
    try:
        if any(ipr.get_filters(index=ifindex, parent=p) for p in PARENTS.values()):
            return
        ipr.tc("del", "clsact", ifindex)
    except NetlinkError as exc:
        if exc.code not in (ENOENT, EINVAL):  # already gone
            raise


def resolve(iface: Interface) -> int:
    """The interface's ifindex in its namespace; SourceError naming what is missing."""
    with _route(iface.netns) as ipr:
        return _ifindex(ipr, iface)


def read_owner(state_file: Path) -> int | None:
    """The pid of a live netd that owns the probes according to ``state_file``, else None."""
    try:
        state = json.loads(read_regular(state_file))
        pid, start = int(state["pid"]), str(state["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if owner_alive(pid, start) else None


def owner_alive(pid: int, start: str) -> bool:
    """Whether process ``pid`` still runs and is the same process (its start time matches)."""
    st = proc_stat(pid)
    return st is not None and st.start == start


def _own_start() -> str:
    st = proc_stat()
    assert st is not None  # our own stat is always there
    return st.start


class TcAttacher:
    """Attaches programs to tc hooks and remembers them for :meth:`detach_all`."""

    def __init__(self, state_file: Path | None = None) -> None:
        self.state_file = state_file
        self.attachments: list[Attachment] = []
        self.replaced: list[str] = []  # stale filters removed ("hook on iface: name")
        if state_file is not None:
            self._recover(state_file)

    def _recover(self, path: Path) -> None:
        try:
            state: dict[str, Any] = json.loads(read_regular(path))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable BPF state file %s: %s", path, exc)
            return
        pid, start = int(state.get("pid", 0)), str(state.get("start", ""))
        if pid != os.getpid() and owner_alive(pid, start):
            raise SourceError(
                "bpf", f"netd process {pid} owns the eBPF probes ({path}); stop it before starting another"
            )
        hooks: dict[Interface, set[str]] = {}
        created: set[Interface] = set()  # interfaces whose clsact qdisc the dead netd added
        for entry in state.get("attachments", []):
            iface = Interface(entry["name"], entry.get("netns"))
            hooks.setdefault(iface, set()).add(entry["hook"])
            if entry.get("created_clsact"):
                created.add(iface)
        for iface, names in hooks.items():
            try:
                self._remove_stale(iface, sorted(names), iface in created)
            except SourceError as exc:  # the interface or namespace is gone: nothing left to clean
                log.info("stale BPF attachment on %s: %s", iface, exc)
        path.unlink(missing_ok=True)

    def _remove_stale(self, iface: Interface, hooks: list[str], created_clsact: bool) -> None:
        with _route(iface.netns) as ipr:
            ifindex = _ifindex(ipr, iface)
            for hook in hooks:
                for prio, handle, name in _netd_filters(ipr, ifindex, hook):
                    ipr.tc("del-filter", "bpf", ifindex, handle, parent=PARENTS[hook], prio=prio)
                    self.replaced.append(f"{hook} on {iface}: {name}")
                    log.warning("removed a stale netd filter %s (%s on %s)", name, hook, iface)
            if created_clsact:  # the dead netd added the qdisc: remove it too unless someone uses it
                _remove_clsact_if_unused(ipr, ifindex)

    def attach(self, iface: Interface, hook: str, prog_fd: int, name: str, prio: int) -> Attachment:
        if hook not in PARENTS:
            raise SourceError("bpf", f"unknown tc hook {hook!r} (ingress or egress)")
        with _route(iface.netns) as ipr:
            ifindex = _ifindex(ipr, iface)
            try:
                created = ensure_clsact(ipr, ifindex)
            except NetlinkError as exc:
                raise SourceError("bpf", f"cannot add a clsact qdisc on {iface}: {exc}") from exc
            for old_prio, handle, old in _netd_filters(ipr, ifindex, hook):
                if old_prio != prio and old != name:  # another netd program, e.g. pfc beside roce
                    continue
                ipr.tc("del-filter", "bpf", ifindex, handle, parent=PARENTS[hook], prio=old_prio)
                self.replaced.append(f"{hook} on {iface}: {old}")
                log.warning("replaced a stale netd filter %s (%s on %s)", old, hook, iface)
            try:
                add_bpf_filter(ipr, ifindex, prog_fd, name, PARENTS[hook], prio)
            except NetlinkError as exc:
                raise SourceError("bpf", f"cannot attach {name} to {hook} of {iface}: {exc}") from exc
        att = Attachment(iface, ifindex, hook, name, prio, created)
        self.attachments.append(att)
        self._save()
        return att

    def detach_all(self) -> list[str]:
        """Removes every filter this attacher added; returns problems (an interface that vanished is
        not one: its filters went with it)."""
        problems = []
        for att in reversed(self.attachments):
            try:
                with _route(att.iface.netns) as ipr:
                    if not ipr.link_lookup(ifname=att.iface.name):
                        continue
                    try:
                        ipr.tc("del-filter", "bpf", att.ifindex, 1, parent=PARENTS[att.hook], prio=att.prio)
                    except NetlinkError as exc:
                        if exc.code not in (ENOENT, EINVAL):
                            raise
                    if att.created_clsact:
                        _remove_clsact_if_unused(ipr, att.ifindex)
            except (SourceError, NetlinkError, OSError) as exc:
                problems.append(f"{att.hook} on {att.iface}: {exc}")
        self.attachments.clear()
        if self.state_file is not None:
            self.state_file.unlink(missing_ok=True)
        return problems

    def _save(self) -> None:
        if self.state_file is None:
            return
        state = {
            "pid": os.getpid(),
            "start": _own_start(),
            "attachments": [
                {
                    "name": a.iface.name,
                    "netns": a.iface.netns,
                    "hook": a.hook,
                    "program": a.program,
                    "created_clsact": a.created_clsact,
                }
                for a in self.attachments
            ],
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.state_file)

    def describe(self) -> list[dict[str, Any]]:
        return [asdict(a) | {"iface": str(a.iface)} for a in self.attachments]
