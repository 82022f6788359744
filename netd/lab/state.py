"""Where a lab keeps its state, and the state file that lets ``down`` undo everything.

``<lab root>/<name>/`` (lab root: ``/run/netd/lab`` by default, ``$NETD_LAB_ROOT`` or ``--root``)
holds ``lab.json`` (shape, qdisc handle, switch parameters, every process id), the host agents'
shared memory (``host<i>.shm``), the sysfs-shaped trees netd reads (``host<i>/``), the lab daemon's
socket (``labd.sock``) and logs (``log/``); lldpd's control sockets are in /run/netd/lab-lldp/
(see netd/lab/lldp.py for why).
``<lab root>/<name>.lock`` serialises ``up``/``down``/``run`` on one lab.
"""

from __future__ import annotations

import fcntl
import json
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from netd.config.files import read_regular
from netd.errors import LabError
from netd.lab.layout import LabLayout

__all__ = ["LabState", "default_root", "lab_lock", "lab_dir", "pick_qdisc_major"]


def default_root() -> Path:
    return Path(os.environ.get("NETD_LAB_ROOT", "/run/netd/lab"))


def lab_dir(root: Path, name: str) -> Path:
    return root / name


@dataclass
class LabState:
    name: str
    hosts: int
    tors: int
    link_mbps: float
    oversubscription: float
    qdisc_major: int
    buffer_bytes: int
    pfc: bool
    switch: dict[str, Any]  # kmin_bytes, kmax_bytes, pmax, xoff_bytes, xon_bytes
    namespaces: list[str] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)  # "labd", "agent:h0", "lldpd:tor0", ...
    agent_binary: str = ""
    complete: bool = False  # set once everything is up; a crash before leaves False

    @property
    def layout(self) -> LabLayout:
        return LabLayout(self.name, self.hosts, self.tors, self.link_mbps, self.oversubscription)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / ".lab.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, directory / "lab.json")

    @classmethod
    def load(cls, directory: Path) -> LabState | None:
        path = directory / "lab.json"
        try:
            data = json.loads(read_regular(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LabError(f"{path} is unreadable ({exc}); `netd lab down` still sweeps by name") from None
        try:
            return cls(**data)
        except TypeError as exc:
            raise LabError(f"{path} was written by another netd version ({exc})") from None


def pick_qdisc_major(root: Path, name: str) -> int:
    """A root qdisc major number for this lab, distinct from every other lab's under ``root``."""
    taken = set()
    if root.is_dir():
        for other in root.iterdir():
            state = LabState.load(other) if other.is_dir() and other.name != name else None
            if state is not None:
                taken.add(state.qdisc_major)
    major = 0x100 + zlib.crc32(name.encode()) % 0xE000
    while major in taken:
        major = 0x100 + (major - 0x100 + 1) % 0xE000
    return major


@contextmanager
def lab_lock(root: Path, name: str, wait: bool = True) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LabError(
                f"lab {name} is busy (another `netd lab` command holds {root}/{name}.lock)"
            ) from None
        yield
    finally:
        os.close(fd)
