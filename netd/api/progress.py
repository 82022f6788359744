"""Progress of a long command (`netd bench collect`, `netd bench detect`, `netd tune` on a temporary
fabric): one line on stderr, never on stdout, so `--json` output stays one JSON document.

Shown when stderr is a terminal (the line rewrites itself with ``\\r`` and is cleared at the end), or
when the user asks with ``--progress`` (then, stderr being a file or a pipe, one plain line per
update at most every ``log_every_s``, for a log). Otherwise silent: a script that captures stderr
sees only errors.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["Progress", "add_progress_flag"]


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action="store_true",
        help="report progress on stderr even when it is not a terminal (on a terminal it always is)",
    )


class Progress:
    """``what: done/total note``, updated in place on a terminal; a no-op when not enabled."""

    def __init__(
        self,
        what: str,
        total: int | None = None,
        *,
        force: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        tty_every_s: float = 0.1,
        log_every_s: float = 1.0,
    ) -> None:
        self.what, self.total = what, total
        self.stream = sys.stderr if stream is None else stream
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):  # a closed or odd stream: not a terminal
            self.tty = False
        self.enabled = force or self.tty
        self._clock = clock
        self._every = tty_every_s if self.tty else log_every_s
        self._last = -float("inf")
        self._width = 0  # of the line on screen, to blank it out
        self.lines = 0  # updates written (for tests and the final newline)

    def update(self, done: int | None = None, note: str = "", *, force: bool = False) -> None:
        """Report ``done`` (of ``total``) and a note; throttled unless ``force`` (a phase change)."""
        if not self.enabled:
            return
        now = self._clock()
        if not force and now - self._last < self._every:
            return
        self._last = now
        count = "" if done is None else (f" {done}/{self.total}" if self.total else f" {done}")
        text = f"{self.what}:{count}{' ' + note if note else ''}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.lines += 1

    def close(self) -> None:
        """Blank the line on a terminal, so what is printed next starts on a clean line."""
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
