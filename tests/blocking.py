"""Calling something that may block for good (an open() of a FIFO waits for a writer) without letting it
hang the test run: the call runs in a daemon thread that must finish in time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


def within(seconds: float, fn: Callable[[], T]) -> T:
    """fn()'s result, or its exception; fails the test (not hanging it) when fn blocks."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # handed to the test
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)  # a blocked thread must not keep pytest alive
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still blocked after {seconds} s (an open() of a FIFO?)"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]  # type: ignore[return-value]
