"""Real-time scheduling for the lab's timing-critical loops (the DCQCN controller, the lab daemon).

On a busy machine a normal thread that sleeps for a millisecond wakes up several milliseconds late
now and then (measured on the 2-vCPU development VM under load: ~15 % of a 2 s run lost to wake-ups
later than 2 ms at nice -10, none with SCHED_FIFO). The lab's loops sleep between short steps, so
running them SCHED_FIFO keeps DCQCN's timers honest without monopolising a CPU.

The scheduler is not the only thing that can stop a Python loop: a full garbage collection walks
every object the process holds, and in a process that has built up a large heap (a test session, a
notebook) that took 130 ms on the same VM with 3 million objects, a pause in which no reaction point
cuts and the incast's queue climbs towards XOFF. :func:`frozen_gc` moves what exists before a run
out of the collector's reach, so collections during the run only walk what the run allocates.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CONTROLLER_PRIORITY", "LABD_PRIORITY", "frozen_gc", "normal_priority", "realtime"]

# Above the host agents' pacers (10): whatever the agents do, the controller can still cut their
# rates and the lab daemon can still pause a port.
LABD_PRIORITY = 20
CONTROLLER_PRIORITY = 20
log = logging.getLogger(__name__)


@contextmanager
def realtime(priority: int) -> Iterator[bool]:
    """SCHED_FIFO for the calling thread inside the block (yields whether it was granted)."""
    try:
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:
        log.info("no real-time priority (%s): lab timing shares the CPU", exc)
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, before[0], before[1])


def normal_priority() -> None:
    """Put the calling thread back under the normal scheduler. A thread inherits its creator's policy
    (glibc's default), so one started from a real-time loop is real-time too unless it says otherwise:
    a helper's work (netd's ticks beside the controller) must not preempt the host agents."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (OSError, AttributeError) as exc:
        log.info("could not leave the real-time scheduler: %s", exc)


@contextmanager
def frozen_gc() -> Iterator[None]:
    """Inside the block, the garbage collector ignores every object that existed before it.

    Garbage among them waits for the first collection after the block, when ``gc.unfreeze`` hands
    them all back to the oldest generation. Python has one frozen set: when something froze objects
    before (a daemon's long-lived state, netd.daemon.loop), they all stay frozen, as that owner wants.
    """
    owner = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if owner:
            gc.unfreeze()
