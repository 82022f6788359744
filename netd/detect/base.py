"""What every detector shares: the protocol the engine drives, the rules for a usable sample, and the
tick loop of the detectors that judge each port on its own.

A detector is a small state machine with no I/O and no clock: time arrives in the input
(``monotonic``, ``interval_s``). Each call to ``evaluate`` returns *every* finding the detector holds
active after that input, on every input path, so the engine can resolve what is no longer reported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, MutableMapping
from typing import Any, Generic, Protocol, TypeVar

from netd.config.detect import DetectConfig
from netd.detect.findings import Candidate, Scope
from netd.detect.inputs import DetectInput, InputPath, PortInput

__all__ = ["Detector", "PerPortDetector", "judgeable", "port_scope", "prune", "ratio"]

K = TypeVar("K", bound=tuple[Any, ...])  # (device, port), or (device, port, priority)
S = TypeVar("S")  # a detector's state for one key


class Detector(Protocol):
    kinds: tuple[str, ...]

    def evaluate(self, inp: DetectInput) -> list[Candidate]: ...


def judgeable(inp: DetectInput, cfg: DetectConfig) -> bool:
    """Whether deltas over this input's interval may be judged at all.

    The first sample has no interval; a sample after a long gap (a stalled loop, a suspended VM)
    averages over so much time that fractions and rates mean little, so it is skipped: findings are
    carried unchanged, neither confirmed nor resolved.
    """
    return inp.interval_s is not None and 0.0 < inp.interval_s <= cfg.max_gap


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def port_scope(host: str, p: PortInput, priority: int | None = None, subject: str | None = None) -> Scope:
    return Scope(host=host, device=p.device, port=p.port, netdev=p.netdev, priority=priority, subject=subject)


def prune(state: MutableMapping[Any, Any], present: Iterable[tuple[str, int]]) -> None:
    """Forget ports that are gone (their findings resolve; a port that returns starts afresh).

    State keys are ``(device, port)`` or tuples that start with them.
    """
    keep = set(present)
    for key in [k for k in state if (k[0], k[1]) not in keep]:
        del state[key]


class PerPortDetector(ABC, Generic[K, S]):
    """The tick loop of a detector that judges each port on its own, from that tick's deltas.

    On a tick: forget the ports that are gone, and unless the interval cannot be judged (see
    :func:`judgeable`), remember each port's input and :meth:`_step` it. On every input: report a
    :meth:`_finding` for each state, so a finding lasts exactly as long as its state says so.

    ``_state`` keys are ``(device, port)`` or tuples that start with them (e.g. one state per
    priority); a subclass creates its states in :meth:`_step`.
    """

    kinds: tuple[str, ...]

    def __init__(self, cfg: DetectConfig) -> None:
        self.cfg = cfg
        self._state: dict[K, S] = {}
        self._inputs: dict[tuple[str, int], PortInput] = {}

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        if inp.path is InputPath.TICK:
            self._tick(inp)
        return self._candidates(inp.host)

    def _tick(self, inp: DetectInput) -> None:
        present = [p.key for p in inp.ports]
        prune(self._state, present)
        prune(self._inputs, present)
        if judgeable(inp, self.cfg):
            assert inp.interval_s is not None
            for p in inp.ports:
                self._inputs[p.key] = p
                self._step(p, inp.interval_s)

    def _candidates(self, host: str) -> list[Candidate]:
        out = []
        for key, st in self._state.items():
            p = self._inputs.get((key[0], key[1]))
            found = None if p is None else self._finding(host, p, key, st)
            if found is not None:
                out.append(found)
        return out

    @abstractmethod
    def _step(self, p: PortInput, dt: float) -> None:
        """Advance this port's state(s) by one judged tick of ``dt`` seconds."""

    @abstractmethod
    def _finding(self, host: str, p: PortInput, key: K, st: S) -> Candidate | None:
        """The finding this state holds active, or None."""
